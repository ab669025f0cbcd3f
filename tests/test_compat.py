"""Recipe compatibility: the catalog's real patches against the real vllm-ascend 0.23.0 tree."""

from __future__ import annotations

import pytest

from compat_support import (all_in_order, check_python, needs_patches, pristine, recipes_with_patches,
                            scratch_tree, specs, touched_python)
from optkit.apply import apply, revert
from optkit.errors import OptkitError
from optkit.tree import tree_checksum

pytestmark = [pytest.mark.tree]


@pytest.mark.parametrize("recipe_id", recipes_with_patches() or ["<none>"])
@needs_patches
def test_patch_applies_alone_and_compiles(tmp_path, recipe_id):
    tree = scratch_tree(tmp_path)
    patch_specs = specs([recipe_id])
    result = apply(tree, patch_specs)
    assert [o.outcome for o in result.outcomes] == ["applied"] * len(patch_specs), result.outcomes
    assert check_python(touched_python(tree, patch_specs)) == []


@needs_patches
def test_all_patches_apply_together_compile_and_revert(tmp_path):
    tree = scratch_tree(tmp_path)
    before = tree_checksum(tree)
    patch_specs = specs(all_in_order())
    result = apply(tree, patch_specs)
    assert all(o.outcome == "applied" for o in result.outcomes), result.outcomes
    assert check_python(touched_python(tree, patch_specs)) == []
    again = apply(tree, patch_specs)
    assert again.already_applied
    revert(tree)
    assert tree_checksum(tree) == before


@needs_patches
def test_wrong_version_refused_up_front(tmp_path):
    tree = scratch_tree(tmp_path, "0.18.0")
    before = tree_checksum(tree)
    with pytest.raises(OptkitError) as info:
        apply(tree, specs(all_in_order()))
    assert "0.18.0" in str(info.value)
    assert tree_checksum(tree) == before


def test_pristine_tree_is_the_real_release():
    assert (pristine() / "vllm_ascend" / "ascend_config.py").is_file()


def _flagship_bundle(tmp_path_factory):
    from optkit.bundle import write_bundle
    from optkit.plan import load_workspace, plan
    from optkit.request import Request

    workspace = load_workspace()
    out = tmp_path_factory.mktemp("flagship") / "bundle"
    write_bundle(plan(Request(model="qwen3.5-35b", target="910c", mtp=True), workspace), workspace, out)
    return out


@pytest.fixture(scope="module")
def flagship_bundle(tmp_path_factory):
    return _flagship_bundle(tmp_path_factory)


@needs_patches
@pytest.mark.parametrize("kill_after", range(1, 16), ids=lambda n: f"killed-after-patch-{n}")
def test_killed_apply_is_rolled_back_by_the_next_command(tmp_path, flagship_bundle, kill_after):
    """SIGKILL in the middle of the real flagship apply; the next optkit command restores the tree."""
    import os
    import signal
    import subprocess
    import sys

    series = (flagship_bundle / "patches" / "series").read_text().split()
    if kill_after > len(series):
        pytest.skip(f"the flagship plan has {len(series)} patches")
    tree = scratch_tree(tmp_path)
    before = tree_checksum(tree)
    cli = [sys.executable, "-m", "optkit"]
    env = {**os.environ, "OPTKIT_FAULT_AFTER": str(kill_after)}
    killed = subprocess.run([*cli, "apply", str(flagship_bundle), "--tree", str(tree)], env=env,
                            capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert tree_checksum(tree) != before  # it really stopped halfway
    status = subprocess.run([*cli, "status", "--tree", str(tree)], capture_output=True, text=True)
    assert "killed" in status.stdout or "interrupted" in status.stdout, status.stdout
    recovered = subprocess.run([*cli, "revert", "--tree", str(tree)], capture_output=True, text=True)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert tree_checksum(tree) == before
