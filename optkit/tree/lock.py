"""The tree lock, ``<tree>/.optkit/lock``: one apply or revert at a time.

The lock file holds the pid of the apply/revert that runs (created with O_CREAT|O_EXCL); a lock
whose pid is no longer running is broken, with a note, so a killed run never blocks the next.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from optkit.errors import PatchError
from optkit.tree.journal import HOME


@contextmanager
def locked(root: Path) -> Iterator[list[str]]:
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
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
            f.flush()
            os.fsync(f.fileno())
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
