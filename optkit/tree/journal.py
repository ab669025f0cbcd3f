"""The journaled apply: back up, record, patch, commit, and roll back after a crash.

Everything optkit keeps in a tree lives under ``<tree>/.optkit/``::

    lock          the pid of the apply/revert that runs (``optkit.tree.lock``)
    journal.json  only while an apply runs: {"state": "applying", "backup": {path: sha256 or
                  null if absent}, "new_dirs": [...], "patches": [...], "done": [names]}
    backup/       copies of the target files, written (and fsynced) before the journal
    state.json    after a successful apply: the patches, and per file the sha256 before and after
    pristine/     the backup, kept for ``revert``

The journal is the commit marker: while it exists the apply is unfinished, and the next apply or
revert first puts back every file it lists. A file that already has its recorded sha256 is left
alone, so a restore that is itself interrupted can simply run again. A restore moves the saved
copy into place (a rename: it needs no free space, so a full disk never strands a half-patched
tree), falling back to a copy only across file systems. ``state.json`` and ``journal.json`` are
read through their schemas (``optkit.tree.schema``); a damaged one is a ``TreeError`` naming the
field (or, for a well-formed record changed by hand, its ``digest``), and every path either names
is a tree path, never one outside.

Testing hook: ``OPTKIT_FAULT_AFTER=n`` makes the apply kill its own process with SIGKILL right
after the n-th patch is applied and recorded in the journal, so fault tests can check recovery.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from optkit.errors import PatchError, TreeError, ValidationFailed
from optkit.tree import gitops
from optkit.tree.inspect import TreeInfo, tree_checksum
from optkit.tree.patchset import PatchSpec, targets_of
from optkit.tree.safety import HOME, escapes

if TYPE_CHECKING:  # pydantic is imported only where a record is read: status of a clean tree stays light
    from optkit.tree import schema

FAULT_ENV = "OPTKIT_FAULT_AFTER"
_SCRATCH = ("backup", "pristine", "tmp", "journal.json.tmp", "state.json.tmp")


@dataclass(frozen=True)
class Recovery:
    """An interrupted apply that was rolled back before anything else."""

    done: list[str]
    """Patches the interrupted run had applied."""
    restored: list[str]
    """Files put back (rewritten or deleted)."""


def apply_journaled(root: Path, info: TreeInfo, patches: list[PatchSpec],
                     to_apply: list[PatchSpec], data: dict[str, bytes]) -> None:
    """Back up, write the journal, apply patch by patch; roll back on any failure."""
    fault_after = int(os.environ.get(FAULT_ENV) or 0)
    current = None
    try:
        backup, new_dirs = _take_backup(root, targets_of(to_apply))
        journal = {"state": "applying", "pid": os.getpid(), "backup": backup, "new_dirs": new_dirs,
                   "patches": [p.name for p in to_apply], "done": []}
        _write_json(root / HOME / "journal.json", journal)
        for n, spec in enumerate(to_apply, 1):
            current = spec
            error = gitops.git_apply(root, data[spec.name])
            if error is not None:
                raise PatchError(f"patch {spec.name} (recipe {spec.recipe}) failed on the real tree "
                                 f"although it passed the checks:\n{gitops.indent(error)}")
            journal["done"].append(spec.name)
            _write_json(root / HOME / "journal.json", journal)
            if n == fault_after:
                os.kill(os.getpid(), signal.SIGKILL)
        current = None
        _commit(root, info, patches, to_apply, backup, new_dirs)
    except BaseException as exc:
        recover(root)
        if not isinstance(exc, (PatchError, OSError, KeyboardInterrupt)):
            raise
        where = (f"while applying patch {current.name} (recipe {current.recipe})" if current
                 else "while saving backups or recording the result")
        cause = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"failed ({_reason(exc)})"
        raise PatchError(f"{cause} {where}; every file was restored, the tree is as before") from exc


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename2 or exc.filename
        return f"{exc.strerror}: {where}" if where else exc.strerror
    return str(exc)


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


def recover(root: Path) -> Recovery | None:
    """Roll back an unfinished apply (its journal exists): restore its files, drop its records."""
    home = root / HOME
    journal = read_journal(root)
    if journal is None:  # a backup without journal: killed before the first write to the tree
        _remove(home, ("backup", "journal.json.tmp"))
        return None
    restored = restore(root, journal.backup, journal.new_dirs, [home / "backup", home / "pristine"])
    (home / "state.json").unlink(missing_ok=True)
    _remove(home, _SCRATCH)
    (home / "journal.json").unlink()
    _fsync_dir(home)
    return Recovery(list(journal.done), restored)


def restore(root: Path, wanted: dict[str, str | None], new_dirs: list[str], sources: list[Path]) -> list[str]:
    """Give each file its recorded sha256 (None: no file) from a saved copy; list what changed.

    The saved copy is moved into place, so it is gone afterwards: callers drop their copies next.
    """
    outside = sorted(rel for rel in wanted if escapes(root, rel))
    if outside:
        raise TreeError(f"refusing to restore {', '.join(outside)}: a directory on the way is now a symlink "
                        f"out of {root}; put the directory back, then run the command again")
    current = tree_checksum(root, list(wanted))
    to_change = [(rel, sha) for rel, sha in sorted(wanted.items()) if current.get(rel) != sha]
    _refuse_read_only(root, [rel for rel, _ in to_change])
    changed = []
    for rel, sha in to_change:
        try:
            if sha is None:
                (root / rel).unlink()
            else:
                _move_into_place(root, _saved_copy(sources, rel, sha), rel)
        except OSError as exc:
            raise TreeError(_unrestored(root, rel, exc.strerror or str(exc), changed)) from None
        changed.append(rel)
    for rel in sorted(new_dirs, key=lambda d: d.count("/"), reverse=True):
        try:
            (root / rel).rmdir()
        except OSError:
            pass  # not empty (something else lives there now) or already gone
    return changed


def _refuse_read_only(root: Path, files: list[str]) -> None:
    """Before anything is restored: every file to put back, and its directory, must be writable (by
    its owner's write bit too, as ``checks.check_writable`` asks of an apply, so root is stopped alike)."""
    from optkit.tree.checks import read_only

    for rel in files:
        path = root / rel
        folder = next(d for d in path.parents if d.exists())
        if path.is_file() and read_only(path):
            raise TreeError(_unrestored(root, rel, "the file is read-only", [], fix=f"chmod u+w {path}"))
        if read_only(folder):
            raise TreeError(_unrestored(root, rel, f"its directory {folder}/ is not writable", [],
                                        fix=f"chmod u+w {folder}"))


def _unrestored(root: Path, rel: str, why: str, restored: list[str], fix: str = "") -> str:
    """Why ``rel`` could not be put back, what was, and how to finish (the records stay for it)."""
    done = (f"the {len(restored)} file(s) restored before it ({', '.join(restored)}) keep their pristine bytes"
            if restored else "nothing was restored yet")
    fix = fix or "make it writable"
    return (f"cannot restore {root / rel}: {why}; {fix}, then run `optkit revert --tree {root}` again; "
            f"{done}, and optkit's records in {root / HOME}/ stay, so that revert finishes the job")


def _saved_copy(sources: list[Path], rel: str, sha: str) -> Path:
    for source in sources:
        if tree_checksum(source, [rel]).get(rel) == sha:
            return source / rel
    raise TreeError(f"cannot restore {rel}: its saved copy under {HOME}/ is missing or damaged; "
                    f"restore the file by hand (its pristine sha256 is {sha}), then delete {HOME}/")


def _move_into_place(root: Path, copy: Path, rel: str) -> None:
    """Atomically put ``copy`` at ``root/rel``: a rename, or across file systems a copy to ``.optkit/tmp``
    renamed into place."""
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(copy, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        tmp = root / HOME / "tmp" / PurePosixPath(rel).name
        _copy_synced(copy, tmp)
        os.replace(tmp, target)
    _fsync_dir(target.parent)


def clear(root: Path) -> None:
    """Remove optkit's records (``state.json`` last: until then a revert can run again)."""
    home = root / HOME
    _remove(home, _SCRATCH)
    (home / "state.json").unlink(missing_ok=True)


def _remove(home: Path, names: tuple[str, ...]) -> None:
    for name in names:
        path = home / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def refuse_unfinished(root: Path) -> None:
    if (root / HOME / "journal.json").exists():
        raise TreeError(f"{root} has an unfinished optkit apply; run `optkit apply` without "
                        "--dry-run (or `optkit revert`) to roll it back first")


def read_state(root: Path) -> schema.TreeState | None:
    """``.optkit/state.json`` (what a finished apply recorded), or None if there is none."""
    path = root / HOME / "state.json"
    return _read(path, lambda schema: schema.TreeState) if path.exists() or path.is_symlink() else None


def read_journal(root: Path) -> schema.Journal | None:
    """``.optkit/journal.json`` (an apply that has not finished), or None if there is none."""
    path = root / HOME / "journal.json"
    return _read(path, lambda schema: schema.Journal) if path.exists() or path.is_symlink() else None


def applied_recipes(root: Path) -> dict[str, list[str]]:
    """Recipe → the names of its patches a finished optkit apply left on the tree (``state.json``,
    outcome ``applied``), in apply order; empty for a tree optkit never patched."""
    state = read_state(root)
    applied: dict[str, list[str]] = {}
    for patch in state.patches if state else []:
        if patch.outcome == "applied":
            applied.setdefault(patch.recipe, []).append(patch.name)
    return applied


@contextmanager
def pristine_base(root: Path):
    """The tree at ``root`` as it was before optkit's apply: ``root`` itself when optkit never patched it,
    else a scratch copy (hard links where the file system allows) in which every file the apply recorded
    has its pristine bytes again (``pristine/``) and every file a patch created is gone. What probes and
    knob scans judge on a patched tree: optkit's own patches are never taken for upstream's code.
    Refused while an apply is unfinished; the copy is deleted on exit."""
    refuse_unfinished(root)
    state = read_state(root)
    if state is None:
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="optkit-base-") as scratch:
        base = Path(scratch) / root.name
        shutil.copytree(root, base, symlinks=True, copy_function=_link_or_copy,
                        ignore=lambda folder, names: [n for n in names if Path(folder) == root and n in (HOME, ".git")])
        if (root / ".git").exists():  # the version may come from git describe: read the tree's own history
            (base / ".git").symlink_to(root / ".git")
        for rel, record in sorted(state.files.items()):
            (base / rel).unlink(missing_ok=True)  # a link to the patched file: never written through
            if record.before is not None:
                (base / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(_saved_copy([root / HOME / "pristine"], rel, record.before), base / rel)
        for rel in sorted(state.new_dirs, key=lambda d: d.count("/"), reverse=True):
            if (base / rel).is_dir() and not any((base / rel).iterdir()):
                (base / rel).rmdir()
        yield base


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _read(path: Path, model):
    from optkit.tree import schema

    try:
        return schema.read(path, model(schema))
    except ValidationFailed as exc:
        problems = "\n".join(f"  {p}" for p in exc.problems)
        raise TreeError(f"{path} is damaged or was edited by hand:\n{problems}\noptkit cannot tell which "
                        f"files it changed; restore the tree from a fresh copy (`optkit tree fetch VERSION DEST`), "
                        f"or put the file back as optkit wrote it, then delete {path.parent}/") from None


def _write_json(path: Path, data: dict) -> None:
    """Write a record atomically, with its ``digest`` (so that a record changed by hand is refused)."""
    from optkit.tree.schema import digest

    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps({**data, "digest": digest(data)}, indent=2, sort_keys=True) + "\n")
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
