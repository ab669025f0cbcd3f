"""Apply a bundle's patches to a vllm-ascend tree: checked first, journaled, reversible.

Everything optkit keeps in a tree lives under ``<tree>/.optkit/``::

    lock          the pid of the apply/revert that runs (O_CREAT|O_EXCL); a dead pid's is broken
    journal.json  only while an apply runs: {"state": "applying", "backup": {path: sha256 or
                  null if absent}, "new_dirs": [...], "patches": [...], "done": [names]}
    backup/       copies of the target files, written (and fsynced) before the journal
    state.json    after a successful apply: the patches, and per file the sha256 before and after
    pristine/     the backup, kept for ``revert``

The journal is the commit marker: while it exists the apply is unfinished, and the next apply or
revert first puts back every file it lists. A file that already has its recorded sha256 is left
alone, so a restore that is itself interrupted can simply run again.

Nothing is written before every check passed: the tree's version against each recipe's range,
the paths (no absolute, ``..``, ``.optkit/``/``.git/`` or symlinked ones), uncommitted changes
of the targets in a git checkout, each patch alone (``git apply --check``, else ``--check
--reverse`` = already present), and all patches in order on a scratch copy of their targets.

git is run as ``git -c safe.directory=TREE apply -p1 --whitespace=nowarn [--check] [--reverse]``
with the patch on stdin, ``cwd=TREE`` and ``GIT_CEILING_DIRECTORIES`` set to the tree's parent:
a plain sdist tree is then patched in git's no-repository mode, and a tree that is itself a git
checkout in repository mode, but git never climbs to an enclosing repository (where it would
resolve paths against that repository's root and silently skip files outside the tree).

Testing hook: ``OPTKIT_FAULT_AFTER=n`` makes ``apply`` kill its own process with SIGKILL right
after the n-th patch is applied and recorded in the journal, so fault tests can check recovery.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator, Literal

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from optkit.errors import PatchError, TreeError
from optkit.tree.patchset import PatchSpec
from optkit.catalog.paths import cache_dir
from optkit.tree.inspect import TreeInfo, inspect_tree, tree_checksum

HOME = ".optkit"
FAULT_ENV = "OPTKIT_FAULT_AFTER"
_RESERVED = (HOME, ".git")
_GIT_TIMEOUT = 120

Outcome = Literal["applied", "already present", "would apply", "already applied"]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PatchOutcome:
    """What happened to one patch."""

    recipe: str
    name: str
    outcome: Outcome


@dataclass(frozen=True)
class Recovery:
    """An interrupted apply that was rolled back before anything else."""

    done: list[str]
    """Patches the interrupted run had applied."""
    restored: list[str]
    """Files put back (rewritten or deleted)."""


@dataclass(frozen=True)
class Drift:
    """A file that changed since optkit applied its patches."""

    path: str
    expected: str | None
    """sha256 recorded after the apply (None: the patches deleted it)."""
    actual: str | None
    """sha256 now (None: the file is gone)."""


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply`` did, or with ``dry_run`` would do."""

    root: Path
    version: str
    outcomes: list[PatchOutcome]
    dry_run: bool = False
    already_applied: bool = False
    """The tree already had exactly these patches, unchanged: nothing was done."""
    recovered: Recovery | None = None
    notes: list[str] = field(default_factory=list)
    check_seconds: float = 0.0
    apply_seconds: float = 0.0


@dataclass(frozen=True)
class RevertResult:
    """What ``revert`` did."""

    root: Path
    reverted: list[PatchOutcome]
    """The patches recorded by the apply that was undone (empty: nothing was applied)."""
    restored: list[str]
    """Files put back to their pristine bytes (rewritten or deleted)."""
    overwritten: list[Drift] = field(default_factory=list)
    """Files changed since the apply whose changes ``force`` discarded."""
    recovered: Recovery | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Interrupted:
    """An apply that has not finished: still running, or killed (then it must be rolled back)."""

    done: list[str]
    pending: list[str]
    pid: int | None
    running: bool


