"""The digest of a vllm-ascend tree as it is without optkit's patches: which source a run used.

``pristine_digest(tree)`` is sha256 over the sorted ``path\\0sha256\\n`` lines of the tree's source
files. A file optkit patched counts with the sha256 it had before the apply (recorded in
``.optkit/state.json``) and a file a patch created does not count, so the same tree gives the same
digest with or without a bundle's patches applied, and the digests of two trees differ exactly when
their unpatched sources do. Build outputs and caches are left out (``build/``, ``dist/`` and ``csrc/build/`` at
their places, ``__pycache__/`` and ``*.egg-info/`` anywhere, the installed op package
``vllm_ascend/_cann_ops_custom/``, ``*.so``, ``*.pyc``, ``*.o``), and so are ``.git/`` and optkit's
own ``.optkit/``: rebuilding the kernels in place changes nothing.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from optkit.errors import TreeError
from optkit.tree.cache import sha256_file
from optkit.tree.inspect import inspect_tree
from optkit.tree.journal import read_state
from optkit.tree.safety import HOME, state_home

SKIPPED_NAMES = {".git", HOME, "__pycache__"}
"""Directories left out wherever they are."""
SKIPPED_PATHS = {"build", "dist", "csrc/build", "vllm_ascend/_cann_ops_custom"}
"""Build outputs, by path from the tree root: setup.py's build/, the op package build and install dirs."""
SKIPPED_SUFFIXES = (".so", ".pyc", ".o")


@dataclass(frozen=True)
class TreeDigest:
    """A tree's pristine digest, its version, and the optkit patches applied to it now."""

    digest: str
    version: str
    files: int
    applied: list[str]
    """Names of the patches optkit has applied (``NNNN-<recipe>--<file>``), in order; empty when clean."""


def pristine_digest(tree: Path) -> TreeDigest:
    """The digest of ``tree`` without optkit's patches (see the module docstring).

    Raises ``TreeError`` while an apply is unfinished (``optkit revert`` first restores the tree)."""
    info = inspect_tree(tree)
    root = info.root
    if (root / HOME / "journal.json").exists():
        raise TreeError(f"{root}: an optkit apply is unfinished; `optkit revert --tree {root}` restores "
                        "the tree, then its digest can be taken")
    state_home(root)
    state = read_state(root)
    hashes = {rel: sha256_file(root / rel) for rel in _source_files(root)}
    for rel, record in (state.files if state else {}).items():
        if record.before is None:
            hashes.pop(rel, None)
        else:
            hashes[rel] = record.before
    digest = hashlib.sha256("".join(f"{rel}\0{sha}\n" for rel, sha in sorted(hashes.items())).encode())
    return TreeDigest(digest.hexdigest(), str(info.version), len(hashes), [p.name for p in state.patches] if state else [])


def _source_files(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        rel = base.relative_to(root).as_posix()
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_NAMES and not d.endswith(".egg-info")
                       and (d if rel == "." else f"{rel}/{d}") not in SKIPPED_PATHS]
        for name in filenames:
            full = base / name
            if not name.endswith(SKIPPED_SUFFIXES) and full.is_file() and not full.is_symlink():
                found.append(full.relative_to(root).as_posix())
    return found


__all__ = ["TreeDigest", "pristine_digest"]
