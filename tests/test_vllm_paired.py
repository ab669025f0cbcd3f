"""optkit bundle check with the parser of the vLLM paired with the bundle's release: vLLM 0.30.0 (paired with
the newest release, 0.30.0rc2) in its own virtualenv, built by scripts/vllm-venv and cached under the optkit
cache dir; and, on that strict release, the tree's own AscendConfig validating the bundle's --additional-config."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from compat_support import release_trees
from optkit.bundle.check import (check_ascend_config, check_bundle, check_config_keys, find_vllm_python,
                                 read_lock, tree_knobs)
from optkit.bundle.writer import write_bundle
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

ROOT = Path(__file__).resolve().parent.parent
CI = bool(os.environ.get("CI"))
pytestmark = [pytest.mark.vllm, pytest.mark.tree]


@pytest.fixture(scope="session")
def vllm_030() -> str:
    """The Python of the cached vLLM 0.30.0 virtualenv (built on first use: a few minutes, then reused)."""
    started = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "vllm-venv"), "0.30.0"], capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode:
        message = f"scripts/vllm-venv 0.30.0 failed: {proc.stderr[-2000:]}"
        pytest.fail(message) if CI else pytest.skip(message)
    print(f"vLLM 0.30.0 virtualenv ready in {time.monotonic() - started:.1f}s: {proc.stdout.strip()}")
    python, found = find_vllm_python("0.30.0")
    assert python is not None, found
    return python


def _bundle(tmp_path: Path, version: str, **fields) -> Path:
    workspace = load_workspace()
    out = tmp_path / f"bundle-{version}"
    request = Request(**{"model": "qwen3.5-35b", "target": "910c", "mtp": True, "vllm_ascend_version": version, **fields})
    write_bundle(plan(request, workspace), workspace, out)
    return out


def test_newest_release_bundle_passes_vllm_0_30_and_its_ascend_config(vllm_030, tmp_path):
    # fused MC2 forced in: its env var is an additional_config key on 0.30, which the real AscendConfig must take
    bundle = _bundle(tmp_path, "0.30.0rc2", **{"with": ["moe-fused-mc2-enable"]})
    report = check_bundle(bundle, tree=release_trees()["0.30.0rc2"])
    checks = {c.name: c for c in report.checks}
    assert report.problems == [], report.problems
    assert checks["vllm"].status == "pass" and checks["vllm"].note.startswith("vLLM 0.30.0;"), checks["vllm"].note
    assert checks["ascend-config"].status == "pass", checks["ascend-config"].note
    assert read_lock(bundle)["launch"]["additional_config"]["enable_fused_mc2"] == 1


@pytest.mark.parametrize("fields", [dict(tp=2, dp=16), dict(tp=16, target="910b")], ids=["dp-across-nodes", "tp-across-nodes"])
def test_vllm_0_30_accepts_every_nodes_argv_of_a_multi_node_bundle(vllm_030, tmp_path, fields):
    """The leader's and the worker's argv of a two-node plan pass vLLM 0.30.0's parser too."""
    from optkit.bundle.check import check_vllm

    lock = read_lock(_bundle(tmp_path, "0.30.0rc2", **fields))
    check = check_vllm(lock, python=vllm_030)
    assert check.status == "pass", check.problems
    assert check.note.startswith("vLLM 0.30.0;") and "the argv of all 2 nodes" in check.note


def test_the_real_ascend_config_rejects_a_key_the_release_does_not_know(vllm_030, tmp_path):
    bundle = _bundle(tmp_path, "0.30.0rc2")
    lock = read_lock(bundle)
    lock["launch"]["additional_config"]["ascend_compilation_config"]["enable_super_kernl"] = True
    lock["launch"]["sources"]["additional_config.ascend_compilation_config.enable_super_kernl"] = "waterfall-static-kernel"
    (bundle / "optkit.lock.json").write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    tree = release_trees()["0.30.0rc2"]
    knobs = tree_knobs(tree)
    checks = {"ascend-config": check_ascend_config(lock, knobs, python=vllm_030, root=tree),
              "config-keys": check_config_keys(lock, knobs, [])}
    assert checks["ascend-config"].problems == [
        "recipe waterfall-static-kernel: AscendConfig rejects --additional-config "
        "ascend_compilation_config.enable_super_kernl: unexpected_keyword_argument: Unexpected keyword argument"]
    assert any("enable_super_kernl" in p and "would stop at start-up" in p for p in checks["config-keys"].problems)


def test_static_kernel_turns_super_kernel_on_in_0_30_0rc2(vllm_030):
    """The upstream claim behind compile-super-kernel's `upstream` entry, checked by the release's own class."""
    from optkit.bundle.check import run_probe

    result = run_probe({"additional_config": {"ascend_compilation_config": {"enable_static_kernel": True}}},
                       vllm_030, script="ascend_config_probe.py",
                       env={"VLLM_TARGET_DEVICE": "cpu", "VLLM_PLUGINS": "", "PYTHONPATH": str(release_trees()["0.30.0rc2"])})
    assert result["status"] == "ok", result
    assert result["config"]["enable_super_kernel"] is True