@dataclass(frozen=True)
class TreeStatus:
    """A tree as optkit sees it: version, applied patches, drift, an unfinished apply."""

    root: Path
    version: str
    is_git: bool
    patches: list[PatchOutcome]
    files: list[str]
    """Files changed by the applied patches."""
    drift: list[Drift]
    interrupted: Interrupted | None
    lock_pid: int | None


# --------------------------------------------------------------------------- public API


def apply(tree: Path, patches: list[PatchSpec], *, force: bool = False, dry_run: bool = False) -> ApplyResult:
    """Apply ``patches`` (in order) to the vllm-ascend tree ``tree``, all or nothing.

    Refuses, before touching anything, a tree whose version is outside any patch's range
    (``TreeError`` listing every such recipe), unsafe paths, uncommitted changes of the targets
    in a git checkout (unless ``force``) and patches that do not apply, alone or together
    (``PatchError``). An interrupted earlier apply is rolled back first. Applying the same
    patches again is a no-op. With ``dry_run`` only the checks run and nothing is written.
    """
    started = time.monotonic()
    info = inspect_tree(tree)
    root = info.root
    _refuse_cache_tree(root)
    _check_versions(info, patches)
    _check_paths(root, patches)
    data = {spec.name: spec.read_verified() for spec in patches}
    with nullcontext([]) if dry_run else _locked(root) as notes:
        if dry_run:
            _refuse_unfinished(root)
        recovered = None if dry_run else _recover(root)
        state = _read_json(root / HOME / "state.json")
        if state is not None:
            outcomes = _already_applied(root, patches, state)
            return ApplyResult(root, str(info.version), outcomes, dry_run, True, recovered, notes)
        if info.is_git and not force:
            _check_committed(root, _targets(patches))
        to_apply, present = _classify(root, patches, data)
        _check_together(root, to_apply, data)
        checked = time.monotonic()
        if to_apply and not dry_run:
            _apply_journaled(root, info, patches, to_apply, data)
        applied = "would apply" if dry_run else "applied"
        outcomes = [PatchOutcome(p.recipe, p.name, "already present" if p in present else applied)
                    for p in patches]
        return ApplyResult(root, str(info.version), outcomes, dry_run, False, recovered, notes,
                           checked - started, time.monotonic() - checked)


def revert(tree: Path, *, force: bool = False) -> RevertResult:
    """Put the tree back to its bytes before ``apply`` and remove ``.optkit/``.

    An interrupted apply is rolled back instead. Files changed since the apply (drift) are
    refused with ``TreeError`` listing them, unless ``force`` (their changes are then lost).
    """
    root = inspect_tree(tree).root
    with _locked(root) as notes:
        recovered = _recover(root)
        state = _read_json(root / HOME / "state.json")
        if state is None:
            _clear(root)
            return RevertResult(root, [], list(recovered.restored) if recovered else [], [], recovered, notes)
        drift = _drift(root, state, pristine_ok=True)  # pristine: a revert killed midway
        if drift and not force:
            raise TreeError(_drift_message(root, drift, "revert would discard these changes",
                                           "pass --force to discard them"))
        before = {rel: f["before"] for rel, f in state["files"].items()}
        restored = _restore(root, before, state["new_dirs"], [root / HOME / "pristine"])
        _clear(root)
        return RevertResult(root, _recorded(state), restored, drift, None, notes)


def status(tree: Path) -> TreeStatus:
    """What optkit has done to ``tree``; reads only, never recovers (an apply may be running)."""
    info = inspect_tree(tree)
    root = info.root
    lock_pid = _lock_pid(root / HOME / "lock")
    journal = _read_json(root / HOME / "journal.json")
    interrupted = None
    if journal is not None:
        done = journal["done"]
        pid = journal.get("pid")
        running = pid is not None and pid == lock_pid and _alive(pid)
        interrupted = Interrupted(done, [n for n in journal["patches"] if n not in done], pid, running)
    state = _read_json(root / HOME / "state.json") if journal is None else None
    if state is None:
        return TreeStatus(root, str(info.version), info.is_git, [], [], [], interrupted, lock_pid)
    return TreeStatus(root, str(info.version), info.is_git, _recorded(state), sorted(state["files"]),
                      _drift(root, state), interrupted, lock_pid)


# --------------------------------------------------------------------------- checks


