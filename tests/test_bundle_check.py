"""``optkit bundle check`` end to end: the whole check runs one probe process and reads the tree's knobs once."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
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

ROOT = Path(__file__).resolve().parent.parent
CI = os.environ.get("CI") == "true"


def unavailable(message: str) -> None:
    pytest.fail(message) if CI else pytest.skip(message)


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


# --------------------------------------------------------------------------- one probe process, one scan


def counting_python(tmp_path: Path, real: str) -> tuple[Path, Path]:
    """A --vllm-python that logs each run (its arguments) and runs ``real``."""
    log, wrapper = tmp_path / "runs.log", tmp_path / "python"
    wrapper.write_text(f'#!/usr/bin/env bash\necho "$*" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def paired_python(vllm: str) -> str:
    python, why = find_vllm_python(vllm)
    if python is None:
        unavailable(why)
    return python


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
