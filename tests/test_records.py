"""Verified-on records (optkit.catalog.records): loading, refusals with reasons, and what the resolver
and the catalog commands make of an accepted one. The record here is written by ``record_file`` from
data; the end-to-end test (tests/measure/test_ladder_e2e.py) records a real (simulated) ladder run."""

from __future__ import annotations

import shutil

import pytest
import yaml

from optkit.catalog.loader import load_catalog
from optkit.catalog.paths import project_root
from optkit.catalog.records import Record, effective_level, load_records, patch_hashes, record_file
from optkit.catalog.lint import lint
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

ROOT = project_root()
REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4], "input_len": 32, "output_len": 8,
           "min_tokens": False}  # no min_tokens: with it the sampler fast path has no effect
MEASURED = "sampler-greedy-bf16-fastpath"  # the article gives no number for it
REGRESSING = "gdn-conv-weight-transpose-cache"  # the article's host time says it gains


def record_data(catalog, **changes) -> dict:
    data = {
        "record_version": 1, "target": "910c", "model": "qwen3.5-35b-a3b",
        "release": {"vllm_ascend": "0.23.0", "vllm": "0.23.0"}, "tree_digest": "ab" * 32,
        "host": {"npu": "910C", "target": "910c", "driver": "24.1.rc3", "cann": "9.0.1",
                 "packages": {"vllm": "0.23.0", "vllm_ascend": "0.23.0"}},
        "workload": {"concurrency": [1, 4], "input_len": 32, "output_len": 8, "mtp": False,
                     "num_speculative_tokens": 0, "tp": 2, "dp": 1, "ep": True,
                     "sampling": "greedy", "min_tokens": False},
        "ladder": "incremental", "accuracy_gate": "passed",
        "recipes": {
            MEASURED: {"step": "01-x", "patches": patch_hashes(catalog, MEASURED),
                       "tpot_delta_ms": {1: -1.2, 4: -0.01}, "noise_ms": {1: 0.05, 4: 0.05},
                       "verdict": {1: "gain", 4: "no-measurable-effect"},
                       "reference_tpot_ms": {1: 20.0, 4: 24.0}, "repeats": 2},
            REGRESSING: {"step": "02-y", "patches": patch_hashes(catalog, REGRESSING),
                         "tpot_delta_ms": {1: 0.8, 4: 0.9}, "noise_ms": {1: 0.05, 4: 0.05},
                         "verdict": {1: "regression", 4: "regression"},
                         "reference_tpot_ms": {1: 18.8, 4: 24.0}, "repeats": 2}},
        "results": {"00-baseline/r1/c1.json": "cd" * 32},
    }
    data.update(changes)
    return data


@pytest.fixture
def root(tmp_path):
    for name in ("recipes", "models", "targets", "kernels"):
        shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


def write(root, data) -> str:
    name, text = record_file(Record.model_validate(data))
    (root / "verified").mkdir(exist_ok=True)
    (root / "verified" / name).write_text(text, encoding="utf-8")
    return name


def decisions(root):
    result = plan(Request(**REQUEST), load_workspace(root))
    return result, result.resolution.decisions


def test_an_accepted_record_changes_numbers_labels_and_the_level(root):
    name = write(root, record_data(load_catalog(root)))
    result, d = decisions(root)
    stem = name.removesuffix(".yaml")
    assert d[MEASURED].benefit.per_concurrency == {1: 1.2, 4: 0.0}
    assert d[MEASURED].benefit.basis[1] == (f"measured on 910C (driver 24.1.rc3, CANN 9.0.1), vllm-ascend 0.23.0, "
                                            f"record {stem}: Δ -1.2 ± 0.05 ms")
    assert "no measurable effect (Δ -0.01 ± 0.05 ms)" in d[MEASURED].benefit.basis[4]
    assert d[REGRESSING].status.value == "regresses" and "measured on 910C" in d[REGRESSING].reason
    catalog = load_catalog(root)
    assert effective_level(catalog[MEASURED], load_workspace(root).records).value == "hardware-verified"
    assert effective_level(catalog["waterfall-hccl-aiv"], load_workspace(root).records).value == "declared"


def test_without_records_the_article_numbers_stand(root):
    _, d = decisions(root)
    assert d[MEASURED].benefit.per_concurrency == {1: None, 4: None}
    assert d[REGRESSING].status.value == "selected"


