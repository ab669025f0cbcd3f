"""``optkit port``: carry a recipe's patches from the release they were written for to another one.

For every patch of the recipe's patch set on ``--from`` (default 0.23.0), file by file, a three-way
merge with ``git merge-file`` (``optkit.versions.compat.merge_file``): base = the pristine ``--from``
file, ours = base + the patch, theirs = the ``--to`` file. Each file is one of

- ``exact`` / ``offset``: its hunks apply without fuzz (GNU ``patch -F0``), at their own or at moved
  lines, and the merge agrees; ``created``: the patch creates it and the release has no such file;
- ``merged``: the hunks do not apply, but the merge is clean: only their context moved;
- ``conflict``: the merge is not clean: the code the patch changes was changed (the diff3 regions
  go to a worksheet for a person to finish);
- ``moved``: the file is not in the release, and its hunks' code was found in another file
  (``optkit.versions.moved``); the merge against that file says whether the change still fits;
- ``missing``: not in the release, and its code was not found; ``upstream``: the release already
  has this file's change (it reverse-applies).

A patch's outcome is the worst of its files (exact < offset < merged < conflict < moved < missing),
unless the recipe's release entry on ``--to``, found by its probes, is ``upstream``, ``superseded``,
``broken`` or ``absent`` (nothing to port: that is the outcome), or the whole patch reverse-applies
(``upstream``). When every file carries over, the refreshed patch is the diff from the ``--to``
files to the merged ones, with the DEP-3 header of the old patch (``Last-Update`` from ``date``).

Per recipe, the action: ``up-to-date`` (the release's entry already carries a patch set that
applies exactly), ``write`` (the refreshed patch set goes to a new release entry: the releases of
the entry covering ``--to`` on which the refreshed set applies exactly, next to ``--to``; see
``optkit.versions.recipe_edit``), ``needs-review`` (it would be ``write``, or ``up-to-date`` with the
``--from`` patch set, but a patch that carries over changes code that has callers new in ``--to``
(``optkit.versions.callers``), which a text merge cannot judge: ``reviewed`` recipes get their action
back), ``needs-hand`` (a patch does not carry over, or the catalog lacks what a write needs),
``left-out`` (the entry's status leaves nothing to port). Computing the port never writes anything;
``optkit.versions.port_write.write_port`` does, for ``write`` actions and worksheets.
"""

from __future__ import annotations

import datetime as _dt
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import Version

from optkit.catalog.loader import Catalog
from optkit.catalog.patchfile import patch_paths, split_patch
from optkit.catalog.schema import Recipe, ReleaseRange
from optkit.errors import InternalError, OptkitError, UnknownName
from optkit.tree.gitops import git_apply
from optkit.versions.callers import Review, review
from optkit.versions.compat import Base, gnu_patch, patched_base
from optkit.versions.port_file import FilePort, new_hunks, port_file, with_date, with_description
from optkit.versions.probes import declared_entry, in_range, recipe_on_tree
from optkit.versions.ranges import covered, split
from optkit.versions.releases import UnknownRelease, release_named

LEFT_OUT = ("upstream", "superseded", "broken", "absent")
FILE_ORDER = ("exact", "offset", "merged", "conflict", "moved", "missing")
"""Worst last; a file outcome not listed here counts as the one it maps to in ``_RANK``."""
_RANK = {"created": "exact", "upstream": "conflict"}


@dataclass(frozen=True)
class PatchPort:
    """One patch of the recipe on the ``--to`` release."""

    patch: str
    outcome: str
    files: tuple[FilePort, ...]
    why: str = ""
    refreshed: str = ""
    """The refreshed patch (DEP-3 header and diff) when every file carries over."""
    refreshed_hunks: tuple[str, ...] = ()
    """Hunks of the refreshed patch that are not in the old one (the review diff)."""
    worksheet: str = ""
    """The conflict regions and lost hunks, for a person to finish (empty when it carries over)."""
    review: Review | None = None
    """When it carries over: the definitions it changes and their callers that are new in ``--to``."""

    @property
    def needs_review(self) -> bool:
        return self.review is not None and self.review.flagged


