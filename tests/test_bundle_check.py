"""``optkit bundle check`` end to end: the way to a missing vLLM works as printed, the whole check runs
one probe process and reads the tree's knobs once, and docs/bundle.md shows what the command prints."""

from __future__ import annotations

import importlib.metadata
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
    assert report.problems == [] and not [c for c in report.checks if c.name == "vllm" and c.status != "pass"]
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
