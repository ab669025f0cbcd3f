"""The results of ``optkit compat``'s patch checks, kept between runs: ``<cache>/compat/<key>.json``.

A cell's result on a release depends on the patch's bytes, the release's tree, the base release's
tree (the three-way view) and the code that checks; the key is the sha256 of all four, so a changed
patch, another tree or another version of the check is checked again, and nothing else is. A tree is
named by its digest (a fetched tree: its sdist's sha256, recorded by ``optkit tree fetch``); a tree
with no digest is never cached. A record that cannot be read is a miss; one that cannot be written
is skipped (the result is computed all the same).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from optkit.catalog.paths import cache_dir

CODE = ("versions/compat.py", "versions/compat_cache.py", "catalog/patchfile.py")
"""The modules whose code decides a cell (their bytes are the check's version)."""
FIELDS = ("result", "three_way", "why")


@lru_cache(maxsize=None)
def code_version() -> str:
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for rel in CODE:
        digest.update(rel.encode() + b"\0" + (package / rel).read_bytes() + b"\0")
    return digest.hexdigest()


def cell_key(patch: bytes, tree_digest: str | None, base_digest: str | None) -> str | None:
    """The key of one patch on one release, or None when a tree has no digest (not cached)."""
    if not tree_digest or not base_digest:
        return None
    digest = hashlib.sha256()
    for part in (code_version().encode(), hashlib.sha256(patch).hexdigest().encode(), tree_digest.encode(),
                 base_digest.encode()):
        digest.update(part + b"\0")
    return digest.hexdigest()


def _path(key: str) -> Path:
    return cache_dir() / "compat" / f"{key}.json"


def load(key: str | None) -> dict | None:
    """The cached fields of a cell (``FIELDS``), or None."""
    if key is None:
        return None
    try:
        data = json.loads(_path(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and all(isinstance(data.get(f), str) for f in FIELDS) else None


def store(key: str | None, fields: dict) -> None:
    if key is None:
        return
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({f: fields[f] for f in FIELDS}, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
