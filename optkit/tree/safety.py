"""Where in a tree optkit may write and delete: source files inside it, and its own ``.optkit/``.

A patch target, a path recorded in ``.optkit/state.json`` or ``journal.json``, and ``.optkit/``
itself are checked here before anything is written or deleted. A path must name a file inside the
tree (``optkit.catalog.patchfile.path_problem``) that is no symlink, reached through no directory
that is a symlink out of the tree. ``.optkit/`` must be a real directory holding no symlink: a
``.optkit`` linked to a directory elsewhere would make the rollback's deletions land there.
"""

from __future__ import annotations

import os
from pathlib import Path

from optkit.catalog.patchfile import path_problem
from optkit.errors import TreeError

HOME = ".optkit"


def unsafe_path(root: Path, rel: str) -> str | None:
    """Why optkit must not write ``rel`` in the tree at ``root`` (resolved), or None when it may."""
    problem = path_problem(rel)
    if problem is not None:
        return problem
    full = root / rel
    if full.is_symlink():
        return f"it is a symlink (to {os.readlink(full)!r}); optkit patches regular files only"
    if escapes(root, rel):
        return "a directory on the way is a symlink pointing outside the tree"
    return None


def escapes(root: Path, rel: str) -> bool:
    """Whether the directory holding ``root/rel`` is, once symlinks are resolved, outside ``root``."""
    parent = (root / rel).parent.resolve()
    return parent != root and root not in parent.parents


def state_home(root: Path) -> Path:
    """``root/.optkit``, checked: absent, or a real directory inside the tree with no symlink in it.

    Raises ``TreeError`` naming what is wrong and what to do; nothing is changed.
    """
    home = root / HOME
    if home.is_symlink():
        raise TreeError(f"{home} is a symlink (to {os.readlink(home)!r}); optkit keeps its records in a real "
                        f"directory inside the tree and does not follow links out of it: remove the link "
                        f"(`rm {home}` leaves its target alone); nothing was changed")
    if home.exists() and not home.is_dir():
        raise TreeError(f"{home} is a file, where optkit keeps its records directory; move it away; "
                        "nothing was changed")
    for parent, dirs, files in os.walk(home):
        for name in sorted(dirs + files):
            path = Path(parent, name)
            if path.is_symlink():
                raise TreeError(f"{path} is a symlink (to {os.readlink(path)!r}); optkit's records hold none, "
                                "and writing through it could change files outside the tree: remove it; "
                                "nothing was changed")
    return home