@dataclass(frozen=True)
class NewPatch:
    """A patch file a write adds, and where its declaration comes from."""

    name: str
    source: str
    """The patch it refreshes."""
    text: str
    targets: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class RecipePort:
    """One recipe ported from ``source`` to ``target``."""

    recipe: str
    source: str
    target: str
    patches: tuple[PatchPort, ...]
    action: str
    """up-to-date, write, needs-review, needs-hand or left-out."""
    why: str
    entry_range: str = ""
    """The release entry that covers ``target`` (the one a write splits)."""
    new_range: str = ""
    """Write: the range the refreshed patch set is for."""
    split: tuple[str | None, str, str | None] | None = None
    """Write: the entry's range cut into (before, the new range, after)."""
    keeps_patches: str = ""
    """Write: which side keeps the entry's own patch set (before, after, or none)."""
    new_patches: tuple[NewPatch, ...] = ()


@dataclass
class PortReport:
    source: str
    target: str
    date: str
    """The DEP-3 Last-Update of refreshed patches (ISO date)."""
    recipes: list[RecipePort] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    """Files written or removed by ``write_port`` (relative to the catalog root), sorted."""

    def as_data(self) -> dict:
        return {"from": self.source, "to": self.target, "date": self.date, "recipes": [asdict(r) for r in self.recipes],
                "written": sorted(self.written)}


class Trees:
    """Pristine trees by release: the ones given, else fetched and cached (``optkit tree fetch``).
    ``releases`` are the releases a new range may cover (default: every known release)."""

    def __init__(self, given: dict[str, Path] | None = None, releases: list[str] | None = None):
        self._trees = {str(Version(v)): Path(p) for v, p in (given or {}).items()}
        if releases is None:
            from optkit.versions.releases import known_versions

            releases = [str(v) for v in known_versions()]
        self.releases = sorted((str(Version(v)) for v in releases), key=Version)

    def __getitem__(self, version: str) -> Path:
        if version not in self._trees:
            from optkit.tree.fetch import fetch

            self._trees[version] = fetch(version).path
        return self._trees[version]


# --------------------------------------------------------------------------- the port


def port(catalog: Catalog, recipe_ids: list[str] | None, source: str, target: str, trees: Trees | None = None,
         date: _dt.date | None = None, reviewed: list[str] = ()) -> PortReport:
    """Port the patch sets of ``recipe_ids`` (None: every recipe with a patch set on ``source``)
    from ``source`` to ``target``; nothing is written (see ``write_port``). ``reviewed``: recipes whose
    new callers a person has read (``--reviewed``): their ports are not held back for review."""
    trees = trees or Trees()
    source, target = _release(source, "--from", trees.releases), _release(target, "--to", trees.releases)
    if source == target:
        raise OptkitError(f"--from and --to are both {source}: nothing to port")
    date = date or _dt.date.today()
    ids = _recipes(catalog, recipe_ids, source)
    stray = sorted(set(reviewed) - set(ids))
    if stray:
        raise OptkitError(f"--reviewed {', '.join(stray)}: not a recipe this port carries from {source} "
                          f"(ported: {', '.join(ids) or 'none'}); name one of those, or drop the flag")
    report = PortReport(source, target, date.isoformat())
    with tempfile.TemporaryDirectory(prefix="optkit-port-") as scratch:
        for rid in ids:
            report.recipes.append(port_recipe(catalog, catalog[rid], source, target, trees, Path(scratch) / rid, date,
                                              rid in reviewed))
    return report


def _release(text: str, flag: str, known: list[str]) -> str:
    """The release ``text`` names, spelt as optkit knows it (``0.23`` is 0.23.0)."""
    try:
        version = Version(text)
    except ValueError:
        raise OptkitError(f"{flag} {text!r} is not a release version (e.g. 0.23.0, 0.30.0rc2)") from None
    try:
        return release_named(version, known, flag=flag, hint="")
    except UnknownRelease as exc:
        if exc.named:
            raise
        return str(version)  # a release optkit has no data for yet: its tree is fetched all the same


def source_patches(recipe: Recipe, source: str) -> list[str]:
    """The written patches of the recipe's patch set on ``source``."""
    present = {p.file for p in recipe.patches if p.status == "present"}
    if recipe.releases:
        entry = declared_entry(recipe, Version(source))
        return [f for f in (entry.patches if entry else []) if f in present]
    return [p.file for p in recipe.patches if p.file in present and in_range(Version(source), recipe.versions.vllm_ascend)]


def _recipes(catalog: Catalog, recipe_ids: list[str] | None, source: str) -> list[str]:
    if recipe_ids is None:
        return [r.id for r in catalog if source_patches(r, source)]
    for rid in recipe_ids:
        if rid not in catalog:
            raise UnknownName("recipe", rid, sorted(catalog.recipes))
        if not source_patches(catalog[rid], source):
            written = sorted({e.versions for e in catalog[rid].releases if e.patches})
            raise OptkitError(f"recipe {rid} has no written patch set for {source} (its patches are for "
                              f"{', '.join(written) or 'no release'}); port from one of those with --from")
    return sorted(dict.fromkeys(recipe_ids))


