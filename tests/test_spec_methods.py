"""Speculative decoding methods beside MTP: ``--spec-method mtp|eagle3|suffix``, ``--draft-model``, their
``--speculative-config``, their recipes, the refusals naming the flag, and ``bundle check`` accepting the argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from argv_support import flag_value
from optkit.bundle.check import check_bundle
from optkit.bundle.launch import Launch
from optkit.bundle.lock import lock_data
from optkit.bundle.writer import write_bundle
from optkit.cli.main import cli
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.report import dump_json, plan_data
from optkit.resolve.request_record import parse_request
from vllm_support import paired_python

DRAFT = "lightseekorg/kimi-k2.5-eagle3"
DFLASH = "z-lab/Kimi-K2.5-DFlash"


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _plan(workspace, **fields):
    return plan(parse_request({"model": "qwen3.5-35b", "target": "910c", **fields}), workspace)


# (id, request fields, the --speculative-config, the recipe the method implies)
METHODS = [
    ("mtp-flag", dict(mtp=True), {"method": "mtp", "num_speculative_tokens": 4}, "mtp-enable-k4"),
    ("mtp-method", dict(spec_method="mtp"), {"method": "mtp", "num_speculative_tokens": 4}, "mtp-enable-k4"),
    ("eagle3", dict(spec_method="eagle3", draft_model=DRAFT),
     {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3}, "spec-eagle3"),
    ("eagle3-k1", dict(spec_method="eagle3", draft_model=DRAFT, num_speculative_tokens=1),
     {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 1}, "spec-eagle3"),
    ("suffix", dict(spec_method="suffix", async_scheduling=False),
     {"method": "suffix", "num_speculative_tokens": 3}, "spec-suffix-decoding"),
    ("dflash", dict(spec_method="dflash", draft_model=DFLASH),
     {"method": "dflash", "model": DFLASH, "num_speculative_tokens": 15}, "spec-dflash"),
]


@pytest.mark.parametrize("fields, config, recipe", [c[1:] for c in METHODS], ids=[c[0] for c in METHODS])
def test_each_method_launches_its_speculative_config_and_selects_its_recipe(workspace, fields, config, recipe):
    result = _plan(workspace, **fields)
    launch = Launch(result, workspace)
    assert json.loads(flag_value(launch.argv, "--speculative-config")) == config
    assert launch.speculative == config
    assert recipe in result.selected
    others = {"mtp-enable-k4", "spec-eagle3", "spec-suffix-decoding", "spec-dflash"} - {recipe}
    assert not others & set(result.selected)  # one method at a time
    facts = result.facts
    assert (facts["spec.method"], facts["spec.speculative"], facts["spec.num_speculative_tokens"]) == \
        (config["method"], True, config["num_speculative_tokens"])
    k = config["num_speculative_tokens"]
    assert facts["workload.decode_rows"] == sorted({c * (1 + k) for c in (1, 4, 8)})  # verify rows, any method
    assert lock_data(result, workspace, launch)["launch"]["effective_speculative_config"] == config


def test_suffix_runs_without_async_scheduling_and_preflight_checks_arctic_inference(workspace, tmp_path):
    result = _plan(workspace, spec_method="suffix", async_scheduling=False)
    assert "--no-async-scheduling" in Launch(result, workspace).argv
    assert result.facts["spec.async_spec_decode"] is False
    write_bundle(result, workspace, tmp_path / "b")
    preflight = (tmp_path / "b" / "preflight.sh").read_text()
    assert "check_arctic_inference\n" in preflight and "import arctic_inference" in preflight
    risks = [r.text for r in workspace.catalog["spec-suffix-decoding"].risks if r.severity == "high"]
    assert any("arctic-inference" in text for text in risks)


def test_spec_method_mtp_is_the_plan_of_mtp(workspace):
    """``spec_method: mtp`` is held as ``mtp: true``: the two spellings plan byte for byte alike."""
    spelled = [dump_json(plan_data(_plan(workspace, **fields))) for fields in (dict(mtp=True), dict(spec_method="mtp"))]
    assert spelled[0] == spelled[1]


def test_without_the_new_options_nothing_new_is_launched(workspace):
    result = _plan(workspace, mtp=True)
    launch = Launch(result, workspace)
    assert "--quantization" not in launch.argv and "weights" not in plan_data(result)
    assert launch.model_default == "Qwen/Qwen3.5-35B-A3B"
    assert (result.facts["runtime.quantization"], result.facts["spec.draft_model"]) == ("bf16", "")


@pytest.mark.parametrize("args, code, message", [
    pytest.param(["--spec-method", "eagle3"], 1, "--spec-method eagle3 drafts with an EAGLE-3 model trained for the "
                 "target: give --draft-model HF_ID_OR_PATH", id="eagle3-without-draft"),
    pytest.param(["--draft-model", DRAFT], 1, f"--draft-model {DRAFT} is the draft model of --spec-method eagle3 or "
                 "dflash (speculative decoding is off); drop it, or give one of them", id="draft-without-eagle3"),
    pytest.param(["--spec-method", "dflash"], 1, "--spec-method dflash drafts with a DFlash model trained for the "
                 "target: give --draft-model HF_ID_OR_PATH", id="dflash-without-draft"),
    pytest.param(["--spec-method", "dflash", "--draft-model", DFLASH, "--vllm-ascend-version", "0.18.0"], 1,
                 "applies to vllm-ascend >=0.19.1rc1, this is 0.18.0", id="dflash-before-its-release"),
    pytest.param(["--mtp", "--draft-model", DRAFT], 1, "(speculative decoding is mtp)", id="draft-with-mtp"),
    pytest.param(["--spec-method", "suffix"], 1, "--spec-method suffix runs without async scheduling", id="suffix-async"),
    pytest.param(["--mtp", "--spec-method", "eagle3", "--draft-model", DRAFT], 2, "Invalid value for '--spec-method': "
                 "mtp: true (--mtp) and spec_method eagle3 ask for two speculative methods; give one",
                 id="two-methods"),
    pytest.param(["-k", "3"], 1, "--num-speculative-tokens needs --mtp or --spec-method", id="k-without-method"),
    pytest.param(["--spec-method", "eagle3", "--draft-model", "${EAGLE3_WEIGHT_PATH}"], 2,
                 "Invalid value for '--draft-model': '${EAGLE3_WEIGHT_PATH}' holds a shell expression, which serve.sh "
                 "would pass to vLLM unexpanded", id="draft-shell-expression"),
    pytest.param(["--spec-method", "ngram"], 2, "Invalid value for '--spec-method': 'ngram' is not one of 'mtp', "
                 "'eagle3', 'suffix'", id="unknown-method"),
])
def test_bad_combinations_are_refused_naming_the_flag(args, code, message):
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", *args])
    assert result.exit_code == code, result.output
    assert message in " ".join(result.output.split())


def test_a_request_file_with_two_methods_is_refused_at_its_line(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: qwen3.5-35b\nmtp: true\nspec_method: suffix\n")
    result = CliRunner().invoke(cli, ["plan", "--request", str(path)])
    assert result.exit_code == 1
    assert f"{path}:3: spec_method: mtp: true (--mtp) and spec_method suffix ask for two speculative methods" in \
        " ".join(result.output.split())


def test_eagle3_with_c8_weights_carries_the_pages_risk(workspace):
    result = _plan(workspace, spec_method="eagle3", draft_model=DRAFT, quantization="w8a8c8")
    risks = [r for r in workspace.catalog["spec-eagle3"].risks if r.when == "runtime.kv_cache_quantized"]
    assert result.facts["runtime.kv_cache_quantized"] and "C8 quantization with EAGLE3 is currently unsupported" in \
        risks[0].text


# --------------------------------------------------------------------------- vLLM's own parser and engine config


@pytest.mark.tree
@pytest.mark.vllm
@pytest.mark.parametrize("release, vllm, fields", [
    pytest.param("0.23.0", "0.23.0", dict(spec_method="eagle3", draft_model=DRAFT, quantization="w8a8"),
                 id="0.23-eagle3-w8a8"),
    pytest.param("0.23.0", "0.23.0", dict(spec_method="suffix", async_scheduling=False), id="0.23-suffix"),
    pytest.param("0.30.0rc2", "0.30.0", dict(spec_method="eagle3", draft_model=DRAFT, quantization="w4a8"),
                 id="0.30-eagle3-w4a8"),
    pytest.param("0.30.0rc2", "0.30.0", dict(spec_method="suffix", async_scheduling=False), id="0.30-suffix"),
    pytest.param("0.30.0rc2", "0.30.0", dict(spec_method="dflash", draft_model=DFLASH), id="0.30-dflash"),
])
def test_bundle_check_accepts_the_argv(workspace, tmp_path, release, vllm, fields):
    out = tmp_path / "bundle"
    write_bundle(_plan(workspace, vllm_ascend_version=release, **fields), workspace, out)
    report = check_bundle(out, vllm_python=paired_python(vllm))
    statuses = {c.name: c.status for c in report.checks}
    assert report.problems == [] and statuses["vllm"] == statuses["engine"] == "pass", report.problems
    engine = next(c for c in report.checks if c.name == "engine")
    if fields.get("quantization"):
        assert "--quantization ascend is registered here as its plugin registers it" in engine.note
    assert "built without --speculative-config" in engine.note  # a Hub draft model, or arctic-inference absent


def test_dflash_with_a_pipeline_is_refused_with_the_guides_line(workspace):
    """vllm-ascend 0.30.0rc2's pipeline parallel guide: "DFlash | Not supported." (:299)."""
    from optkit.errors import RequestError

    with pytest.raises(RequestError, match=r"DFlash with PP is not supported \(.*pipeline_parallel.md:299\)"):
        _plan(workspace, spec_method="dflash", draft_model=DFLASH, pp=2, vllm_ascend_version="0.30.0rc2")


def test_a_pages_capture_list_that_reaches_the_step_meets_a_methods_capture_need(workspace):
    """Qwen3-Dense.md's low-latency command (0.23.0 :625) runs Qwen3-32B W8A8 at TP 8 with eagle3 k = 3 and a capture
    list up to 600 rows: the plan carries it (the capture recipes have no effect there), and eagle3's need for
    capture sizes is met by it. Before, eagle3 required cudagraph-capture-sizes-spec-aware, which the page's list
    left without effect, and the request was refused."""
    result = _plan(workspace, model="qwen3-32b", tp=8, quantization="w8a8", spec_method="eagle3", draft_model=DRAFT,
                   num_speculative_tokens=3, goal="latency")
    assert "spec-eagle3" in result.selected and "cudagraph-capture-sizes-spec-aware" not in result.selected
    assert result.facts["page.command_capture_sizes_max"] == 600 >= result.facts["workload.decode_rows_max"]
    sizes = json.loads(flag_value(Launch(result, workspace).argv, "--compilation-config"))["cudagraph_capture_sizes"]
    assert max(sizes) == 600
