"""optkit compat: the matrix on the releases the suite fetches (0.18.0, 0.23.0, 0.23.0.post1, the newest),
and the three-way view on tiny trees."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from compat_support import CATALOG, release_trees
from optkit.versions.compat import COMPATIBLE, PatchCell, compat_matrix

SUITE = ["0.18.0", "0.23.0", "0.23.0.post1", "0.30.0rc2"]


@pytest.fixture(scope="module")
def matrix():
    trees = release_trees()
    return compat_matrix(CATALOG, {v: trees[v] for v in SUITE})


def _cells(matrix, version):
    return {(c.recipe, c.patch): c for c in matrix.patches if c.version == version}


def _written_for(recipe: str, patch: str, version: str) -> bool:
    return SpecifierSet(CATALOG[recipe].patch_versions(patch), prereleases=True).contains(version)


@pytest.mark.tree
@pytest.mark.parametrize("version", SUITE)
def test_every_patch_applies_clean_on_the_releases_it_was_written_for(matrix, version):
    mine = [c for (recipe, patch), c in _cells(matrix, version).items() if _written_for(recipe, patch, version)]
    assert [(c.recipe, c.patch, c.result) for c in mine if c.result != "clean"] == []


@pytest.mark.tree
def test_post1_has_one_patch_whose_context_moved(matrix):
    """Of the patches written for 0.23.0, one needs its context refreshed on post1 (and has a post1 patch)."""
    off = [c for (recipe, patch), c in _cells(matrix, "0.23.0.post1").items()
           if _written_for(recipe, patch, "0.23.0") and c.result != "clean"]
    assert [(c.recipe, c.result, c.three_way) for c in off] == [
        ("blocktable-slot-mapping-cpu-fastpath", "fuzz", "context-moved")]
    assert off[0].why.startswith("3-way merge on base 0.23.0: clean; vllm_ascend/worker/model_runner_v1.py hunk @@ -3528")
    assert "of its context only" in off[0].why


@pytest.mark.tree
@pytest.mark.parametrize("recipe, patch, result", [
    ("compile-super-kernel", "0001-compile-super-kernel.patch", "upstream"),
    ("gdn-conv-weight-transpose-cache", "0001-gdn-conv-weight-transpose-cache.patch", "upstream"),
    ("worker-pinned-staging-reuse", "0001-pinned-staging-reuse.patch", "superseded"),
    ("moe-shared-expert-sidestream-ar", "0001-shared-expert-ar-on-side-stream.patch", "target-missing"),
    ("mc2-token-capacity-1024", "0001-mc2-token-capacity-1024.patch", "conflict"),
    ("static-kernel-compile-fixes", "0001-cann-compat-relative-include.patch", "clean"),
])
def test_newest_release(matrix, recipe, patch, result):
    assert _cells(matrix, "0.30.0rc2")[(recipe, patch)].result == result


@pytest.mark.tree
def test_0_18_0_lacks_the_files_of_later_layers(matrix):
    cells = _cells(matrix, "0.18.0")
    assert cells[("gdn-conv-weight-transpose-cache", "0001-gdn-conv-weight-transpose-cache.patch")].why == \
        "vllm_ascend/ops/gdn.py not in the release"
    assert cells[("moe-fusedmc2-overlap-coexist", "0001-drop-fusedmc2-overlap-exclusion.patch")].result == "upstream"


@pytest.mark.tree
def test_knobs_across_releases(matrix):
    state = {(c.knob, c.version): c.state for c in matrix.knobs}
    assert [state[("env:VLLM_ASCEND_ENABLE_FUSED_MC2", v)] for v in SUITE] == ["present", "present", "present", "moved"]
    sk = "additional_config:ascend_compilation_config.enable_super_kernel"
    assert [state[(sk, v)] for v in SUITE] == ["ignored", "added-by-patch", "added-by-patch", "present"]


@pytest.mark.tree
def test_compat_cli_json():
    proc = subprocess.run([sys.executable, "-m", "optkit", "compat", "--releases", "0.23.0.post1", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["versions"] == ["0.23.0.post1"] and data["base"]["compile-super-kernel/0001-compile-super-kernel.patch"] == "0.23.0"
    for_023 = [c for c in data["patches"] if _written_for(c["recipe"], c["patch"], "0.23.0")]
    assert sum(c["result"] == "clean" for c in for_023) == len(for_023) - 1


@pytest.mark.parametrize("result, compatible", [(r, r in ("clean", "offset")) for r in
                         ("clean", "offset", "fuzz", "conflict", "target-missing", "upstream", "superseded")])
def test_only_clean_and_offset_count_as_compatible(result, compatible):
    assert PatchCell("r", "p", "0", result).compatible is compatible and set(COMPATIBLE) == {"clean", "offset"}


# --------------------------------------------------------------------------- the three-way view, on tiny trees


BASE = "".join(f"line {i}\n" for i in range(1, 21))


def _tiny(tmp_path: Path, name: str, text: str) -> Path:
    root = tmp_path / name
    (root / "vllm_ascend").mkdir(parents=True)
    (root / "vllm_ascend" / "__init__.py").write_text("")
    (root / "vllm_ascend" / "_version.py").write_text(f"__version__ = '{name}'\n")
    (root / "vllm_ascend" / "m.py").write_text(text)
    return root


def _catalog(tmp_path: Path):
    """A one-recipe catalog whose patch (written for 0.23.0) changes line 10 of vllm_ascend/m.py."""
    from optkit.catalog.loader import load_catalog

    root = tmp_path / "catalog"
    folder = root / "recipes" / "tiny"
    folder.mkdir(parents=True)
    (folder / "0001-tiny.patch").write_text(
        "Description: tiny\n---\ndiff --git a/vllm_ascend/m.py b/vllm_ascend/m.py\n--- a/vllm_ascend/m.py\n+++ b/vllm_ascend/m.py\n"
        "@@ -8,5 +8,5 @@\n line 8\n line 9\n-line 10\n+LINE 10\n line 11\n line 12\n")
    (folder / "recipe.yaml").write_text(RECIPE)
    return load_catalog(root)


RECIPE = """
id: tiny
title: Tiny recipe
summary: A recipe made up for the three-way test.
kind: source-patch
provenance:
  article: {part: 2, section: s, quote: "quote text"}
  seed_map: B.0
  upstream: {status: new, evidence: made up}
