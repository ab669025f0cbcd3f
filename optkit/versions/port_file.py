"""One file of a patch carried to another release (``optkit port``, ``optkit.versions.port``).

The file's three-way merge (base = the pristine ``--from`` file, ours = base + the patch, theirs
= the ``--to`` file) gives its outcome (exact, offset, created, merged, conflict, moved, missing,
upstream; see ``optkit.versions.port``), its part of the refreshed patch (the diff from the ``--to``
file to the merged one, by ``git diff --no-index``) and, when it does not carry over, the diff3
regions for the worksheet. The refreshed patch's DEP-3 header is dated and described anew here too.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import subprocess
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from optkit.catalog.patchfile import Hunk, Section, split_patch
from optkit.errors import InternalError
from optkit.versions.compat import PATCH_TIMEOUT, Base, gnu_patch, merge_file
from optkit.versions.moved import find_move


@dataclass(frozen=True)
class FilePort:
    """One file of a patch on the ``--to`` release."""

    path: str
    outcome: str
    """exact, offset, created, merged, conflict, moved, missing or upstream."""
    conflicts: int = 0
    moved_to: str = ""
    merges_clean: bool = False
    """For moved: the three-way merge against ``moved_to`` is clean."""
    why: str = ""

    @property
    def carries(self) -> bool:
        """Whether the file's change is known on the release (so a refreshed patch can be written)."""
        return self.outcome in ("exact", "offset", "created", "merged") or (self.outcome == "moved" and self.merges_clean)


@dataclass(frozen=True)
class FileResult:
    """A file's port: its outcome, its part of the refreshed patch, and its part of the worksheet."""

    file: FilePort
    diff: str = ""
    worksheet: str = ""


def port_file(section: Section, base: Base, tree: Path, labels: tuple[str, str, str], scratch: Path) -> FileResult:
    rel = section.path
    if section.old_path is None:
        return _created(section, base, tree, labels[0])
    if not (tree / rel).is_file():
        return _moved(section, base, tree, labels, scratch)
    patch = section.text().encode("utf-8", "surrogateescape")
    exact = gnu_patch(tree, patch, fuzz=0)
    if exact.returncode and gnu_patch(tree, patch, fuzz=0, reverse=True).returncode == 0:
        return FileResult(FilePort(rel, "upstream", why="the release already has this file's change"))
    before, after, eol = _merge_inputs(section, base, tree / rel, scratch)
    conflicts, merged = merge_file(tree / rel, before, after, labels)
    if conflicts:
        why = (f"{conflicts} conflict(s) in the three-way merge" +
               (" although the hunks apply: the code next to them changed" if exact.returncode == 0 else "") + eol)
        return FileResult(FilePort(rel, "conflict", conflicts, why=why),
                           worksheet=_regions(rel, merged, labels, section))
    if exact.returncode == 0:
        offsets = re.findall(r"Hunk #\d+ succeeded at \d+ \(offset (-?\d+) lines?\)", exact.stdout)
        outcome, why = ("offset", f"{len(offsets)} hunk(s) at moved lines") if offsets else ("exact", "")
    else:
        outcome, why = "merged", "the hunks need their context refreshed; the three-way merge is clean" + eol
    diff = unified_diff(rel, (tree / rel).read_bytes(), merged if section.new_path else None, section.head)
    return FileResult(FilePort(rel, outcome, why=why), diff)


def _merge_inputs(section: Section, base: Base, theirs: Path, scratch: Path) -> tuple[Path, Path, str]:
    """(base file, patched base file, words) for the merge onto ``theirs``. When the release changed
    the file's line ends (CRLF ↔ LF), both are converted to the release's first, so the merge sees
    the code, not the line ends."""
    rel = section.path
    before = base.before / rel
    after = base.after / rel if section.new_path else _empty(scratch)
    old_crlf, new_crlf = _crlf(before.read_bytes()), _crlf(theirs.read_bytes())
    if old_crlf == new_crlf:
        return before, after, ""
    converted = []
    for name, path in (("before", before), ("after", after)):
        data = path.read_bytes().replace(b"\r\n", b"\n")
        out = scratch / "eol" / name / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data.replace(b"\n", b"\r\n") if new_crlf else data)
        converted.append(out)
    words = "CRLF to LF" if old_crlf else "LF to CRLF"
    return converted[0], converted[1], f" (the release changed the file's line ends from {words}; merged on its line ends)"


