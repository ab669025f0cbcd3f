"""The sampler recipes on every known vllm-ascend release: what their release entries claim holds there.

For sampler-greedy-bf16-fastpath, sampler-min-tokens-spec-mask-cache, rejection-greedy-presampled and
sampler-vocab-parallel-greedy-argmax, on each release 0.18.0-0.30.0rc2: the entry that covers the
release has probes that all hold on its pristine tree; where the entry carries a patch set, each of
its patches applies to that tree alone (``git apply --check``: no fuzz), and on the releases with
patches all four recipes' sets apply together in dependency order, compile, pass pyflakes and revert
to a byte-identical tree. The CPU equivalence of the patched code is tests/cpu/test_sampler_patches.py.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from compat_support import CATALOG, check_python, release_trees, scratch_tree, specs, touched_python
from optkit.resolve.resolver import dependency_order
from optkit.tree import gitops
from optkit.tree.apply import apply, revert
from optkit.tree.inspect import tree_checksum
from optkit.versions.probes import _Files, declared_entry, run_probe
from optkit.versions.releases import known_versions

pytestmark = [pytest.mark.tree]

RECIPES = ["sampler-greedy-bf16-fastpath", "sampler-min-tokens-spec-mask-cache", "rejection-greedy-presampled",
           "sampler-vocab-parallel-greedy-argmax"]
KNOWN = [str(v) for v in known_versions()]
WITH_PATCHES = ["0.23.0", "0.23.0.post1", "0.30.0rc1", "0.30.0rc2"]


@pytest.mark.parametrize("version", KNOWN)
@pytest.mark.parametrize("recipe_id", RECIPES)
def test_release_entry_probes_hold_and_its_patches_apply(recipe_id, version):
    tree = release_trees()[version]
    entry = declared_entry(CATALOG[recipe_id], Version(version))
    assert entry is not None, f"no release entry of {recipe_id} covers {version}"
    files = _Files(tree)
    failing = [r.why for r in (run_probe(p, files) for p in entry.probe) if not r.holds]
    assert failing == [], f"{recipe_id} on {version} ({entry.versions}, {entry.status}): {failing}"
    for name in entry.patches:
        data = CATALOG.patch_path(recipe_id, name).read_bytes()
        assert gitops.git_apply(tree, data, "--check") is None, f"{name} does not apply to {version}"
    assert bool(entry.patches) == (version in WITH_PATCHES and entry.status in ("new", "partly-upstream"))


@pytest.mark.parametrize("version", WITH_PATCHES)
def test_the_sampler_group_applies_compiles_and_reverts(tmp_path, version):
    tree = scratch_tree(tmp_path, version)
    before = tree_checksum(tree)
    chosen = specs(dependency_order(CATALOG, RECIPES), version)
    assert sorted({s.recipe for s in chosen}) == sorted(RECIPES)
    result = apply(tree, chosen)
    assert all(o.outcome == "applied" for o in result.outcomes), result.outcomes
    assert check_python(touched_python(tree, chosen)) == []
    revert(tree)
    assert tree_checksum(tree) == before
