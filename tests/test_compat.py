"""Recipe compatibility: the catalog's real patches against the real vllm-ascend trees they are written for."""

from __future__ import annotations

import pytest

from compat_support import (all_in_order, check_python, needs_patches, pristine, recipes_with_patches,
                            scratch_tree, specs, touched_python)
from optkit.tree.apply import apply, revert
from optkit.errors import OptkitError
from optkit.tree.inspect import tree_checksum

pytestmark = [pytest.mark.tree]

# The releases the suite applies every patch set to: 0.23.0, its post release, the newest.
RELEASES = ["0.23.0", "0.23.0.post1", "0.30.0rc2"]


def _recipe_releases():
    return [pytest.param(rid, v, id=f"{rid}-{v}") for v in RELEASES for rid in recipes_with_patches()
            if specs([rid], v)]


@pytest.mark.parametrize("recipe_id, version", _recipe_releases() or [("<none>", "0.23.0")])
@needs_patches
def test_patch_applies_alone_and_compiles(tmp_path, recipe_id, version):
    tree = scratch_tree(tmp_path, version)
    patch_specs = specs([recipe_id], version)
    result = apply(tree, patch_specs)
    assert [o.outcome for o in result.outcomes] == ["applied"] * len(patch_specs), result.outcomes
    assert check_python(touched_python(tree, patch_specs)) == []


@needs_patches
@pytest.mark.parametrize("version", RELEASES)
def test_all_patches_apply_together_compile_and_revert(tmp_path, version):
    tree = scratch_tree(tmp_path, version)
    before = tree_checksum(tree)
    patch_specs = specs(all_in_order(), version)
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
        apply(tree, specs(all_in_order(), "0.23.0"))
    assert "0.18.0" in str(info.value)
    assert tree_checksum(tree) == before


def test_pristine_tree_is_the_real_release():
    assert (pristine() / "vllm_ascend" / "ascend_config.py").is_file()


def _flagship_bundle(tmp_path_factory):
    from optkit.bundle.writer import write_bundle
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    workspace = load_workspace()
    out = tmp_path_factory.mktemp("flagship") / "bundle"
    write_bundle(plan(parse_request({"model": "qwen3.5-35b", "target": "910c", "mtp": True}), workspace), workspace, out)
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


@pytest.fixture(scope="module")
def fully_patched(tmp_path_factory):
    """The real 0.23.0 tree with every written patch of the catalog applied."""
    tree = scratch_tree(tmp_path_factory.mktemp("patched"))
    apply(tree, specs(all_in_order(), "0.23.0"))
    return tree


@needs_patches
@pytest.mark.parametrize("recipe_id", sorted(r.id for r in __import__("compat_support").CATALOG
                                             if r.env or r.additional_config))
def test_every_key_and_variable_a_recipe_sets_is_read_by_the_patched_tree(fully_patched, recipe_id):
    """additional_config keys (nested too) and non-external env vars exist in the patched 0.23.0 tree."""
    from compat_support import CATALOG
    from optkit.bundle.check import tree_knobs
    from optkit.versions.onrelease import has_knob, recipe_knobs

    knobs = tree_knobs(fully_patched)
    missing = [k for k in recipe_knobs(CATALOG[recipe_id]) if not has_knob(knobs, k)]
    assert missing == [], f"{recipe_id}: not read by the patched 0.23.0 tree"


def _scenario_plans():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent
    for path in sorted((root / "cases").glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "error_contains" not in case["expect"]:
            yield pytest.param(case["request"], id=path.stem)


@needs_patches
@pytest.mark.parametrize("request_fields", list(_scenario_plans()))
def test_every_scenario_plan_applies_as_a_whole(tmp_path, request_fields):
    """The patches of each plan the resolver makes for the scenario cases apply together to the
    plan's release, compile, pass pyflakes and revert byte-identically."""
    from pathlib import Path

    from compat_support import CATALOG
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    fields = dict(request_fields)
    if "model_config" in fields:
        fields["model_config"] = str(Path(__file__).resolve().parent.parent / fields["model_config"])
    result = plan(parse_request(fields), load_workspace())
    version = str(result.facts["versions.vllm_ascend"])
    if version not in RELEASES:
        pytest.skip(f"the suite applies patches to {', '.join(RELEASES)} only")
    patch_specs = specs([rid for rid in result.selected if CATALOG[rid].patches], version)
    if not patch_specs:
        pytest.skip("this plan selects no source patch")
    tree = scratch_tree(tmp_path, version)
    before = tree_checksum(tree)
    outcomes = apply(tree, patch_specs).outcomes
    assert [o.outcome for o in outcomes] == ["applied"] * len(patch_specs)
    assert check_python(touched_python(tree, patch_specs)) == []
    revert(tree)
    assert tree_checksum(tree) == before
