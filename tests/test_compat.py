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