def port_recipe(catalog: Catalog, recipe: Recipe, source: str, target: str, trees: Trees, scratch: Path,
                date: _dt.date, reviewed: bool = False) -> RecipePort:
    tree = trees[target]
    on_tree = recipe_on_tree(recipe, tree, Version(target)) if recipe.releases else None
    probed = on_tree.entry if on_tree else None
    declared = on_tree.declared if on_tree else None
    status_entry = probed or declared
    left_out = status_entry if status_entry is not None and status_entry.status in LEFT_OUT else None
    patches = []
    for file in source_patches(recipe, source):
        base = patched_base(catalog, recipe, file, source, trees[source], scratch / "base")
        patches.append(port_patch(catalog, recipe, file, base, tree, (target, source), left_out, date,
                                  scratch / "work" / file, trees[source]))
    port = RecipePort(recipe.id, source, target, tuple(patches), "", "", declared.versions if declared else "")
    return _decide(catalog, recipe, port, declared, probed, trees, scratch / "check", reviewed)


def port_patch(catalog: Catalog, recipe: Recipe, file: str, base: Base, tree: Path, releases: tuple[str, str],
               left_out: ReleaseRange | None, date: _dt.date, scratch: Path, source_tree: Path) -> PatchPort:
    """One patch of ``recipe`` on the tree ``tree`` of ``releases[0]``, written for ``releases[1]`` (whose
    pristine tree is ``source_tree``); ``left_out`` is the release entry that leaves nothing to port, if
    any (see the module docstring). A patch that carries over gets the review of its new callers."""
    target, source = releases
    data = catalog.patch_path(recipe.id, file).read_bytes()
    preamble, sections = split_patch(data.decode("utf-8", "surrogateescape"))
    results = [port_file(s, base, tree, (target, source, f"{source}+patch"), scratch) for s in sections]
    files = tuple(r.file for r in results)
    outcome, why = _patch_outcome(files, tree, data, left_out, target)
    refreshed, fresh_hunks, worksheet, checked = "", (), "", None
    body = "".join(r.diff for r in results)
    if outcome not in LEFT_OUT and all(f.carries for f in files) and not body:
        outcome, why = "upstream", "the three-way merge leaves the release as it is: it already has the change"
    elif outcome not in LEFT_OUT and all(f.carries for f in files):
        fresh_hunks = new_hunks(body, sections, results)
        refreshed = with_date(preamble, date) + body
        texts = [(s, (base.before / s.path).read_text(encoding="utf-8", errors="replace"))
                 for s in sections if (base.before / s.path).is_file()]
        checked = review(texts, source_tree, tree)
    elif outcome not in LEFT_OUT:
        worksheet = "".join(r.worksheet for r in results)
    return PatchPort(file, outcome, files, why, refreshed, fresh_hunks, worksheet, checked)


def _patch_outcome(files: tuple[FilePort, ...], tree: Path, data: bytes, left_out: ReleaseRange | None,
                   target: str) -> tuple[str, str]:
    if left_out is not None:
        return left_out.status, f"{target}: {left_out.msg}"
    if gnu_patch(tree, data, fuzz=0, reverse=True).returncode == 0:
        return "upstream", "the patch reverse-applies: the release already has it"
    worst = max(files, key=lambda f: FILE_ORDER.index(_RANK.get(f.outcome, f.outcome)))
    outcome = _RANK.get(worst.outcome, worst.outcome)
    return outcome, "; ".join(f"{f.path}: {f.why}" for f in files if f.why)


# --------------------------------------------------------------------------- the action