def _crlf(data: bytes) -> bool:
    return data.count(b"\r\n") * 2 > data.count(b"\n")


def _created(section: Section, base: Base, tree: Path, target: str) -> FileResult:
    rel = section.path
    content = (base.after / rel).read_bytes()
    if (tree / rel).is_file():
        if (tree / rel).read_bytes() == content:
            return FileResult(FilePort(rel, "upstream", why=f"{target} already has this file, as the patch creates it"))
        return FileResult(FilePort(rel, "conflict", 1, why=f"the patch creates it, but {target} has a file of that name"),
                           worksheet=f"=== {rel}: the patch creates this file, but {target} has one of that name\n")
    return FileResult(FilePort(rel, "created"), unified_diff(rel, None, content, section.head))


def _moved(section: Section, base: Base, tree: Path, labels: tuple[str, str, str], scratch: Path) -> FileResult:
    rel = section.path
    base_text = (base.before / rel).read_text(encoding="utf-8", errors="replace")
    move = find_move(rel, base_text, list(section.hunks), tree)
    lost = _hunks_text(section)
    if not move.destination:
        why = f"not in {labels[0]}, and the code its hunks change was not found there"
        return FileResult(FilePort(rel, "missing", why=why),
                           worksheet=f"=== {rel}: not in {labels[0]}; its hunks, as written for {labels[1]}:\n{lost}")
    dest = move.destination
    before, after, _ = _merge_inputs(section, base, tree / dest, scratch)
    conflicts, merged = merge_file(tree / dest, before, after, labels)
    merge_words = "the three-way merge against it is clean" if not conflicts else f"merging into it: {conflicts} conflict(s)"
    why = f"not in {labels[0]}; moved to {dest} (by what the hunks touch: {move.words()}); {merge_words}"
    result = FilePort(rel, "moved", conflicts, dest, not conflicts, why)
    if conflicts:
        return FileResult(result, worksheet=(f"=== {rel}: not in {labels[0]}; its code moved to {dest}\n"
                                              f"# {move.words()}\n# its hunks, as written for {labels[1]}:\n{lost}"))
    head = (f"diff --git a/{dest} b/{dest}",)
    return FileResult(result, unified_diff(dest, (tree / dest).read_bytes(), merged, head))


def _empty(scratch: Path) -> Path:
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / "empty"
    path.write_bytes(b"")
    return path


MAX_REGION = 200
"""A conflict region longer than this (lines) means the file was rewritten around the change: the
worksheet then gives the old hunks instead of the region."""


def _regions(rel: str, merged: bytes, labels: tuple[str, str, str], section: Section, context: int = 3) -> str:
    """The diff3 conflict regions of a merged file, with ``context`` lines around each."""
    lines = merged.decode("utf-8", "surrogateescape").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("<<<<<<< ")]
    out = [f"=== {rel}: {len(starts)} conflict region(s); <<<<<<< {labels[0]} | ||||||| {labels[1]} | "
           f"======= | >>>>>>> {labels[2]}\n"]
    for start in starts:
        end = next(i for i in range(start, len(lines)) if lines[i].startswith(">>>>>>> "))
        first, last = max(start - context, 0), min(end + context, len(lines) - 1)
        if end - start > MAX_REGION:
            out.append(f"@@ merged lines {start + 1}-{end + 1}: one region of {end - start + 1} lines, the file was "
                       f"rewritten around the change; its hunks, as written for {labels[1]}: @@\n" + _hunks_text(section))
            continue
        out.append(f"@@ merged lines {first + 1}-{last + 1} @@\n")
        out += [f"{line}\n" for line in lines[first:last + 1]]
    return "".join(out)