def _refuse_cache_tree(root: Path) -> None:
    trees = (cache_dir() / "trees").resolve()
    if root == trees or trees in root.parents:
        raise TreeError(
            f"{root} is optkit's pristine cached tree; patch a copy instead: "
            "`optkit tree fetch VERSION DEST`, then `optkit apply BUNDLE --tree DEST`"
        )


def _in_range(version: Version, spec: str) -> bool:
    return SpecifierSet(spec, prereleases=True).contains(version)


def _check_versions(info: TreeInfo, patches: list[PatchSpec]) -> None:
    excluded = {p.recipe: p.version_spec for p in patches if not _in_range(info.version, p.version_spec)}
    if excluded:
        lines = "\n".join(f"  - recipe {r} needs vllm-ascend {s}" for r, s in excluded.items())
        raise TreeError(
            f"the tree {info.root} is vllm-ascend {info.version} (from {info.version_source}), "
            f"outside the range of {len(excluded)} recipe(s):\n{lines}\n"
            f"nothing was changed; use a tree of a version these recipes support, or plan again "
            f"for this version (--vllm-ascend-version {info.version})"
        )


def _check_paths(root: Path, patches: list[PatchSpec]) -> None:
    problems = [f"  - patch {p.name} (recipe {p.recipe}) touches {rel!r}: {why}"
                for p in patches for rel in p.targets
                for why in [_unsafe_path(root, rel)] if why]
    if problems:
        raise PatchError("refusing to apply: the bundle's patches reach outside the tree\n"
                         + "\n".join(problems) + "\nnothing was changed")


def _unsafe_path(root: Path, rel: str) -> str | None:
    """Why optkit must not write ``rel`` in the tree at ``root``, or None when it may."""
    path = PurePosixPath(rel)
    if path.is_absolute() or rel.startswith("\\") or rel[1:2] == ":":
        return "an absolute path"
    if ".." in path.parts:
        return "a '..' component leaves the tree"
    if not path.parts:
        return "an empty path"
    if path.parts[0] in _RESERVED:
        return f"{path.parts[0]}/ is not part of the source"
    full = root / rel
    if full.is_symlink():
        return f"it is a symlink (to {os.readlink(full)!r}); optkit patches regular files only"
    if root not in full.resolve().parents:
        return "a directory on the way is a symlink pointing outside the tree"
    return None


def _check_committed(root: Path, files: list[str]) -> None:
    if not files:
        return  # without a pathspec git status would report the whole checkout
    proc = _git(root, "status", "--porcelain", "--untracked-files=all", "--",
                *(f":(literal){f}" for f in files))
    if proc.returncode != 0:
        raise TreeError(f"`git status` failed in {root}: {proc.stderr.decode(errors='replace').strip()}")
    dirty = proc.stdout.decode(errors="replace").splitlines()
    if dirty:
        raise TreeError(
            f"the git checkout {root} has uncommitted changes in files the patches touch:\n"
            + "\n".join(f"  {line}" for line in dirty)
            + "\ncommit or stash them (or pass --force to patch over them); nothing was changed"
        )


def _classify(root: Path, patches: list[PatchSpec], data: dict[str, bytes]) -> tuple[list, list]:
    """Split into (to apply, already present); refuse listing every patch that fits neither."""
    to_apply, present, failures = [], [], []
    for spec in patches:
        error = _git_apply(root, data[spec.name], "--check")
        if error is None:
            _check_targets(root, spec, data[spec.name])
            to_apply.append(spec)
        elif _git_apply(root, data[spec.name], "--check", "--reverse") is None:
            present.append(spec)
        else:
            failures.append(f"  - patch {spec.name} (recipe {spec.recipe}):\n{_indent(error)}")
    if failures:
        raise PatchError(f"{len(failures)} patch(es) do not apply to {root} and are not already "
                         "present:\n" + "\n".join(failures) + "\nnothing was changed")
    return to_apply, present