def _decide(catalog: Catalog, recipe: Recipe, port: RecipePort, declared: ReleaseRange | None,
            probed: ReleaseRange | None, trees: Trees, scratch: Path, reviewed: bool) -> RecipePort:
    target, patches = port.target, port.patches
    probe_note = "" if probed is None or probed is declared else \
        f" (its probes on the {target} tree match the entry {probed.versions}, not {declared.versions if declared else 'none'})"
    status_entry = probed or declared
    if status_entry is not None and status_entry.status in LEFT_OUT:
        return _replace(port, "left-out", f"the entry {status_entry.versions} is {status_entry.status}: "
                                          "nothing to port" + probe_note)
    if not recipe.releases and in_range(Version(target), recipe.versions.vllm_ascend) and \
            all(p.outcome in ("exact", "offset") for p in patches):
        return _held(port, "up-to-date", f"the patches apply exactly to {target}, in the recipe's range "
                                         f"{recipe.versions.vllm_ascend}", reviewed)
    if declared is None:
        return _replace(port, "needs-hand", f"no release entry of {recipe.id} covers {target}: add one (status, msg, "
                                            "probes), then port again")
    entry_f = declared_entry(recipe, Version(port.source)) if recipe.releases else None
    if declared is not entry_f and declared.patches:
        return _already_ported(catalog, recipe, port, declared, trees[target])
    if all(p.outcome == "upstream" for p in patches):
        return _replace(port, "needs-hand", f"every patch reverse-applies on {target}: upstream has the change; record "
                                            "an upstream entry for it (status, msg, probes)")
    if declared is entry_f and all(p.outcome in ("exact", "offset") for p in patches):
        return _held(port, "up-to-date", f"the {port.source} patch set covers {target} ({declared.versions}) and "
                                         "applies exactly" + probe_note, reviewed)
    stuck = [p for p in patches if not p.refreshed]
    if stuck:
        return _replace(port, "needs-hand", "; ".join(f"{p.patch} is {p.outcome}" for p in stuck)
                        + ": finish it by hand (worksheet with --write), then add its release entry")
    return _write_plan(catalog, recipe, port, declared, entry_f, trees, scratch, reviewed)


def _replace(port: RecipePort, action: str, why: str, **more) -> RecipePort:
    from dataclasses import replace

    return replace(port, action=action, why=why, **more)


def _held(port: RecipePort, action: str, why: str, reviewed: bool, **more) -> RecipePort:
    """``action`` (write, or up-to-date for a patch set the catalog already declares for ``--to``), unless a
    patch has callers that are new in ``--to`` and nobody said they were read: then ``needs-review``, with
    everything the action would do kept in the report (``--reviewed`` gives the action back)."""
    flagged = [p for p in port.patches if p.needs_review]
    if not flagged:
        return _replace(port, action, why, **more)
    count = sum(len(p.review.callers) + p.review.more for p in flagged)
    names = ", ".join(sorted({c.changed for p in flagged for c in p.review.callers}))
    if reviewed:
        return _replace(port, action, f"{why}; its {count} new caller(s) of {names} in {port.target} were reviewed "
                                      "(--reviewed)", **more)
    then = "writes it" if action == "write" else "accepts it"
    return _replace(port, "needs-review", f"{count} new caller(s) of {names} in {port.target}, which a text merge "
                                          f"cannot judge: read them (listed on the patch); --reviewed {port.recipe} "
                                          f"{then} ({action}: {why})", **more)


def _already_ported(catalog: Catalog, recipe: Recipe, port: RecipePort, declared: ReleaseRange, tree: Path) -> RecipePort:
    failing = [f for f in declared.patches
               if gnu_patch(tree, catalog.patch_path(recipe.id, f).read_bytes(), fuzz=0).returncode]
    if failing:
        return _replace(port, "needs-hand", f"the entry {declared.versions} carries {', '.join(failing)}, which does not "
                                            f"apply exactly to {port.target}: fix it")
    theirs = sorted(_diff_part(catalog.patch_path(recipe.id, f).read_text(encoding="utf-8", errors="surrogateescape"))
                    for f in declared.patches)
    ours = sorted(_diff_part(p.refreshed) for p in port.patches if p.refreshed)
    comparison = ("this port's refresh is identical to it" if ours == theirs and len(ours) == len(port.patches)
                  else "this port's refresh differs from it (written by hand, or from other context)")
    return _replace(port, "up-to-date", f"the entry {declared.versions} already carries {', '.join(declared.patches)}, "
                                        f"which applies exactly; {comparison}")


def _diff_part(text: str) -> str:
    """A patch without its DEP-3 header and git's ``index`` lines (blob hashes say nothing of the change)."""
    preamble, sections = split_patch(text)
    return "".join(line for s in sections for line in s.text().splitlines(True) if not line.startswith("index "))