def _hunks_text(section: Section) -> str:
    return "".join(f"{h.header}\n" + "".join(f"{line}\n" for line in h.lines) for h in section.hunks)


# --------------------------------------------------------------------------- the refreshed patch


_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}


def unified_diff(rel: str, old: bytes | None, new: bytes | None, head: tuple[str, ...]) -> str:
    """The section of a patch that turns ``old`` into ``new`` (None: no file), as git writes it
    (default diff algorithm, 3 lines of context, function names in hunk headers), with the
    ``diff --git`` and mode lines of ``head``; independent of the user's git configuration."""
    if old == new:
        return ""
    with tempfile.TemporaryDirectory(prefix="optkit-diff-") as tmp:
        sides = []
        for side, content in (("a", old), ("b", new)):
            if content is None:
                sides.append(os.devnull)
                continue
            path = Path(tmp) / side / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            sides.append(f"{side}/{rel}")
        cmd = ["git", "-c", "core.attributesFile=" + os.devnull, "-c", "diff.noprefix=false", "diff", "--no-index",
               "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--diff-algorithm=myers",
               "--indent-heuristic", "--inter-hunk-context=0", "-U3", "--no-prefix", *sides]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_"))}, **_GIT_ENV, "HOME": tmp}
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, timeout=PATCH_TIMEOUT, env=env)
    if proc.returncode not in (0, 1):
        raise InternalError(f"git diff --no-index failed: {proc.stderr.decode(errors='replace').strip()}")
    out = proc.stdout.decode("utf-8", "surrogateescape")
    hunks = out[out.index("\n@@ ") + 1:] if "\n@@ " in out else ""
    modes = [line for line in head[1:] if line.startswith(("new file mode", "deleted file mode"))]
    lines = [f"diff --git a/{rel} b/{rel}", *modes,
             f"--- {'a/' + rel if old is not None else '/dev/null'}", f"+++ {'b/' + rel if new is not None else '/dev/null'}"]
    return "\n".join(lines) + "\n" + hunks


def _hunk_key(path: str, hunk: Hunk) -> tuple:
    return path, hunk.lines


def new_hunks(body: str, sections: list[Section], results: list[FileResult]) -> tuple[str, ...]:
    """Hunks of the refreshed ``body`` whose lines are not a hunk of the old patch (for the file
    itself, or the file it moved from)."""
    old = {_hunk_key(r.file.moved_to or s.path, h) for s, r in zip(sections, results) for h in s.hunks}
    fresh = []
    for section in split_patch(body)[1]:
        fresh += [f"{section.path} {h.header}\n" + "".join(f"{line}\n" for line in h.lines)
                  for h in section.hunks if _hunk_key(section.path, h) not in old]
    return tuple(fresh)


def with_date(preamble: str, date: _dt.date) -> str:
    """The DEP-3 header with ``Last-Update`` set to ``date`` (added before ``---`` when absent)."""
    stamp = f"Last-Update: {date.isoformat()}"
    if re.search(r"^Last-Update:.*$", preamble, re.M):
        return re.sub(r"^Last-Update:.*$", stamp, preamble, count=1, flags=re.M)
    if re.search(r"^---$", preamble, re.M):
        return re.sub(r"^---$", stamp + "\n---", preamble, count=1, flags=re.M)
    return preamble


def with_description(text: str, description: str) -> str:
    """The patch with its DEP-3 ``Description`` replaced (continuation lines indented by one space)."""
    wrapped = textwrap.wrap(f"Description: {description}", width=99, subsequent_indent=" ",
                            break_long_words=False, break_on_hyphens=False)
    preamble, sections = split_patch(text)
    lines = preamble.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Description:")), None)
    if start is None:
        return text
    end = start + 1
    while end < len(lines) and lines[end][:1] in (" ", "\t"):
        end += 1
    lines[start:end] = wrapped
    return "\n".join(lines) + "\n" + "".join(s.text() for s in sections)
