"""``optkit bundle check`` end to end: the way to a missing vLLM works as printed, the whole check runs
one probe process and reads the tree's knobs once, and docs/bundle.md shows what the command prints."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import optkit.catalog.paths as paths
import optkit.versions.knobs as knobs_module
from optkit.bundle.check import check_bundle, check_vllm, read_lock
from optkit.bundle.probe import find_vllm_python
from optkit.bundle.writer import write_bundle
from optkit.cli.main import cli
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from vllm_support import paired_python

ROOT = Path(__file__).resolve().parent.parent


def hide_this_pythons_vllm(monkeypatch) -> None:
    """find_vllm_python reads the installed vLLM's version from its metadata: say there is none."""
    real = importlib.metadata.version

    def version(name):
        if name == "vllm":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)


def bundle_for(tmp_path: Path, release: str) -> Path:
    workspace = load_workspace()
    out = tmp_path / f"bundle-{release}"
    write_bundle(plan(Request(model="qwen3.5-35b", target="910c", mtp=True, vllm_ascend_version=release), workspace),
                 workspace, out)
    return out


# --------------------------------------------------------------------------- a missing vLLM


PRINTED_RELEASE, PRINTED_VLLM = "0.30.0rc2", "0.30.0"  # the vllm-ascend release and its vLLM (scripts/test's venv)
OWN_VENV = "pass --vllm-python PYTHON, a Python with vLLM {v} (e.g. of a virtualenv of its own with `pip install vllm=={v}`)"


@pytest.mark.parametrize("version, cwd, installed, way", [
    pytest.param("0.23.0", "checkout", False, "build its virtualenv with `bash scripts/vllm-venv 0.23.0`, or " + OWN_VENV,
                 id="from-the-checkout"),
    pytest.param("0.23.0", "elsewhere", False, f"build its virtualenv with `bash {ROOT}/scripts/vllm-venv 0.23.0`, or "
                 + OWN_VENV, id="from-another-directory"),
    pytest.param("0.27.1", "checkout", False, "scripts/vllm-venv cannot build it (no tests/requirements-vllm-0.27.txt: "
                 "its dependency set is not known); " + OWN_VENV, id="no-dependency-set-for-that-vllm"),
    pytest.param("0.23.0", "elsewhere", True, "build its virtualenv in optkit's source checkout with "
                 "`bash scripts/vllm-venv 0.23.0` (scripts/ and tests/ are not part of an installed optkit), or "
                 + OWN_VENV, id="installed-optkit"),
])
def test_a_missing_vllm_is_named_with_a_way_to_get_it_that_works_as_printed(tmp_path, monkeypatch, version, cwd,
                                                                            installed, way):
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT if cwd == "checkout" else tmp_path)
    hide_this_pythons_vllm(monkeypatch)
    if installed:
        monkeypatch.setattr(paths, "checkout_root", lambda: None)
    python, why = find_vllm_python(version)
    assert python is None
    assert why == (f"vLLM {version} not installed (this Python has no vLLM, and there is no "
                   f"{tmp_path / 'cache' / 'venvs' / f'vllm-{version}'}); {way.format(v=version)}")


