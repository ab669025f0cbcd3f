"""Recipe compatibility: the catalog's real patches against the real vllm-ascend 0.23.0 tree."""

from __future__ import annotations

import pytest

from compat_support import (all_in_order, check_python, needs_patches, pristine, recipes_with_patches,
                            scratch_tree, specs, touched_python)
from optkit.tree.apply import apply, revert
from optkit.errors import OptkitError
from optkit.tree.inspect import tree_checksum

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
    apply(tree, specs(all_in_order()))
    return tree


@needs_patches
@pytest.mark.parametrize("recipe_id", sorted(r.id for r in __import__("compat_support").CATALOG
                                             if r.versions.vllm_ascend.startswith(">=0.23.0")))
def test_every_key_and_variable_a_recipe_sets_is_read_by_the_patched_tree(fully_patched, recipe_id):
    """additional_config keys (nested too) and non-external env vars exist in the patched 0.23.0 tree."""
    from compat_support import CATALOG
    from optkit.bundle.check import config_keys, env_names

    recipe = CATALOG[recipe_id]
    keys, names = config_keys(fully_patched), env_names(fully_patched)
    for key, value in recipe.additional_config.items():
        assert key in keys.top, f"{recipe_id}: additional_config key {key!r} is not read by the tree"
        if isinstance(value, dict) and key in keys.nested:
            assert set(value) <= keys.nested[key], f"{recipe_id}: {key}.{set(value) - keys.nested[key]}"
    for env in recipe.env:
        if not env.external:
            assert env.name in names, f"{recipe_id}: env var {env.name} is not defined in envs.py"


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
    """The patches of each plan the resolver makes for the scenario cases apply together."""
    from pathlib import Path

    from compat_support import CATALOG
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    fields = dict(request_fields)
    if "model_config" in fields:
        fields["model_config"] = str(Path(__file__).resolve().parent.parent / fields["model_config"])
    result = plan(parse_request(fields), load_workspace())
    if not str(result.facts["versions.vllm_ascend"]).startswith("0.23"):
        pytest.skip("the patches are written against 0.23.0")
    patch_specs = specs([rid for rid in result.selected if CATALOG[rid].patches])
    if not patch_specs:
        pytest.skip("this plan selects no source patch")
    tree = scratch_tree(tmp_path)
    outcomes = apply(tree, patch_specs).outcomes
    assert [o.outcome for o in outcomes] == ["applied"] * len(patch_specs)
    assert check_python(touched_python(tree, patch_specs)) == []