def _write_plan(catalog: Catalog, recipe: Recipe, port: RecipePort, declared: ReleaseRange, entry_f: ReleaseRange | None,
                trees: Trees, scratch: Path, reviewed: bool) -> RecipePort:
    inside = covered(declared.versions, trees.releases)
    if port.target not in inside:
        return _replace(port, "needs-hand", f"{port.target} is not a release optkit knows; a write needs one")
    texts = [p.refreshed.encode("utf-8", "surrogateescape") for p in port.patches]
    fits = {port.target: _applies(trees[port.target], texts, scratch)}
    if not fits[port.target]:
        raise InternalError(f"port: the refreshed patches of {recipe.id} do not apply to {port.target} itself")
    # the source release keeps its own patch set: a run never takes it over
    run = _run(inside, port.target, lambda v: v != port.source and fits.setdefault(v, _applies(trees[v], texts, scratch)))
    cut = split(declared.versions, trees.releases, run)
    keeps = "before" if declared.patches and cut.before and in_range(Version(port.source), cut.before) else \
        "after" if declared.patches and cut.after and in_range(Version(port.source), cut.after) else "none"
    taken = {p.file for p in recipe.patches} | {p.name for p in catalog.folders[recipe.id].glob("*.patch")}
    new = []
    for p in port.patches:
        name = patch_name(p.patch, port.source, port.target, taken)
        if name is None:
            return _replace(port, "needs-hand", f"no free name for the refresh of {p.patch} in recipes/{recipe.id}/: "
                                                "rename or remove the stray patch file")
        taken.add(name)
        decl = next(d for d in recipe.patches if d.file == p.patch)
        targets = tuple(patch_paths(p.refreshed))
        description = f"{decl.description} {_refresh_words(p, port, cut.run)}"
        text = with_description(p.refreshed, description)
        new.append(NewPatch(name, p.patch, text, targets, description))
    kept = " and ".join(spec for spec in (cut.before, cut.after) if spec)
    words = (f"{', '.join(n.name for n in new)} for {cut.run}"
             + (f" (applies exactly to {', '.join(run)})" if run != [port.target] else "")
             + (f", cut from the entry {declared.versions}, which keeps {kept}" if kept
                else f", the patch set of the entry {declared.versions}"))
    return _held(port, "write", words, reviewed, new_range=cut.run, split=(cut.before, cut.run, cut.after),
                 keeps_patches=keeps, new_patches=tuple(new))


def _applies(tree: Path, patches: list[bytes], scratch: Path) -> bool:
    """Whether the patches apply in order, without fuzz, to a scratch copy of their targets."""
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    for rel in {r for p in patches for r in patch_paths(p.decode("utf-8", "surrogateescape"))}:
        if (tree / rel).is_file():
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / rel, scratch / rel)
    return all(git_apply(scratch, p) is None for p in patches)


def _run(inside: list[str], target: str, fits) -> list[str]:
    """The consecutive releases of ``inside`` around ``target`` that ``fits``."""
    at = inside.index(target)
    low = at
    while low > 0 and fits(inside[low - 1]):
        low -= 1
    high = at
    while high + 1 < len(inside) and fits(inside[high + 1]):
        high += 1
    return inside[low:high + 1]


_LABEL = re.compile(r"-\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc)\d+)?(?:\.post\d+)?$")


def patch_name(file: str, source: str, target: str, taken: set[str]) -> str | None:
    """``0001-x.patch`` → ``0001-x-0.30.patch`` (the target's series) or, within the source's series,
    ``0001-x-0.23.0.post1.patch``; a label the old name already carries is replaced. None when
    both names are taken."""
    stem = _LABEL.sub("", file.removesuffix(".patch"))
    src, dst = Version(source), Version(target)
    label = str(dst) if (src.major, src.minor) == (dst.major, dst.minor) else f"{dst.major}.{dst.minor}"
    return next((c for c in (f"{stem}-{label}.patch", f"{stem}-{dst}.patch") if c not in taken), None)


def _refresh_words(patch: PatchPort, port: RecipePort, run: str) -> str:
    how = {"exact": f"re-issued unchanged (the {port.source} patch applies exactly to {port.target})",
           "offset": f"re-issued at {port.target}'s line numbers (the {port.source} patch applies at moved lines)",
           "merged": (f"refreshed by a clean three-way merge of the {port.source} patch onto {port.target} "
                      f"({len(patch.refreshed_hunks)} hunk(s) with new context)"),
           "moved": (f"carried by a clean three-way merge into "
                     f"{', '.join(f.moved_to for f in patch.files if f.moved_to)}, where {port.target} moved the code")}
    return f"Ported to {run} by optkit port: {how.get(patch.outcome, patch.outcome)}."