def _check_targets(root: Path, spec: PatchSpec, patch: bytes) -> None:
    """Cross-check ``spec.targets`` (what optkit backs up) against the files git would write."""
    proc = _git(root, "apply", "-p1", "--numstat", "-z", stdin=patch)
    touched = _numstat_paths(proc.stdout.decode(errors="surrogateescape"))
    if proc.returncode != 0 or not touched <= set(spec.targets):
        raise PatchError(f"patch {spec.name} (recipe {spec.recipe}): git would write "
                         f"{sorted(touched)}, but optkit reads {list(spec.targets)} from its headers; "
                         "the patch uses a form optkit does not parse (quoted or spaced names?)")


def _numstat_paths(out: str) -> set[str]:
    """Paths in ``git apply --numstat -z`` output: ``A\tD\tpath\0``, or ``A\tD\t\0old\0new\0``."""
    items, paths = out.split("\0"), set()
    while items:
        record = items.pop(0)
        if record:
            path = record.split("\t", 2)[2]
            paths.update([path] if path else [items.pop(0), items.pop(0)])
    return paths


def _check_together(root: Path, to_apply: list[PatchSpec], data: dict[str, bytes]) -> None:
    """Apply all patches in order to a scratch copy of their targets: catch patches that fight."""
    if len(to_apply) < 2:
        return
    with tempfile.TemporaryDirectory(prefix="optkit-check-") as tmp:
        scratch = Path(tmp)
        for rel in _targets(to_apply):
            if (root / rel).is_file():
                (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, scratch / rel)
        for n, spec in enumerate(to_apply):
            error = _git_apply(scratch, data[spec.name])
            if error is not None:
                raise PatchError(_conflict_message(spec, to_apply[:n], error))


def _conflict_message(spec: PatchSpec, earlier: list[PatchSpec], error: str) -> str:
    rivals = [p for p in earlier if set(p.targets) & set(spec.targets)]
    named = ", ".join(f"{p.name} (recipe {p.recipe})" for p in rivals) or "the patches before it"
    return (f"patch {spec.name} (recipe {spec.recipe}) applies alone but not after {named}: "
            f"they change the same lines\n{_indent(error)}\nthese recipes cannot be applied "
            "together; nothing was changed")


def _already_applied(root: Path, patches: list[PatchSpec], state: dict) -> list[PatchOutcome]:
    requested = [(p.name, p.sha256) for p in patches]
    recorded = [(p["name"], p["sha256"]) for p in state["patches"]]
    if requested != recorded:
        recipes = ", ".join(dict.fromkeys(p["recipe"] for p in state["patches"]))
        raise PatchError(f"{root} already has other optkit patches applied (recipes {recipes}); "
                         f"run `optkit revert --tree {root}` first, then apply this bundle")
    drift = _drift(root, state)
    if drift:
        raise TreeError(_drift_message(root, drift, "these patches are applied, but files changed since",
                                       "`optkit revert --force` discards the changes"))
    return [PatchOutcome(o.recipe, o.name, "already applied" if o.outcome == "applied" else o.outcome)
            for o in _recorded(state)]


def _drift(root: Path, state: dict, *, pristine_ok: bool = False) -> list[Drift]:
    """Files whose sha256 is not the one recorded after the apply (nor, if ``pristine_ok``, before)."""
    files = state["files"]
    current = tree_checksum(root, list(files))
    return [Drift(rel, f["after"], current.get(rel)) for rel, f in sorted(files.items())
            if current.get(rel) != f["after"] and not (pristine_ok and current.get(rel) == f["before"])]


def _drift_message(root: Path, drift: list[Drift], what: str, fix: str) -> str:
    lines = "\n".join(f"  - {d.path}: expected {d.expected or 'no file'}, found {d.actual or 'no file'}"
                      for d in drift)
    return f"{root}: {what}:\n{lines}\n{fix}"


# --------------------------------------------------------------------------- applying


