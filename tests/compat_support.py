"""Support for recipe compatibility tests: pristine real trees, scratch copies, patch checks."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from optkit.catalog.loader import load_catalog
from optkit.catalog.patchfile import patch_paths
from optkit.resolve.resolver import dependency_order
from optkit.tree.fetch import fetch
from optkit.tree.patchset import PatchSpec

CATALOG = load_catalog()


def pristine(version: str = "0.23.0") -> Path:
    """The cached pristine vllm-ascend tree (downloaded from PyPI on first use)."""
    return fetch(version).path


def scratch_tree(tmp_path: Path, version: str = "0.23.0") -> Path:
    """A private copy of the pristine tree that a test may patch."""
    dest = tmp_path / f"vllm-ascend-{version}"
    shutil.copytree(pristine(version), dest, symlinks=True)
    return dest


def recipes_with_patches() -> list[str]:
    return [r.id for r in CATALOG if any(p.status == "present" for p in r.patches)]


def all_in_order() -> list[str]:
    """Every recipe with written patches, in the resolver's dependency order."""
    return dependency_order(CATALOG, recipes_with_patches())


def catalog_specs(catalog, recipe_ids: list[str]) -> list[PatchSpec]:
    """PatchSpecs for the written patches of ``recipe_ids`` (in that order), straight from the catalog.

    Names follow the bundle's ``NNNN-<recipe>--<file>``; pending patches are skipped. These are the
    patches of every release: ``specs(ids, version)`` keeps those written for one.
    """
    specs: list[PatchSpec] = []
    for rid in recipe_ids:
        recipe = catalog[rid]
        for patch in recipe.patches:
            if patch.status != "present":
                continue
            path = catalog.patch_path(rid, patch.file)
            data = path.read_bytes()
            specs.append(PatchSpec(rid, f"{len(specs) + 1:04d}-{rid}--{patch.file}", path,
                                   hashlib.sha256(data).hexdigest(),
                                   tuple(patch_paths(data.decode("utf-8", "surrogateescape"))),
                                   recipe.patch_versions(patch.file)))
    return specs


def specs(recipe_ids: list[str], version: str | None = None):
    """The recipes' patch specs; with ``version``, only the patches written for that release."""
    found = catalog_specs(CATALOG, recipe_ids)
    if version is None:
        return found
    from packaging.specifiers import SpecifierSet

    return [s for s in found if SpecifierSet(s.version_spec, prereleases=True).contains(version)]


def touched_python(tree: Path, patch_specs) -> list[Path]:
    files = sorted({t for s in patch_specs for t in s.targets if t.endswith(".py")})
    return [tree / f for f in files if (tree / f).is_file()]


def check_python(files: list[Path]) -> list[str]:
    """Compile errors and pyflakes findings (undefined names etc.) in ``files``."""
    problems = []
    for path in files:
        try:  # compile() writes no __pycache__ into the tree (revert must stay byte-identical)
            compile(path.read_bytes(), str(path), "exec")
        except SyntaxError as exc:
            problems.append(f"{path}:{exc.lineno}: {exc.msg}")
    if files:
        run = subprocess.run([sys.executable, "-B", "-m", "pyflakes", *map(str, files)], capture_output=True, text=True)
        problems += [line for line in run.stdout.splitlines() if _serious(line)]
    return problems


def _serious(line: str) -> bool:
    """pyflakes findings that are bugs (undefined names, syntax), not style (unused imports)."""
    return any(word in line for word in ("undefined name", "syntax error", "invalid syntax", "referenced before"))


needs_patches = pytest.mark.skipif(not recipes_with_patches(), reason="no recipe has written patches yet")


def release_trees() -> dict[str, Path]:
    """Every release optkit has data for, fetched (in parallel) and cached: version → pristine tree."""
    return dict(_release_trees())


@lru_cache(maxsize=None)
def _release_trees() -> tuple[tuple[str, Path], ...]:
    from optkit.tree.fetch import fetch_many
    from optkit.versions.releases import known_versions

    versions = [str(v) for v in known_versions()]
    return tuple((v, r.path) for v, r in zip(versions, fetch_many(versions)))
