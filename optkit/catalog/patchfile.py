"""Patch files as text: the DEP-3 header of a patch, the tree files its diff touches, and its
per-file sections and hunks.

Read by the catalog (lint of recipe and kernel patches) and by the tree stage (a bundle's patch
set); nothing here opens a tree or runs git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

DEV_NULL = "/dev/null"
RESERVED = (".optkit", ".git")
"""Top-level directories of a tree that are never source: optkit's records and git's."""

_DEP3_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9-]*):[ \t]*(?P<value>.*)$")
_HUNK = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
_HUNK_START = re.compile(r"^@@ -(?P<start>\d+)(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
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


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: where it starts on the old side, and its lines (with their ' '/-/+ marks)."""

    old_start: int
    old_length: int
    header: str
    lines: tuple[str, ...]

    @property
    def old_side(self) -> list[str]:
        """The lines the hunk expects (context and removed), without their marks."""
        return [line[1:] for line in self.lines if line[:1] in (" ", "-")]

    @property
    def removed_old_lines(self) -> list[int]:
        """Old line numbers the hunk removes (or replaces)."""
        return [n for n, line in self._numbered() if line[:1] == "-"]

    @property
    def changed_old_lines(self) -> list[int]:
        """Old line numbers the hunk removes, and for each insertion the old line it follows."""
        out, previous = set(), max(self.old_start - 1, 1)
        for number, line in self._numbered():
            if line[:1] == "-":
                out.add(number)
            elif line[:1] == "+":
                out.add(previous)
            if line[:1] in (" ", "-"):
                previous = number
        return sorted(out)

    def _numbered(self) -> list[tuple[int, str]]:
        """(old line number, line) — for an added line, the number of the next old line."""
        number, out = self.old_start, []
        for line in self.lines:
            out.append((number, line))
            if line[:1] in (" ", "-"):
                number += 1
        return out


@dataclass(frozen=True)
class Section:
    """The part of a patch about one file: its header lines and hunks."""

    old_path: str | None
    """The file before (None: the patch creates it)."""
    new_path: str | None
    """The file after (None: the patch deletes it)."""
    head: tuple[str, ...]
    """The ``diff --git`` line and git's extended header lines (modes, index), without ---/+++."""
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    def text(self) -> str:
        """The section as a patch (header lines, ---/+++ and hunks)."""
        old = f"a/{self.old_path}" if self.old_path else DEV_NULL
        new = f"b/{self.new_path}" if self.new_path else DEV_NULL
        lines = [*self.head, f"--- {old}", f"+++ {new}"]
        for hunk in self.hunks:
            lines += [hunk.header, *hunk.lines]
        return "\n".join(lines) + "\n"


def split_patch(text: str) -> tuple[str, list[Section]]:
    """(everything before the first file, the file sections) of a unified diff in git's form
    (``diff --git`` headers) or plain ``---``/``+++`` form. Hunk bodies are read by their line
    counts, so a removed line that starts with ``--`` is never taken for a header. Lines are split
    at ``\n`` only: a ``\r`` of a file with CRLF line ends stays in the hunk's lines."""
    lines = text.removesuffix("\n").split("\n") if text else []
    preamble: list[str] = []
    sections: list[Section] = []
    head: list[str] = []
    old = new = None
    hunks: list[Hunk] = []
    started = False
    i = 0

    def close() -> None:
        if started:
            sections.append(Section(old, new, tuple(head), tuple(hunks)))

    while i < len(lines):
        line = lines[i]
        hunk = _HUNK_START.match(line) if started else None
        if hunk:
            parsed, i = _hunk(lines, i, hunk)
            hunks.append(parsed)
            continue
        plain = line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        if line.startswith("diff --git ") or (plain and (hunks or not started)):
            close()
            started, head, hunks, old, new = True, [], [], None, None
        if not started:
            preamble.append(line)
        elif plain:
            old, new = _side(line[4:]), _side(lines[i + 1][4:])
            i += 1
        elif not hunks:
            head.append(line)
        i += 1
    close()
    return "".join(f"{line}\n" for line in preamble), sections


def _hunk(lines: list[str], i: int, match: re.Match) -> tuple[Hunk, int]:
    old_length = int(match["old"] if match["old"] is not None else 1)
    old_left, new_left = old_length, int(match["new"] if match["new"] is not None else 1)
    body, header, i = [], lines[i], i + 1
    while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
        line = lines[i] or " "  # a blank context line whose space an editor stripped
        old_left -= line[0] in " -"
        new_left -= line[0] in " +"
        body.append(line)
        i += 1
    return Hunk(int(match["start"]), old_length, header, tuple(body)), i


def _side(raw: str) -> str | None:
    raw = raw.split("\t", 1)[0].strip().strip('"')
    return None if raw == DEV_NULL else _strip_component(raw)


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