versions: {vllm_ascend: ">=0.18.0"}
releases:
  - versions: ">=0.23.0,<0.24"
    status: new
    msg: made up for the test
    patches: [0001-tiny.patch]
    probe: [{file: vllm_ascend/m.py, present: [line]}]
  - versions: ">=0.24.0"
    status: new
    msg: made up for the test
    probe: [{file: vllm_ascend/m.py, present: [line]}]
patches:
  - file: 0001-tiny.patch
    description: changes line 10
    origin: test
    last_update: 2026-01-01
    targets: [vllm_ascend/m.py]
    status: present
verification: {level: declared, needs_npu: false}
"""


@pytest.mark.parametrize("release, result, three_way", [
    pytest.param(BASE, "clean", "", id="same"),
    pytest.param("new line\n" * 30 + BASE, "offset", "", id="moved-down"),
    pytest.param(BASE.replace("line 12\n", "line twelve\n"), "fuzz", "context-moved", id="context-moved"),
    pytest.param(BASE.replace("line 10\n", "line ten\n"), "conflict", "code-changed", id="code-changed"),
    pytest.param(BASE.replace("line 10\n", "LINE 10\n"), "upstream", "", id="reverse-applies"),
])
def test_three_way_tells_context_from_code(tmp_path, release, result, three_way):
    catalog = _catalog(tmp_path)
    trees = {"0.23.0": _tiny(tmp_path, "0.23.0", BASE), "0.24.0": _tiny(tmp_path, "0.24.0", release)}
    cell = next(c for c in compat_matrix(catalog, trees).patches if c.version == "0.24.0")
    assert (cell.result, cell.three_way) == (result, three_way), cell.why


# --------------------------------------------------------------------------- the result cache


def _other_patch(catalog):
    path = catalog.patch_path("tiny", "0001-tiny.patch")
    path.write_text(path.read_text().replace("+LINE 10\n", "+Line 10\n"))


@pytest.mark.parametrize("change, digests, rechecked", [
    pytest.param(None, {"0.23.0": "a", "0.24.0": "b"}, False, id="nothing-changed"),
    pytest.param(_other_patch, {"0.23.0": "a", "0.24.0": "b"}, True, id="patch-changed"),
    pytest.param(None, {"0.23.0": "a", "0.24.0": "b2"}, True, id="tree-changed"),
    pytest.param(None, {"0.23.0": "a2", "0.24.0": "b"}, True, id="base-tree-changed"),
    pytest.param("code", {"0.23.0": "a", "0.24.0": "b"}, True, id="check-code-changed"),
    pytest.param(None, {"0.23.0": "a"}, True, id="tree-without-digest"),
])
def test_a_cell_is_checked_again_when_its_patch_trees_or_check_change(tmp_path, monkeypatch, change, digests, rechecked):
    from optkit.versions import compat, compat_cache

    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "cache"))
    catalog = _catalog(tmp_path)
    trees = {"0.23.0": _tiny(tmp_path, "0.23.0", BASE), "0.24.0": _tiny(tmp_path, "0.24.0", BASE)}
    first = {"0.23.0": "a", "0.24.0": "b"} if len(digests) == 2 else digests
    compat_matrix(catalog, trees, digests=first)
    runs = []
    real = compat.gnu_patch
    monkeypatch.setattr(compat, "gnu_patch", lambda *a, **k: runs.append(a[0]) or real(*a, **k))
    if change == "code":
        monkeypatch.setattr(compat_cache, "code_version", lambda: "another version of the check")
    elif change is not None:
        change(catalog)
    cells = {c.version: c for c in compat_matrix(catalog, trees, digests=digests).patches}
    assert (trees["0.24.0"] in runs) == rechecked
    assert cells["0.24.0"].result == "clean"
