"""Upstream probes run on a source tree: which recipes a release (or a user's own branch) already
has, has superseded, has broken, or still lacks.

A recipe's ``releases`` entries each carry probes (``optkit.catalog.schema.Probe``: a file or
glob, regexes that must or must not match, whether the file exists). ``inspect_recipes`` runs
every probe of every recipe on one tree; the entry whose probes all hold is the tree's status for
that recipe. When several entries hold, the one whose range contains the tree's version wins
(entries of different ranges often share a status and probes); when none holds the status is
``unknown`` — unless, given the recipe's folder, one entry's whole patch set reverse-applies on the
tree (``git apply --check --reverse``): the tree already has the change (an exported series merged
upstream, or present in a user's branch), and the status is ``upstream`` with no catalog edit.
Probes read files only: nothing from the tree is imported or executed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from packaging.version import Version

from optkit.catalog.loader import Catalog
from optkit.catalog.specifiers import contains

if TYPE_CHECKING:  # the run-time holds their records (optkit.catalog.frozen)
    from optkit.catalog.schema import Probe, Recipe, ReleaseRange


@dataclass(frozen=True)
class ProbeResult:
    """One probe on one tree: whether it held, and why not."""

    probe: Probe
    holds: bool
    why: str = ""


@dataclass(frozen=True)
class RecipeOnTree:
    """What the probes say about one recipe on one tree."""

    recipe: str
    status: str
    """The matching entry's status, or ``unknown`` when no entry's probes all hold."""
    entry: ReleaseRange | None
    declared: ReleaseRange | None
    """The entry whose range contains the tree's version (None: the version is not covered)."""
    results: list[list[ProbeResult]] = field(default_factory=list)
    """Per entry of the recipe, its probes' results."""
    _entries: tuple[ReleaseRange, ...] = ()

    @property
    def declared_results(self) -> list[ProbeResult]:
        """The probe results of the entry the tree's version declares."""
        if self.declared is None:
            return []
        return next(rs for rs, e in zip(self.results, self._entries) if e is self.declared)

    @property
    def agrees(self) -> bool:
        """Whether the probes found what the version's declared entry says."""
        return self.entry is not None and self.declared is not None and self.entry.status == self.declared.status


class _Files:
    """Text of tree files, read once per inspection."""

    def __init__(self, root: Path):
        self.root = root
        self._cache: dict[str, list[tuple[str, str]]] = {}

    def matching(self, pattern: str) -> list[tuple[str, str]]:
        if pattern not in self._cache:
            paths = sorted(self.root.glob(pattern)) if any(c in pattern for c in "*?[") else [self.root / pattern]
            self._cache[pattern] = [(p.relative_to(self.root).as_posix(), p.read_text(encoding="utf-8", errors="replace"))
                                    for p in paths if p.is_file()]
        return self._cache[pattern]

    def exists(self, pattern: str) -> bool:
        if any(c in pattern for c in "*?["):
            return bool(self.matching(pattern))
        return (self.root / pattern).exists()


def run_probe(probe: Probe, files: _Files) -> ProbeResult:
    found = files.matching(probe.file)
    if probe.exists is not None and files.exists(probe.file) != probe.exists:
        return ProbeResult(probe, False, f"{probe.file} {'is missing' if probe.exists else 'exists'}")
    for regex in probe.present:
        if not any(re.search(regex, text, re.MULTILINE) for _, text in found):
            return ProbeResult(probe, False, f"{probe.file}: no match for {regex!r}"
                                             + ("" if found else " (no such file)"))
    for regex in probe.absent:
        hit = next((rel for rel, text in found if re.search(regex, text, re.MULTILINE)), None)
        if hit is not None:
            return ProbeResult(probe, False, f"{hit}: matches {regex!r}")
    return ProbeResult(probe, True)


def in_range(version: Version, spec: str) -> bool:
    """Whether ``version`` is in the PEP 440 range ``spec``, pre-releases included."""
    return contains(spec, version)


def declared_entry(recipe: Recipe, version: Version) -> ReleaseRange | None:
    """The release entry whose range contains ``version`` (``Recipe.release_entry``)."""
    return recipe.release_entry(version)


def recipe_on_tree(recipe: Recipe, root: Path, version: Version, files: _Files | None = None,
                   patch_dir: Path | None = None) -> RecipeOnTree:
    """The probes of every entry of ``recipe`` on the tree; with ``patch_dir`` (the recipe's folder)
    a tree where no entry's probes hold is checked for an entry's patch set already applied."""
    files = files or _Files(Path(root))
    results = [[run_probe(p, files) for p in entry.probe] for entry in recipe.releases]
    holding = [e for e, rs in zip(recipe.releases, results) if all(r.holds for r in rs)]
    declared = declared_entry(recipe, version)
    entry = declared if declared in holding else (holding[0] if holding else None)
    if entry is None and patch_dir is not None:
        entry = reverse_applied(recipe, Path(root), Path(patch_dir), declared)
    return RecipeOnTree(recipe.id, entry.status if entry else "unknown", entry, declared, results, tuple(recipe.releases))


def reverse_applied(recipe: Recipe, root: Path, patch_dir: Path, declared: ReleaseRange | None) -> ReleaseRange | None:
    """An ``upstream`` entry (the range of the entry it comes from) when that entry's whole patch set
    reverse-applies on the tree at ``root``, the declared entry tried first; else None."""
    from optkit.tree.gitops import git_apply

    entries = sorted((e for e in recipe.releases if e.patches), key=lambda e: e is not declared)
    for entry in entries:
        paths = [patch_dir / name for name in entry.patches]
        if all(p.is_file() for p in paths) and all(git_apply(root, p.read_bytes(), "--check", "--reverse") is None
                                                    for p in reversed(paths)):
            words = (f"the tree already has the change: its patch set for {entry.versions} "
                     f"({', '.join(entry.patches)}) reverse-applies (no probe of the recipe holds)")
            return type(entry)(entry._shape, {**entry.__dict__, "status": "upstream", "msg": words, "patches": [],
                                              "note": None})
    return None


def inspect_recipes(catalog: Catalog, root: Path, version: Version) -> list[RecipeOnTree]:
    """Every probed recipe of the catalog on the tree at ``root`` (of ``version``), by id."""
    files = _Files(Path(root))
    return [recipe_on_tree(r, root, version, files, catalog.folders.get(r.id)) for r in catalog if r.releases]


@dataclass(frozen=True)
class TreeReport:
    """``optkit tree inspect DIR``: a tree's version and what every probed recipe is there."""

    root: Path
    version: Version
    version_source: str
    recipes: list[RecipeOnTree]
    applied: dict[str, list[str]] = field(default_factory=dict)
    """Recipe → its patches optkit applied to the tree (``.optkit/state.json``): the probes ran on the tree
    without them, so an applied recipe shows its status on the pristine base (``new``), never ``upstream``."""


def inspect_tree_recipes(path: Path, catalog: Catalog) -> TreeReport:
    """Run every probe of every recipe on the vllm-ascend tree at ``path`` (any tree: a release, a
    user's own branch); the version comes from the tree, as ``optkit apply`` reads it. On a tree optkit
    patched, the probes judge its pristine base (``optkit.tree.journal.pristine_base``)."""
    from optkit.tree.inspect import inspect_tree
    from optkit.tree.journal import applied_recipes, pristine_base

    info = inspect_tree(path)
    with pristine_base(info.root) as base:
        recipes = inspect_recipes(catalog, base, info.version)
    return TreeReport(info.root, info.version, info.version_source, recipes, applied_recipes(info.root))