@pytest.mark.parametrize("change, applies", [
    pytest.param({"model": "qwen3.6-27b"}, False, id="other-model"),
    pytest.param({"target": "910b"}, False, id="other-target"),
    pytest.param({"release": {"vllm_ascend": "0.26.0", "vllm": "0.26.0"}}, False, id="other-release"),
    pytest.param({"workload": {"concurrency": [1, 4], "input_len": 1024, "output_len": 512, "mtp": False,
                               "num_speculative_tokens": 0, "tp": 2, "dp": 1, "ep": True,
                     "sampling": "greedy", "min_tokens": False}},
                 False, id="other-workload"),
    *[pytest.param({"workload": {"concurrency": [1, 4], "input_len": 32, "output_len": 8, "mtp": False,
                                 "num_speculative_tokens": 0, "tp": 2, "dp": 1, "ep": True, "sampling": "greedy",
                                 "min_tokens": False, **layout}}, False, id=f"other-{name}")
      for name, layout in (("tp", {"tp": 4}), ("dp", {"dp": 2}), ("ep", {"ep": False}))],
    pytest.param({"host": {"npu": "Ascend910", "target": "910c"}}, True, id="other-host-same-target"),
    pytest.param({"workload": {"concurrency": [1, 4], "input_len": 32, "output_len": 8, "mtp": False,
                               "num_speculative_tokens": 0, "tp": 2, "dp": 1, "ep": True,
                               "sampling": "greedy", "min_tokens": True}}, False, id="other-min-tokens"),
])
def test_a_record_counts_only_for_the_request_it_measured(root, change, applies):
    write(root, record_data(load_catalog(root), **change))
    _, d = decisions(root)
    assert (d[MEASURED].benefit.per_concurrency[1] == 1.2) is applies


def _edit_number(root, name):
    path = root / "verified" / name
    path.write_text(path.read_text().replace("-1.2", "-3.0"))


def _unknown_recipe(root, name):
    data = record_data(load_catalog(root))
    data["recipes"]["no-such-recipe"] = data["recipes"].pop(REGRESSING)
    (root / "verified" / name).unlink()
    return write(root, data)


def _patch_changed(root, name):
    patch = next((root / "recipes" / MEASURED).glob("*.patch"))
    patch.write_text(patch.read_text() + "\n")


def _schema(root, name):
    path = root / "verified" / name
    data = yaml.safe_load(path.read_text())
    data["recipes"][MEASURED]["verdict"][1] = "faster"
    path.write_text(yaml.safe_dump(data))


@pytest.mark.parametrize("tamper, recipe, reason", [
    pytest.param(_edit_number, None, "its content has digest", id="edited-number"),
    pytest.param(_schema, None, "not a valid record: line {line}: recipes.sampler-greedy-bf16-fastpath.verdict[1]: "
                 "Input should be 'gain', 'no-measurable-effect' or 'regression'", id="schema"),
    pytest.param(_unknown_recipe, "no-such-recipe", "unknown recipe 'no-such-recipe'", id="unknown-recipe"),
    pytest.param(_patch_changed, MEASURED, "the recipe changed since, so the measurement is not of it", id="patch-hash"),
])
def test_a_record_that_does_not_match_is_refused_with_the_reason(root, tamper, recipe, reason):
    name = write(root, record_data(load_catalog(root)))
    name = tamper(root, name) or name
    text = (root / "verified" / name).read_text().splitlines()
    reason = reason.replace("{line}", str(next((i for i, t in enumerate(text, 1) if "faster" in t), 0)))
    records = load_records(root, load_catalog(root))
    refusal = next(r for r in records.refused if r.recipe == recipe)
    assert reason in refusal.reason
    assert any(reason in str(p) and str(p).startswith(f"verified/{name}") for p in lint(root))
    _, d = decisions(root)
    if recipe != "no-such-recipe":
        assert d[MEASURED].benefit.per_concurrency[1] is None  # the article's (none) again


def test_show_and_the_bundle_name_the_measurement(root):
    from optkit.bundle.writer import bundle_files
    from optkit.catalog.markdown import recipe_markdown

    name = write(root, record_data(load_catalog(root))).removesuffix(".yaml")
    workspace = load_workspace(root)
    shown = recipe_markdown(workspace.catalog, MEASURED, workspace.records)
    assert (f"- measured on 910C (driver 24.1.rc3, CANN 9.0.1), vllm-ascend 0.23.0, record {name}: "
            "c1 -1.2 ± 0.05 ms (gain), c4 -0.01 ± 0.05 ms (no measurable effect)") in shown
    files = bundle_files(plan(Request(**REQUEST), workspace), workspace)
    lock = yaml.safe_load(files["optkit.lock.json"])
    assert lock["recipes"][MEASURED]["verification"] == "hardware-verified"
    assert "**Verification:** hardware-verified (measured on 910C" in files["README.md"].decode()


def test_a_warm_plan_reads_the_records_without_pydantic(root, tmp_path):
    """The records' files are validated once; warm, the cache gives them frozen (and the plan uses them)."""
    import os
    import subprocess
    import sys

    write(root, record_data(load_catalog(root)))
    code = ("import sys\nfrom pathlib import Path\nfrom optkit.resolve.plan import load_workspace, plan\n"
            "from optkit.resolve.request_record import parse_request\n"
            f"ws = load_workspace(Path({str(root)!r}))\n"
            f"result = plan(parse_request({REQUEST!r}), ws)\n"
            f"print(result.resolution.decisions[{MEASURED!r}].benefit.per_concurrency[1],\n"
            "      sorted(m for m in sys.modules if m == 'pydantic' or m.startswith('pydantic.')))")
    env = dict(os.environ, OPTKIT_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0].startswith("1.2 [") and runs[0] != "1.2 []\n"  # cold: validated with pydantic
    assert runs[1] == "1.2 []\n"
