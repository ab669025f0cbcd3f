"""``optkit compat``: the compatibility matrix, recipe × release, from the real trees.

Per patch file and release, one result:

- ``upstream`` / ``superseded``: the recipe's release entry there says so (proven by its probes,
  ``tests/test_versions.py``), so nothing is applied; a patch that reverse-applies is ``upstream`` too;
- ``target-missing``: a file the patch changes (rather than creates) is not in the release;
- ``clean``: applies exactly (GNU ``patch -F0 --dry-run``); ``offset``: applies exactly, at moved
  line numbers; both count as compatible;
- ``fuzz``: applies only with fuzz (``-F3``) — never counted as compatible: fuzz may put a hunk
  in the wrong place;
- ``conflict``: does not apply.

For ``fuzz`` and ``conflict`` a three-way view tells why: base = the first release the patch was
written for, ``git merge-file`` of (release file, base file, patched base file) per target. A clean
merge means only the *context* moved (the lines the patch changes are intact, so a port is
mechanical); conflicts mean the *code* the patch changes was changed. The words name the hunk and
the base→release change that overlaps it.

Per knob a recipe sets (``optkit.versions.onrelease.knob_verdict`` on each release's data): present,
added-by-patch, renamed, moved, removed, rejected, ignored.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import Version

from optkit.catalog.loader import Catalog
from optkit.catalog.patchfile import patch_paths, split_patch
from optkit.catalog.schema import Recipe
from optkit.errors import OptkitError
from optkit.tree.gitops import git
from optkit.versions.compat_cache import cell_key, load, store
from optkit.versions.onrelease import ReleaseView, knob_verdict, recipe_knobs
from optkit.versions.probes import declared_entry, in_range
from optkit.versions.releases import known_versions, load_moves, load_release, release_named

COMPATIBLE = ("clean", "offset")
PATCH_TIMEOUT = 120


@dataclass(frozen=True)
class PatchCell:
    recipe: str
    patch: str
    version: str
    result: str
    """upstream, superseded, target-missing, clean, offset, fuzz or conflict."""
    three_way: str = ""
    """For fuzz and conflict: context-moved or code-changed."""
    why: str = ""

    @property
    def compatible(self) -> bool:
        return self.result in COMPATIBLE


@dataclass(frozen=True)
class KnobCell:
    knob: str
    recipes: tuple[str, ...]
    version: str
    state: str
    emitted: str | None


@dataclass
class Matrix:
    versions: list[str]
    base: dict[str, str] = field(default_factory=dict)
    """patch (recipe/file) → the release it is compared against in the three-way view."""
    patches: list[PatchCell] = field(default_factory=list)
    knobs: list[KnobCell] = field(default_factory=list)

    def as_data(self) -> dict:
        return {"versions": self.versions, "base": dict(sorted(self.base.items())),
                "patches": [asdict(c) for c in self.patches], "knobs": [asdict(c) for c in self.knobs]}


def compat_matrix(catalog: Catalog, trees: dict[str, Path], workers: int | None = None,
                  digests: dict[str, str] | None = None) -> Matrix:
    """The matrix over the releases in ``trees`` (version → pristine tree), every written patch of
    every recipe, and every knob the recipes set. Trees are only read. ``digests`` (version → the
    tree's digest) lets a cell's result come from ``compat_cache``; ``workers`` threads (default: one
    per CPU) check the cells, all releases at once."""
    versions = sorted(trees, key=Version)
    matrix = Matrix(versions)
    work = [(r, p.file) for r in catalog for p in r.patches if p.status == "present"]
    for recipe, file in work:
        matrix.base[f"{recipe.id}/{file}"] = _base_version(recipe, file, versions)
    with tempfile.TemporaryDirectory(prefix="optkit-compat-") as scratch:
        bases = _Bases(catalog, trees, Path(scratch))
        jobs = [(recipe, file, version) for recipe, file in work for version in versions]

        def cell(job):
            recipe, file, version = job
            base = matrix.base[f"{recipe.id}/{file}"]
            key = cell_key(catalog.patch_path(recipe.id, file).read_bytes(), (digests or {}).get(version),
                           (digests or {}).get(base))
            return patch_cell(catalog, recipe, file, version, trees[version], lambda: bases.get(recipe, file, base), key)

        with ThreadPoolExecutor(max_workers=max(1, workers or os.cpu_count() or 2)) as pool:
            matrix.patches = list(pool.map(cell, jobs))
    known = {str(v) for v in known_versions()}
    matrix.knobs = knob_cells(catalog, [v for v in versions if v in known])  # release data: known releases only
    return matrix


class _Bases:
    """The patched base of each patch, made the first time a cell needs it (a cached cell does not)."""

    def __init__(self, catalog: Catalog, trees: dict[str, Path], scratch: Path):
        self.catalog, self.trees, self.scratch = catalog, trees, scratch
        self.made: dict[tuple[str, str], Base] = {}
        self.lock = threading.Lock()

    def get(self, recipe: Recipe, file: str, version: str) -> Base:
        with self.lock:
            if (recipe.id, file) not in self.made:
                self.made[(recipe.id, file)] = patched_base(self.catalog, recipe, file, version, self.trees[version],
                                                            self.scratch)
            return self.made[(recipe.id, file)]


def release_matrix(catalog: Catalog, versions: list[str] | None = None, on_fetched=None) -> Matrix:
    """The matrix over ``versions`` (default: every known release), their trees fetched in parallel
    and cached; the base release of every patch is fetched too (the three-way view needs it).
    ``on_fetched``: ``fetch_many``'s, told of each tree as it is fetched or found in the cache."""
    from optkit.tree.fetch import fetch_many

    releases = [str(v) for v in known_versions()]
    wanted = releases_named(versions) if versions else releases
    bases = {_base_version(r, p.file, releases) for r in catalog for p in r.patches if p.status == "present"}
    fetched = sorted(set(wanted) | bases, key=Version)
    results = dict(zip(fetched, fetch_many(fetched, on_fetched=on_fetched)))
    matrix = compat_matrix(catalog, {v: r.path for v, r in results.items()},
                           digests={v: r.sha256 for v, r in results.items()})
    keep = set(wanted)
    matrix.versions = [v for v in matrix.versions if v in keep]
    matrix.patches = [c for c in matrix.patches if c.version in keep]
    matrix.knobs = [c for c in matrix.knobs if c.version in keep]
    return matrix


def releases_named(texts: list[str]) -> list[str]:
    """The known releases ``--releases`` names (``release_named``: ``0.23`` is 0.23.0)."""
    named = []
    for text in texts:
        try:
            version = Version(text)
        except ValueError:  # InvalidVersion, or a number too long for int()
            raise OptkitError(f"--releases {text!r} is not a release version (e.g. 0.23.0, 0.30.0rc2)") from None
        named.append(release_named(version, flag="--releases", hint=""))
    return named


def _base_version(recipe: Recipe, file: str, versions: list[str]) -> str:
    """The first of ``versions`` the patch was written for: the base of its three-way view."""
    written_for = recipe.patch_versions(file)
    found = sorted((Version(v) for v in versions if in_range(Version(v), written_for)))
    if not found:
        raise OptkitError(f"the three-way view of {recipe.id}/{file} needs a tree of a release it was written for "
                          f"({written_for}); include one")
    return str(found[0])


@dataclass(frozen=True)
class Base:
    """The base release's target files, before and after the patch."""

    version: str
    before: Path
    after: Path


def patched_base(catalog: Catalog, recipe: Recipe, file: str, version: str, base_tree: Path, scratch: Path) -> Base:
    data = catalog.patch_path(recipe.id, file).read_bytes()
    targets = patch_paths(data.decode("utf-8", "surrogateescape"))
    root = scratch / recipe.id / file
    before, after = root / "before", root / "after"
    for rel in targets:
        if (base_tree / rel).is_file():
            for side in (before, after):
                (side / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(base_tree / rel, side / rel)
    after.mkdir(parents=True, exist_ok=True)
    proc = git(after, "apply", "-p1", "--whitespace=nowarn", stdin=data)
    if proc.returncode:
        raise OptkitError(f"{recipe.id}/{file} does not apply to the release it was written for: "
                          f"{proc.stderr.decode(errors='replace').strip()}")
    return Base(version, before, after)


def patch_cell(catalog: Catalog, recipe: Recipe, file: str, version: str, tree: Path, base, key: str | None = None
               ) -> PatchCell:
    """One patch on one release (see the module docstring); ``base`` is the ``Base`` or makes it;
    with a ``key`` the tree's part of the answer comes from ``compat_cache`` when it has it."""
    entry = declared_entry(recipe, Version(version))
    if entry is not None and entry.status in ("upstream", "superseded"):
        return PatchCell(recipe.id, file, version, entry.status, why=entry.msg)
    fields = load(key)
    if fields is None:
        fields = _on_tree(catalog.patch_path(recipe.id, file).read_bytes(), tree, base, version)
        store(key, fields)
    return PatchCell(recipe.id, file, version, **fields)


def _on_tree(data: bytes, tree: Path, base, version: str) -> dict:
    """result, three_way and why of the patch ``data`` on ``tree``."""
    text = data.decode("utf-8", "surrogateescape")
    created = created_files(text)
    missing = [rel for rel in patch_paths(text) if rel not in created and not (tree / rel).is_file()]
    if missing:
        return _fields("target-missing", why=", ".join(missing) + " not in the release")
    exact = gnu_patch(tree, data, fuzz=0)
    if exact.returncode == 0:
        offsets = re.findall(r"Hunk #\d+ succeeded at \d+ \(offset (-?\d+) lines?\)", exact.stdout)
        return _fields("offset" if offsets else "clean", why=f"{len(offsets)} hunk(s) at moved lines" if offsets else "")
    if gnu_patch(tree, data, fuzz=0, reverse=True).returncode == 0:
        return _fields("upstream", why="the patch reverse-applies: the release already has it")
    fuzzy = gnu_patch(tree, data, fuzz=3)
    three_way, why = _three_way(text, tree, base() if callable(base) else base, exact.stdout + exact.stderr, version)
    return _fields("fuzz" if fuzzy.returncode == 0 else "conflict", three_way, why)


def _fields(result: str, three_way: str = "", why: str = "") -> dict:
    return {"result": result, "three_way": three_way, "why": why}


def created_files(text: str) -> set[str]:
    """The files a patch creates (``--- /dev/null``)."""
    return {s.new_path for s in split_patch(text)[1] if s.old_path is None and s.new_path}


def gnu_patch(tree: Path, data: bytes, *, fuzz: int, reverse: bool = False) -> subprocess.CompletedProcess:
    cmd = ["patch", "-p1", "--dry-run", "--batch", "--force", f"--fuzz={fuzz}", "--verbose"]
    if reverse:
        cmd.append("--reverse")
    try:
        return subprocess.run(cmd, cwd=tree, input=data.decode("utf-8", "surrogateescape"), capture_output=True,
                              text=True, timeout=PATCH_TIMEOUT, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    except FileNotFoundError:
        raise OptkitError("optkit compat needs GNU patch (`apt-get install patch`)") from None


def _three_way(text: str, tree: Path, base: Base, log: str, version: str) -> tuple[str, str]:
    """context-moved / code-changed, and the words: which hunks fail and what changed there."""
    conflicts, words = 0, []
    failed = _failed_hunks(log)
    for rel, hunks in _hunks(text).items():
        if not (base.before / rel).is_file() or not (tree / rel).is_file():
            continue
        conflicts += merge_file(tree / rel, base.before / rel, base.after / rel, (version, "base", "patched"))[0]
        changes = _changes(base.before / rel, tree / rel)
        for number, (start, length, removed) in enumerate(hunks, 1):
            if failed and (rel, number) not in failed:
                continue
            touching = [c for c in changes if c[0] < start + length and c[1] >= start]
            if not touching:
                continue
            hits_code = any(c[0] < r + 1 and c[1] >= r for c in touching for r in removed)
            span = ", ".join(f"{a + 1}-{b}" if b > a + 1 else str(a + 1) for a, b, _ in touching)
            words.append(f"{rel} hunk @@ -{start} (base lines {start}-{start + length - 1}): the release changed "
                         f"base line(s) {span} {'that the hunk changes' if hits_code else 'of its context only'}")
    verdict = f"3-way merge on base {base.version}: " + (f"{conflicts} conflict(s)" if conflicts else "clean")
    return ("code-changed" if conflicts else "context-moved"), "; ".join([verdict, *words])


def merge_file(current: Path, base: Path, other: Path, labels: tuple[str, str, str]) -> tuple[int, bytes]:
    """``git merge-file -p --diff3``: (number of conflicts, the merged text) of the changes
    base → other carried onto ``current``; conflicts are diff3 regions labelled with ``labels``."""
    cmd = ["git", "merge-file", "-p", "--diff3"]
    for label in labels:
        cmd += ["-L", label]
    proc = subprocess.run([*cmd, str(current), str(base), str(other)], capture_output=True, timeout=PATCH_TIMEOUT)
    if proc.returncode < 0 or proc.returncode > 127:
        raise OptkitError(f"git merge-file failed on {current}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.returncode, proc.stdout


def _failed_hunks(log: str) -> set[tuple[str, int]]:
    """(file, hunk number) pairs GNU patch reports as FAILED, from its --verbose log."""
    failed, current = set(), None
    for line in log.splitlines():
        match = re.match(r"^(?:checking|patching) file (\S+)", line)
        if match:
            current = match.group(1)
        match = re.match(r"^Hunk #(\d+) FAILED", line)
        if match and current:
            failed.add((current, int(match.group(1))))
    return failed


def _hunks(text: str) -> dict[str, list[tuple[int, int, list[int]]]]:
    """Per file: (base start line, base length, base line numbers the hunk removes or replaces)."""
    out: dict[str, list] = {}
    for section in split_patch(text)[1]:
        if section.old_path:
            out.setdefault(section.old_path, []).extend(
                (h.old_start, h.old_length, h.removed_old_lines) for h in section.hunks)
    return out


def _changes(base: Path, target: Path) -> list[tuple[int, int, str]]:
    """Base line ranges [a, b) (0-based) that differ in the target, with the opcode."""
    a = base.read_text(encoding="utf-8", errors="replace").splitlines()
    b = target.read_text(encoding="utf-8", errors="replace").splitlines()
    return [(i1, max(i2, i1 + 1), tag) for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if tag != "equal"]


def knob_cells(catalog: Catalog, versions: list[str]) -> list[KnobCell]:
    """Every knob the catalog's recipes set (and their patch sets add), on every release."""
    users: dict[str, list[str]] = {}
    for recipe in catalog:
        for knob in recipe_knobs(recipe) + [k for e in recipe.releases for k in e.adds]:
            users.setdefault(knob, []).append(recipe.id)
    moves = load_moves()
    cells = []
    for version in versions:
        view = ReleaseView(load_release(version))
        for knob, recipes in sorted(users.items()):
            adds = [k for r in recipes for e in catalog[r].releases
                    if in_range(Version(version), e.versions) for k in e.adds]
            verdict = knob_verdict(knob, view, adds, moves)
            cells.append(KnobCell(knob, tuple(sorted(set(recipes))), version, verdict.state, verdict.emitted))
    return cells
