"""The tree lock, ``<tree>/.optkit/lock``: one apply or revert at a time.

The lock file holds the pid of the apply/revert that runs (created with O_CREAT|O_EXCL); a lock
whose pid is no longer running is broken, with a note, so a killed run never blocks the next. A
lock that cannot be written whole (a read-only tree, a full disk) is removed again and reported
as a ``TreeError``: a failed command never leaves a lock behind that blocks the next one.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from optkit.errors import PatchError, TreeError
from optkit.tree.safety import HOME


@contextmanager
def locked(root: Path) -> Iterator[list[str]]:
    """Hold ``.optkit/lock``; yields notes (a broken stale lock). ``.optkit/`` goes if left empty."""
    home = root / HOME
    path = home / "lock"
    notes: list[str] = []
    try:
        home.mkdir(exist_ok=True)
        _take_lock(root, path, notes)
    except OSError as exc:
        raise TreeError(f"cannot take the tree lock {path}: {exc.strerror or exc}; optkit needs to write "
                        f"in {root} (a writable tree with free space); nothing was changed") from None
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
            pid = lock_pid(path)
            if pid is None:
                raise PatchError(f"{path} exists but holds no pid; if no optkit apply/revert is "
                                 "running on this tree, delete it and try again") from None
            if alive(pid) or attempt:
                raise PatchError(f"another optkit apply/revert is running (pid {pid}) on {root}; "
                                 f"wait for it to finish (if pid {pid} is not optkit, delete {path})") from None
            notes.append(f"broke a stale lock left by pid {pid}, which is no longer running")
            path.unlink(missing_ok=True)
            continue
        try:
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()}\n")
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            path.unlink(missing_ok=True)  # a lock without its pid would block every later run
            raise
        return


def lock_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True