def _apply_journaled(root: Path, info: TreeInfo, patches: list[PatchSpec],
                     to_apply: list[PatchSpec], data: dict[str, bytes]) -> None:
    """Back up, write the journal, apply patch by patch; roll back on any failure."""
    fault_after = int(os.environ.get(FAULT_ENV) or 0)
    current = None
    try:
        backup, new_dirs = _take_backup(root, _targets(to_apply))
        journal = {"state": "applying", "pid": os.getpid(), "backup": backup, "new_dirs": new_dirs,
                   "patches": [p.name for p in to_apply], "done": []}
        _write_json(root / HOME / "journal.json", journal)
        for n, spec in enumerate(to_apply, 1):
            current = spec
            error = _git_apply(root, data[spec.name])
            if error is not None:
                raise PatchError(f"patch {spec.name} (recipe {spec.recipe}) failed on the real tree "
                                 f"although it passed the checks:\n{_indent(error)}")
            journal["done"].append(spec.name)
            _write_json(root / HOME / "journal.json", journal)
            if n == fault_after:
                os.kill(os.getpid(), signal.SIGKILL)
        current = None
        _commit(root, info, patches, to_apply, backup, new_dirs)
    except BaseException as exc:
        _recover(root)
        if not isinstance(exc, (PatchError, OSError, KeyboardInterrupt)):
            raise
        where = (f"while applying patch {current.name} (recipe {current.recipe})" if current
                 else "while saving backups or recording the result")
        cause = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"failed ({exc})"
        raise PatchError(f"{cause} {where}; every file was restored, the tree is as before") from exc


def _take_backup(root: Path, files: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """Copy each existing target to ``backup/``; note absent ones and the directories they need."""
    sums = tree_checksum(root, files)
    backup_dir = root / HOME / "backup"
    backup_dir.mkdir()
    for rel in sums:
        _copy_synced(root / rel, backup_dir / rel)
    new_dirs = sorted({d.relative_to(root).as_posix() for rel in files if rel not in sums
                       for d in (root / rel).parents if root in d.parents and not d.exists()})
    return {rel: sums.get(rel) for rel in files}, new_dirs


def _commit(root: Path, info: TreeInfo, patches: list[PatchSpec], to_apply: list[PatchSpec],
            backup: dict[str, str | None], new_dirs: list[str]) -> None:
    """Record the result; removing the journal is the commit point."""
    after = tree_checksum(root, list(backup))
    state = {
        "state_version": 1,
        "vllm_ascend": str(info.version),
        "patches": [{"recipe": p.recipe, "name": p.name, "sha256": p.sha256,
                     "outcome": "applied" if p in to_apply else "already present"} for p in patches],
        "files": {rel: {"before": sha, "after": after.get(rel)} for rel, sha in backup.items()},
        "new_dirs": new_dirs,
    }
    _write_json(root / HOME / "state.json", state)
    (root / HOME / "backup").replace(root / HOME / "pristine")
    (root / HOME / "journal.json").unlink()
    _fsync_dir(root / HOME)


def _recover(root: Path) -> Recovery | None:
    """Roll back an unfinished apply (its journal exists): restore its files, drop its records."""
    home = root / HOME
    journal = _read_json(home / "journal.json")
    if journal is None:  # a backup without journal: killed before the first write to the tree
        shutil.rmtree(home / "backup", ignore_errors=True)
        return None
    restored = _restore(root, journal["backup"], journal["new_dirs"], [home / "backup", home / "pristine"])
    (home / "state.json").unlink(missing_ok=True)
    for leftover in ("backup", "pristine", "tmp"):
        shutil.rmtree(home / leftover, ignore_errors=True)
    (home / "journal.json").unlink()
    _fsync_dir(home)
    return Recovery(journal["done"], restored)


def _restore(root: Path, wanted: dict[str, str | None], new_dirs: list[str], sources: list[Path]) -> list[str]:
    """Give each file its recorded sha256 (None: no file) from a saved copy; list what changed."""
    current = tree_checksum(root, list(wanted))
    changed = []
    for rel, sha in sorted(wanted.items()):
        if current.get(rel) == sha:
            continue
        if sha is None:
            (root / rel).unlink()
        else:
            _replace(root, _saved_copy(sources, rel, sha), rel)
        changed.append(rel)
    for rel in sorted(new_dirs, key=lambda d: d.count("/"), reverse=True):
        try:
            (root / rel).rmdir()
        except OSError:
            pass  # not empty (something else lives there now) or already gone
    return changed


def _saved_copy(sources: list[Path], rel: str, sha: str) -> Path:
    for source in sources:
        if tree_checksum(source, [rel]).get(rel) == sha:
            return source / rel
    raise TreeError(f"cannot restore {rel}: its saved copy under {HOME}/ is missing or damaged; "
                    f"restore the file by hand (its pristine sha256 is {sha}), then delete {HOME}/")


def _replace(root: Path, copy: Path, rel: str) -> None:
    """Atomically put ``copy`` at ``root/rel`` (via a temporary file in ``.optkit/tmp``)."""
    tmp = root / HOME / "tmp" / PurePosixPath(rel).name
    _copy_synced(copy, tmp)
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, root / rel)


