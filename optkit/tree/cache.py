"""The cache of fetched sdists and pristine trees (under ``optkit.catalog.paths.cache_dir()``)::

    <cache>/sdists/vllm_ascend-0.23.0.tar.gz      the archive, as PyPI serves it
    <cache>/trees/vllm-ascend-0.23.0/             the sdist's top directory's contents
    <cache>/trees/vllm-ascend-0.23.0.json         {"package", "version", "sdist", "sha256", "size"}

The JSON record is written last, so it marks a complete entry; an entry whose archive no longer
has the recorded sha256 is not trusted (``read_record`` gives None) and is fetched again. An entry
is filled only under ``entry_lock`` (``<cache>/locks/<package>-<version>.lock``, ``flock``): a
second process fetching the same release waits, then finds the complete entry.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from optkit.catalog.paths import cache_dir


def tree_path(package: str, version: str) -> Path:
    return cache_dir() / "trees" / f"{package}-{version}"


def record_path(package: str, version: str) -> Path:
    return cache_dir() / "trees" / f"{package}-{version}.json"


@contextmanager
def entry_lock(package: str, version: str) -> Iterator[None]:
    """Hold the exclusive lock of one cache entry (blocking; released on exit, or when the
    process dies: the kernel drops ``flock`` locks with the file descriptor)."""
    locks = cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{package}-{version}.lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_record(package: str, version: str) -> dict | None:
    """The cache record, if present, well-formed and matching its archive's sha256."""
    try:
        record = json.loads(record_path(package, version).read_text())
        sdist = cache_dir() / "sdists" / record["sdist"]
        if Path(record["sdist"]).name != record["sdist"] or not sdist.is_file():
            return None
        if sha256_file(sdist) != record["sha256"]:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record


def write_record(package: str, version: str, sdist: Path, sha256: str) -> None:
    record = {
        "package": package,
        "version": version,
        "sdist": sdist.name,
        "sha256": sha256,
        "size": sdist.stat().st_size,
    }
    path = record_path(package, version)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
