"""Patch files as text: the DEP-3 header of a patch and the tree files its diff touches.

Read by the catalog (lint of recipe and kernel patches) and by the tree stage (a bundle's patch
set); nothing here opens a tree or runs git.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

DEV_NULL = "/dev/null"
RESERVED = (".optkit", ".git")
"""Top-level directories of a tree that are never source: optkit's records and git's."""

_DEP3_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9-]*):[ \t]*(?P<value>.*)$")
_HUNK = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
_GIT_HEADER = re.compile(r"^diff --git a/(?P<old>\S+) b/(?P<new>\S+)$")
_EXTENDED = ("rename from ", "rename to ", "copy from ", "copy to ")


def parse_dep3(text: str) -> dict[str, str]:
    """The DEP-3 header fields of a patch (``Description``, ``Origin``, ``Recipe``, …).

    The header is the ``Key: value`` block before the first line ``---`` (or the first blank
    line, or the diff itself); continuation lines (starting with a space) are joined to the
    field with a newline, and a continuation line ``.`` stands for an empty line. Keys keep their
    spelling; a patch without a header gives ``{}``.
    """
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line == "---" or not line.strip() or line.startswith(("--- ", "diff ", "@@", "Index: ")):
            break
        if line[0] in " \t" and key is not None:
            more = line.strip()
            fields[key] += "\n" + ("" if more == "." else more)
            continue
        match = _DEP3_FIELD.match(line)
        if match is None:
            break
        key = match["key"]
        fields[key] = match["value"].strip()
    return fields


def patch_paths(text: str) -> list[str]:
    """The tree files a unified diff touches, in order of appearance, without duplicates.

    Paths come from the ``---``/``+++`` lines (and git's ``diff --git``, ``rename``/``copy``
    lines) with the first component (``a/``, ``b/``) stripped, as ``git apply -p1`` does;
    ``/dev/null`` marks a created or deleted file and is not listed. Hunk bodies are skipped by
    their line counts, so a removed line that starts with ``--`` is not taken for a header.
    Unsafe paths (absolute, with ``..``) are returned as they are, for the caller to refuse.
    """
    found: dict[str, None] = {}
    old_left = new_left = 0
    for line in text.splitlines():
        if old_left > 0 or new_left > 0:
            if line.startswith("-"):
                old_left -= 1
            elif line.startswith("+"):
                new_left -= 1
            elif not line.startswith("\\"):  # context; "\ No newline at end of file" counts nothing
                old_left, new_left = old_left - 1, new_left - 1
            continue
        hunk = _HUNK.match(line)
        if hunk:
            old_left = int(hunk["old"] if hunk["old"] is not None else 1)
            new_left = int(hunk["new"] if hunk["new"] is not None else 1)
            continue
        for path in _header_paths(line):
            found.setdefault(path, None)
    return list(found)


def _header_paths(line: str) -> list[str]:
    if line.startswith(("--- ", "+++ ")):
        raw = line[4:].split("\t", 1)[0].strip().strip('"')
        return [] if raw == DEV_NULL else [_strip_component(raw)]
    git = _GIT_HEADER.match(line)
    if git:
        return [git["old"], git["new"]]
    for prefix in _EXTENDED:
        if line.startswith(prefix):
            return [line[len(prefix):].strip().strip('"')]
    return []


def _strip_component(path: str) -> str:
    """``-p1``: drop the first component of a relative path; keep absolute ones whole."""
    if path.startswith("/") or "/" not in path:
        return path
    return path.split("/", 1)[1]


def path_problem(rel: str) -> str | None:
    """Why ``rel`` cannot name a file of a source tree (absolute, ``..``, empty, reserved), or None.

    What a path says by itself; ``optkit.tree.safety`` adds what the tree on disk says (symlinks).
    """
    path = PurePosixPath(rel)
    if path.is_absolute() or rel.startswith("\\") or rel[1:2] == ":":
        return "an absolute path"
    if ".." in path.parts:
        return "a '..' component leaves the tree"
    if not path.parts:
        return "an empty path"
    if path.parts[0] in RESERVED:
        return f"{path.parts[0]}/ is not part of the source"
    return None
