"""git as optkit runs it on a tree: never climbing to an enclosing repository.

git is run as ``git -c safe.directory=TREE apply -p1 --whitespace=nowarn [--check] [--reverse]``
with the patch on stdin, ``cwd=TREE`` and ``GIT_CEILING_DIRECTORIES`` set to the tree's parent:
a plain sdist tree is then patched in git's no-repository mode, and a tree that is itself a git
checkout in repository mode, but git never climbs to an enclosing repository (where it would
resolve paths against that repository's root and silently skip files outside the tree).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from optkit.errors import PatchError

GIT_TIMEOUT = 120


def git(cwd: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess:
    """Run git in ``cwd`` without ever climbing to a repository above it (``env``: variables to add,
    e.g. a commit's author and dates)."""
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    env.update(extra, GIT_CEILING_DIRECTORIES=str(cwd.parent), GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    cmd = ["git", "-c", f"safe.directory={cwd}", *args]
    try:
        return subprocess.run(cmd, cwd=cwd, input=stdin, capture_output=True, env=env, timeout=GIT_TIMEOUT)
    except FileNotFoundError:
        raise PatchError("applying patches needs git (`git apply`); install git and try again") from None
    except subprocess.TimeoutExpired:
        raise PatchError(f"`{' '.join(cmd)}` took more than {GIT_TIMEOUT}s in {cwd}") from None


def git_apply(cwd: Path, patch: bytes, *flags: str) -> str | None:
    """``git apply -p1`` of ``patch`` in ``cwd``; None on success, else git's message."""
    proc = git(cwd, "apply", "-p1", "--whitespace=nowarn", *flags, stdin=patch)
    if proc.returncode == 0:
        return None
    return proc.stderr.decode(errors="replace").strip() or f"git apply exited with {proc.returncode}"


def numstat_paths(out: str) -> set[str]:
    """Paths in ``git apply --numstat -z`` output: ``A\tD\tpath\0``, or ``A\tD\t\0old\0new\0``."""
    items, paths = out.split("\0"), set()
    while items:
        record = items.pop(0)
        if record:
            path = record.split("\t", 2)[2]
            paths.update([path] if path else [items.pop(0), items.pop(0)])
    return paths


def indent(text: str) -> str:
    return "\n".join(f"      {line}" for line in text.splitlines())