@pytest.mark.slow
@pytest.mark.vllm
def test_the_printed_command_builds_the_venv_that_bundle_check_then_uses(tmp_path, monkeypatch):
    """Run the suggestion as printed, from another directory, then check a bundle in that venv. vLLM 0.30.0
    (the newest release's pairing): scripts/test builds its venv with this same command, so the printed
    command finds it complete and the suite needs no second vLLM venv (0.23.0: ~2 GB, two minutes here);
    without it (this test alone on a fresh cache) the command builds it, several minutes."""
    cache = os.environ.get("OPTKIT_CACHE_DIR")
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    hide_this_pythons_vllm(monkeypatch)
    _, why = find_vllm_python(PRINTED_VLLM)
    command = re.search(r"`(bash [^`]+)`", why).group(1)
    assert command == f"bash {ROOT}/scripts/vllm-venv {PRINTED_VLLM}"
    monkeypatch.delenv("OPTKIT_CACHE_DIR") if cache is None else monkeypatch.setenv("OPTKIT_CACHE_DIR", cache)
    built = subprocess.run(shlex.split(command), cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, f"{command} (as printed) failed: {built.stderr[-2000:]}"
    venv = paths.cache_dir() / "venvs" / f"vllm-{PRINTED_VLLM}"
    assert built.stdout.splitlines()[-1] == str(venv) and (venv / ".complete").is_file()
    python, found = find_vllm_python(PRINTED_VLLM)
    assert (python, found) == (str(venv / "bin" / "python"), str(venv))
    check = check_vllm(read_lock(bundle_for(tmp_path, PRINTED_RELEASE)), python=python)
    assert check.status == "pass" and check.note.startswith(f"vLLM {PRINTED_VLLM};"), (check.problems, check.note)


# --------------------------------------------------------------------------- one probe process, one scan


def counting_python(tmp_path: Path, real: str) -> tuple[Path, Path]:
    """A --vllm-python that logs each run (its arguments) and runs ``real``."""
    log, wrapper = tmp_path / "runs.log", tmp_path / "python"
    wrapper.write_text(f'#!/usr/bin/env bash\necho "$*" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


@pytest.mark.tree
@pytest.mark.parametrize("release, vllm, probes", [
    pytest.param("0.23.0", None, 0, id="without-vllm"),
    pytest.param("0.23.0", "0.23.0", 1, marks=pytest.mark.vllm, id="lenient-release"),
    pytest.param("0.30.0rc2", "0.30.0", 1, marks=pytest.mark.vllm, id="strict-release-with-ascend-config"),
])
def test_the_check_reads_the_tree_once_and_runs_one_probe_process(tmp_path, monkeypatch, release, vllm, probes):
    """vLLM's import is the check's time: every vLLM-side check shares one process; the tree's knobs
    (an ast scan of the whole tree) are read once, not once per check."""
    scans = []
    real_scan = knobs_module.scan_knobs
    monkeypatch.setattr(knobs_module, "scan_knobs", lambda root: scans.append(root) or real_scan(root))
    bundle = bundle_for(tmp_path, release)
    python, log = counting_python(tmp_path, paired_python(vllm)) if vllm else (None, tmp_path / "runs.log")
    report = check_bundle(bundle, use_vllm=bool(vllm), vllm_python=python)
    vllm_side = {c.name: (c.status, c.note) for c in report.checks if c.name in ("vllm", "engine")}
    assert report.problems == [] and all(status == "pass" for status, _ in vllm_side.values()) if vllm else \
        vllm_side == {"vllm": ("skipped", "skipped: --no-vllm"), "engine": ("skipped", "skipped: --no-vllm")}
    runs = log.read_text().splitlines() if log.exists() else []
    assert (len(scans), len(runs)) == (1, probes), runs
    if release == "0.30.0rc2":
        assert {c.name: c.status for c in report.checks}["ascend-config"] == "pass"


# --------------------------------------------------------------------------- docs


@pytest.mark.tree
@pytest.mark.vllm
def test_docs_show_what_bundle_check_prints_for_the_example_bundle(monkeypatch):
    text = (ROOT / "docs" / "bundle.md").read_text(encoding="utf-8")
    section = text.split("\n## optkit bundle check\n", 1)[1]
    shown = [line[4:] for line in re.search(r"(?m)(^    (PASS|FAIL|SKIP)  .*\n)+", section).group(0).splitlines()]
    paired_python("0.23.0")
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["bundle", "check", "docs/example-bundle"])
    assert result.exit_code == 0, result.output
    assert shown == result.output.splitlines()


# --------------------------------------------------------------------------- the engine configuration


def two_node_bundle(tmp_path: Path, monkeypatch, release: str, launch: str) -> Path:
    """The two-node TP8 × DP2 bundle of finding 3 (issue 25): ``fixed`` as optkit writes it, ``leader-start-rank``
    as it was written before (every node, the leader too, passing --data-parallel-start-rank)."""
    import optkit.bundle.launch as launch_module

    if launch == "leader-start-rank":
        real = launch_module.node_options
        monkeypatch.setattr(launch_module, "node_options", lambda layout: real(layout)[:2] + list(
            launch_module.DP_WORKER_ARGS) + real(layout)[2:])
        monkeypatch.setattr(launch_module, "worker_args", lambda layout: list(launch_module.WORKER_ARGS))
    workspace = load_workspace()
    out = tmp_path / f"two-nodes-{release}-{launch}"
    write_bundle(plan(Request(model="qwen3.5-397b", target="910b", tp=8, dp=2, nodes=2, quantization="w8a8", vllm_ascend_version=release),
                      workspace), workspace, out)
    monkeypatch.undo()
    return out


LEADER_REFUSED = ("node 0 (leader): the request (optkit plan flags): vLLM 0.30.0 resolves external DP load balancing on "
                  "the leader (create_engine_config), so its handshake would refuse node 1: \"Remote engine 1 must not "
                  "use --headless in external or hybrid dp lb mode\" (the handshake's rule in vllm/v1/engine/utils.py, "
                  "applied to the modes vLLM resolved: the handshake itself needs the engines)")


@pytest.mark.tree
@pytest.mark.vllm
@pytest.mark.parametrize("release, vllm, launch, problems, leader", [
    pytest.param("0.30.0rc2", "0.30.0", "leader-start-rank", [LEADER_REFUSED], "external load balancing",
                 id="0.30-start-rank-on-the-leader-refused"),
    pytest.param("0.30.0rc2", "0.30.0", "fixed", [], "internal load balancing", id="0.30-fixed"),
    pytest.param("0.23.0", "0.23.0", "leader-start-rank", [], "internal load balancing",
                 id="0.23-start-rank-0-read-as-none"),
    pytest.param("0.23.0", "0.23.0", "fixed", [], "internal load balancing", id="0.23-fixed"),
])
def test_the_engine_check_resolves_each_nodes_launch_as_the_paired_vllm_does(tmp_path, monkeypatch, release, vllm,
                                                                             launch, problems, leader):
    bundle = two_node_bundle(tmp_path, monkeypatch, release, launch)
    report = check_bundle(bundle, vllm_python=paired_python(vllm))
    engine = next(c for c in report.checks if c.name == "engine")
    assert (engine.status, engine.problems, report.problems) == ("fail" if problems else "pass", problems, problems)
    assert f"node 0 (leader): DP rank 0 of 2, {leader}; node 1 (worker): DP rank 1 of 2, headless" in engine.note
    assert engine.note.startswith(f"vLLM {vllm} ran AsyncEngineArgs.from_cli_args and create_engine_config on its "
                                  "CPU platform with tests/fixtures/hf/qwen3.5-397b-a17b/config.json")
    assert "not run without a device: the NPU platform's config updates (vllm-ascend's check_and_update_config" in engine.note
    assert engine.note.endswith("the DP handshake (its headless rule applied to the modes above)")


@pytest.mark.parametrize("given, own, checkout, expected", [
    pytest.param("mine.json", None, True, ("mine.json", "--model-config mine.json"), id="given"),
    pytest.param(None, "own.json", True, ("own.json", "the request's model config own.json"), id="the-requests-own"),
    pytest.param(None, None, True, ("{root}/tests/fixtures/hf/qwen3_5_moe/config.json",
                                    "tests/fixtures/hf/qwen3_5_moe/config.json"), id="the-profiles-fixture"),
    pytest.param(None, None, False, (None, "no config.json for the model: pass --model-config PATH (the checkpoint's "
                                           "config.json; no weights are read)"), id="installed-optkit"),
])
def test_the_engine_configuration_is_built_with_the_models_config(tmp_path, monkeypatch, given, own, checkout, expected):
    from optkit.bundle.engine_check import model_config_for

    monkeypatch.chdir(tmp_path)
    (tmp_path / "own.json").write_text("{}")
    if not checkout:
        monkeypatch.setattr(paths, "checkout_root", lambda: None)
    lock = {"request": {"model_config": own}, "launch": {"parameters": {"SERVED_NAME": "qwen3.5-35b-a3b"}}}
    found = model_config_for(lock, Path(given) if given else None)
    assert found == (expected[0] and expected[0].format(root=ROOT), expected[1])


def test_a_fixture_named_otherwise_is_found_by_its_catalog_file():
    """tests/fixtures/hf/internvl3.5-38b/ holds the config of profile internvl3_5-38b (its CATALOG file says so)."""
    from optkit.bundle.engine_check import model_config_for

    lock = {"request": {}, "launch": {"parameters": {"SERVED_NAME": "internvl3_5-38b"}}}
    assert model_config_for(lock) == (str(ROOT / "tests/fixtures/hf/internvl3.5-38b/config.json"),
                                      "tests/fixtures/hf/internvl3.5-38b/config.json")


@pytest.mark.slow
@pytest.mark.vllm
def test_a_model_class_the_stand_ins_cannot_inspect_is_no_refusal_of_the_launch(tmp_path):
    """LLaVA-OneVision's module needs torchvision beyond importing it; on a CPU Python without it vLLM 0.23.0 says the
    class 'failed to be inspected': that is this machine's lack, not the launch's fault (the engine check says which
    modules, and runs where they are installed)."""
    workspace = load_workspace()
    write_bundle(plan(Request(model="llava-onevision-qwen2-0.5b-ov-hf", target="910c"), workspace), workspace,
                 tmp_path / "bundle")
    report = check_bundle(tmp_path / "bundle")
    engine = next(c for c in report.checks if c.name == "engine")
    assert report.problems == []
    if importlib.util.find_spec("torchvision") is None:
        assert engine.status == "skipped" and "torchvision" in engine.note and "could not inspect" in engine.note
    else:
        assert engine.status == "pass"


# --------------------------------------------------------------------------- what is skipped, said once


@pytest.mark.tree
@pytest.mark.parametrize("args, lines, error", [
    pytest.param(["--no-vllm"], ["SKIP  vllm  (skipped: --no-vllm)", "SKIP  engine  (skipped: --no-vllm)",
                                 "SKIP  ascend-config  (skipped: --no-vllm)"], None, id="no-vllm-says-skip"),
    pytest.param([], ["SKIP  vllm  (skipped: vLLM 0.30.0 not installed here; the way to get it)",
                      "SKIP  engine  (skipped: no vLLM to run it in (the vllm line says why))",
                      "SKIP  ascend-config  (skipped: no vLLM to run it in (the vllm line says why))"],
                 "optkit: error: bundle {bundle}: the vllm and engine checks did not run: no vLLM 0.30.0 here (its SKIP "
                 "line says how to get it); pass --no-vllm to check without it", id="missing-vllm-said-once"),
])
def test_skipped_vllm_checks_are_listed_and_the_error_does_not_repeat_them(tmp_path, monkeypatch, args, lines, error):
    import optkit.bundle.check as check_module

    monkeypatch.setattr(check_module, "find_vllm_python",
                        lambda version, given=None: (None, f"vLLM {version} not installed here; the way to get it"))
    bundle = bundle_for(tmp_path, "0.30.0rc2")
    result = CliRunner().invoke(cli, ["bundle", "check", str(bundle), *args])
    shown = [line for line in result.output.splitlines() if line.startswith("SKIP  ")]
    assert shown == lines, result.output
    assert result.output.count("the way to get it") == (0 if args else 1)
    if error is None:
        assert result.exit_code == 0, result.output
    else:
        assert (result.exit_code, result.output.splitlines()[-1]) == (1, error.format(bundle=bundle))


@pytest.mark.slow
@pytest.mark.vllm
def test_a_checkpoints_own_fp8_quantization_is_looked_up_with_the_stand_ins(tmp_path):
    """DeepSeek-V3.1's fp8 weights served as published (no --quantization): vLLM 0.23.0 looks the method up by
    importing every method's config, compressed-tensors' too, which this CPU Python may lack; before, that import
    was blamed on optkit's launch."""
    workspace = load_workspace()
    write_bundle(plan(Request(model="deepseek-v3.1", target="910c", tp=32), workspace), workspace, tmp_path / "bundle")
    report = check_bundle(tmp_path / "bundle")
    engine = next(c for c in report.checks if c.name == "engine")
    assert report.problems == [] and engine.status == "pass", report.problems
