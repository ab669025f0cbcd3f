"""Unpack an sdist safely: nothing outside the destination, no links out, no special files."""

from __future__ import annotations

import re
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from optkit.errors import TreeError


def extract_sdist(archive: Path, dest: Path) -> Path:
    """Unpack the sdist ``archive`` safely: its single top directory's contents go into ``dest``.

    ``dest`` must not exist yet. Members with absolute paths, ``..`` components, links that
    point outside the archive, or device files are refused with ``TreeError`` and nothing is
    left at ``dest``.
    """
    archive, dest = Path(archive), Path(dest)
    if dest.exists():
        raise TreeError(f"cannot unpack {archive.name} into {dest}: it already exists")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        _extract_checked(archive, staging)
        _single_top(staging, archive).rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _extract_checked(archive: Path, into: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, archive)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, members=members, filter="data")
            else:  # Python without extraction filters: the checks above are the guard
                tar.extractall(into, members=members)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TreeError(
            f"cannot unpack {archive}: {exc}; delete it and fetch again with --force"
        ) from None


def _unsafe(archive: Path, name: str, why: str) -> TreeError:
    return TreeError(
        f"refusing to unpack {archive.name}: member {name!r} {why}; the archive is corrupt "
        f"or malicious: delete {archive} and fetch again with --force"
    )


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    """Refuse a member that would write or point outside the extraction directory."""
    name = member.name
    if not inside(name):
        raise _unsafe(archive, name, "has an absolute path or '..'")
    if member.issym():
        target = str(PurePosixPath(name).parent / member.linkname)
        if member.linkname.startswith("/") or not inside(target):
            raise _unsafe(archive, name, f"is a symlink to {member.linkname!r}, outside the tree")
    elif member.islnk():
        if not inside(member.linkname):
            raise _unsafe(archive, name, f"is a hard link to {member.linkname!r}, outside the tree")
    elif not (member.isfile() or member.isdir()):
        raise _unsafe(archive, name, "is a device, fifo or other special file")


def inside(relpath: str) -> bool:
    """Whether a tar path stays inside its root once ``.`` and ``..`` are resolved."""
    if relpath.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", relpath):
        return False
    depth = 0
    for part in relpath.replace("\\", "/").split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part not in ("", "."):
            depth += 1
    return True


def _single_top(staging: Path, archive: Path) -> Path:
    entries = list(staging.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        raise TreeError(
            f"{archive.name} is not a normal sdist: it should hold one top directory, "
            f"found {len(entries)} entries; delete it and fetch again with --force"
        )
    return entries[0]