def _clear(root: Path) -> None:
    """Remove optkit's records (``state.json`` last: until then a revert can run again)."""
    home = root / HOME
    for leftover in ("backup", "pristine", "tmp"):
        shutil.rmtree(home / leftover, ignore_errors=True)
    (home / "state.json").unlink(missing_ok=True)


def _refuse_unfinished(root: Path) -> None:
    if (root / HOME / "journal.json").exists():
        raise TreeError(f"{root} has an unfinished optkit apply; run `optkit apply` without "
                        "--dry-run (or `optkit revert`) to roll it back first")


def _recorded(state: dict) -> list[PatchOutcome]:
    return [PatchOutcome(p["recipe"], p["name"], p["outcome"]) for p in state["patches"]]


def _targets(patches: list[PatchSpec]) -> list[str]:
    return list(dict.fromkeys(rel for p in patches for rel in p.targets))


# --------------------------------------------------------------------------- lock


@contextmanager
def _locked(root: Path) -> Iterator[list[str]]:
    """Hold ``.optkit/lock``; yields notes (a broken stale lock). ``.optkit/`` goes if left empty."""
    home = root / HOME
    home.mkdir(exist_ok=True)
    path = home / "lock"
    notes: list[str] = []
    _take_lock(root, path, notes)
    try:
        yield notes
    finally:
        path.unlink(missing_ok=True)
        for directory in (home / "tmp", home):
            try:
                directory.rmdir()
            except OSError:
                pass  # not empty: optkit's records stay


def _take_lock(root: Path, path: Path, notes: list[str]) -> None:
    for attempt in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid = _lock_pid(path)
            if pid is None:
                raise PatchError(f"{path} exists but holds no pid; if no optkit apply/revert is "
                                 "running on this tree, delete it and try again") from None
            if _alive(pid) or attempt:
                raise PatchError(f"another optkit apply/revert is running (pid {pid}) on {root}; "
                                 f"wait for it to finish (if pid {pid} is not optkit, delete {path})") from None
            notes.append(f"broke a stale lock left by pid {pid}, which is no longer running")
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
            f.flush()
            os.fsync(f.fileno())
        return


def _lock_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


# --------------------------------------------------------------------------- git and files


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """Run git in ``cwd`` without ever climbing to a repository above it."""
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    env.update(GIT_CEILING_DIRECTORIES=str(cwd.parent), GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    cmd = ["git", "-c", f"safe.directory={cwd}", *args]
    try:
        return subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, env=env, timeout=_GIT_TIMEOUT)
    except FileNotFoundError:
        raise PatchError("applying patches needs git (`git apply`); install git and try again") from None
    except subprocess.TimeoutExpired:
        raise PatchError(f"`{' '.join(cmd)}` took more than {_GIT_TIMEOUT}s in {cwd}") from None


def _git_apply(cwd: Path, patch: bytes, *flags: str) -> str | None:
    """``git apply -p1`` of ``patch`` in ``cwd``; None on success, else git's message."""
    proc = _git(cwd, "apply", "-p1", "--whitespace=nowarn", *flags, stdin=patch)
    if proc.returncode == 0:
        return None
    return proc.stderr.decode(errors="replace").strip() or f"git apply exited with {proc.returncode}"


def _indent(text: str) -> str:
    return "\n".join(f"      {line}" for line in text.splitlines())


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TreeError(f"{path} is damaged ({exc}); restore the tree from {path.parent}/ by hand "
                        f"or from a fresh copy, then delete {path.parent}/") from None


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _copy_synced(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
    with open(dst, "rb+") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
