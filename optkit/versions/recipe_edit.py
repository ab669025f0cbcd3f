"""A port written into a recipe: minimal, located text edits of ``recipe.yaml``, checked and undone
on failure.

The file is never re-serialised: the edit replaces the lines of one ``releases`` entry with the
entry cut into pieces (each a copy of its lines with ``versions``, ``patches`` and ``adds``
rewritten) and appends copies of the refreshed patches' declarations to ``patches`` (``file``,
``last_update``, ``description`` and, for moved code, ``targets`` rewritten). Lines come from the
line-tracking loader (``optkit.catalog.yamlio``); comments, order, quoting and wrapping of
everything else stay as they were. The edited text must parse to exactly the data intended
(else it is a bug, and nothing is written); written, the recipe is loaded and the catalog linted,
and a new problem puts every file back as it was.
"""

from __future__ import annotations

import copy
import datetime as _dt
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from optkit.catalog.yamlio import LineMap, load_yaml_text
from optkit.errors import InternalError, OptkitError, Problem, ValidationFailed


@dataclass(frozen=True)
class Piece:
    """One piece of a cut release entry: its range, and its patches / adds (None: as they were)."""

    versions: str
    patches: list[str] | None = None
    adds: list[str] | None = None


@dataclass(frozen=True)
class Declaration:
    """A new entry of ``patches``: a copy of ``source``'s declaration with these fields changed."""

    source: str
    file: str
    description: str
    last_update: _dt.date
    targets: list[str]


def edited_text(text: str, display: str, entry: int, pieces: list[Piece], declarations: list[Declaration]) -> str:
    """The recipe text with ``releases[entry]`` replaced by ``pieces`` and ``declarations`` added."""
    data, lines = load_yaml_text(text, display)
    rows = text.split("\n")
    start, end = _item_span(data, lines, "releases", entry, len(rows))
    end = _trimmed_end(rows, start, end)
    block = rows[start:end]
    new_block = [row for piece in pieces for row in _piece(block, data["releases"][entry], lines, entry, start, piece)]
    inserts = [row for decl in declarations for row in _declaration(rows, data, lines, decl)]
    last = len(data["patches"]) - 1
    at = _trimmed_end(rows, *_item_span(data, lines, "patches", last, len(rows)))
    edits = sorted([(start, end, new_block), (at, at, inserts)], reverse=True)
    for first, stop, replacement in edits:
        rows[first:stop] = replacement
    out = "\n".join(rows)
    _check(out, display, _intended(data, entry, pieces, declarations))
    return out


def _item_span(data: dict, lines: LineMap, key: str, index: int, total: int) -> tuple[int, int]:
    """0-based [start, end) rows of ``data[key][index]``, trailing blank and comment rows excluded."""
    start = lines.lines[(key, index)] - 1
    if index + 1 < len(data[key]):
        end = lines.lines[(key, index + 1)] - 1
    else:
        later = sorted(lines.lines[(k,)] for k in data if lines.lines[(k,)] > lines.lines[(key,)])
        end = later[0] - 1 if later else total
    return start, end


def _trimmed_end(rows: list[str], start: int, end: int) -> int:
    while end > start + 1 and (not rows[end - 1].strip() or rows[end - 1].lstrip().startswith("#")):
        end -= 1
    return end


def _key_spans(block: list[str], item: dict, lines: LineMap, path: tuple, offset: int) -> dict[str, tuple[int, int]]:
    """Rows of each key of a mapping item, relative to ``block`` (which starts at row ``offset``)."""
    starts = sorted((lines.lines[path + (k,)] - 1 - offset, k) for k in item)
    spans = {}
    for n, (row, key) in enumerate(starts):
        stop = starts[n + 1][0] if n + 1 < len(starts) else _trimmed_end(block, 0, len(block))
        spans[key] = (row, _trimmed_end(block, row, stop))
    return spans


_COMMENT = re.compile(r"""(?<=['"\w])\s+#[^'"]*$""")
"""A comment after a one-line scalar value (kept when the value is rewritten)."""


def _prefix(row: str, key: str) -> str:
    return row[:row.index(f"{key}:")]


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _piece(block: list[str], item: dict, lines: LineMap, entry: int, offset: int, piece: Piece) -> list[str]:
    spans = _key_spans(block, item, lines, ("releases", entry), offset)
    first_key = min(spans, key=lambda k: spans[k][0])
    indent = " " * len(_prefix(block[spans[first_key][0]], first_key))
    rows = list(block)
    changes = []  # (start, stop, rows), applied bottom-up
    v_start, v_stop = spans["versions"]
    comment = _COMMENT.search(block[v_start]) if v_stop == v_start + 1 else None
    changes.append((v_start, v_stop, [_prefix(block[v_start], "versions") + f"versions: {_quoted(piece.versions)}"
                                      + (comment.group(0) if comment else "")]))
    for key, values, render in (("patches", piece.patches, lambda v: ", ".join(v)),
                                ("adds", piece.adds, lambda v: ", ".join(_quoted(x) for x in v))):
        if values is None:
            continue
        row = [f"{indent}{key}: [{render(values)}]"] if values else []
        if key in spans:
            start, stop = spans[key]
            changes.append((start, stop, [_prefix(block[start], key) + row[0].lstrip()] if row else []))
        elif row:
            before = min((spans[k][0] for k in ("adds", "knob", "probe") if k in spans and k != key), default=len(rows))
            changes.append((before, before, row))
    for start, stop, replacement in sorted(changes, key=lambda c: (c[0], c[1]), reverse=True):
        rows[start:stop] = replacement
    return rows


def _declaration(rows: list[str], data: dict, lines: LineMap, decl: Declaration) -> list[str]:
    index = next(i for i, p in enumerate(data["patches"]) if p["file"] == decl.source)
    start, end = _item_span(data, lines, "patches", index, len(rows))
    end = _trimmed_end(rows, start, end)
    block = rows[start:end]
    spans = _key_spans(block, data["patches"][index], lines, ("patches", index), start)
    first_key = min(spans, key=lambda k: spans[k][0])
    indent = " " * len(_prefix(block[spans[first_key][0]], first_key))
    replace = {"file": [f"file: {decl.file}"], "last_update": [f"last_update: {decl.last_update.isoformat()}"],
               "description": ["description: >-"] + textwrap.wrap(one_line(decl.description), width=100 - len(indent) - 2,
                                                                  break_long_words=False, break_on_hyphens=False)}
    if list(decl.targets) != list(data["patches"][index]["targets"]):
        replace["targets"] = ["targets:"] + [f"  - {t}" for t in decl.targets]
    out = list(block)
    for key in sorted(replace, key=lambda k: spans[k][0], reverse=True):
        s, e = spans[key]
        head, *rest = replace[key]
        pad = indent + ("  " if key == "description" else "")
        out[s:e] = [_prefix(block[s], key) + head] + [pad + line for line in rest]
    return out


def _intended(data: dict, entry: int, pieces: list[Piece], declarations: list[Declaration]) -> dict:
    want = copy.deepcopy(data)
    old = data["releases"][entry]
    cut = []
    for piece in pieces:
        item = copy.deepcopy(old)
        item["versions"] = piece.versions
        for key, values in (("patches", piece.patches), ("adds", piece.adds)):
            if values is not None:
                if values:
                    item[key] = list(values)
                else:
                    item.pop(key, None)
        cut.append(item)
    want["releases"][entry:entry + 1] = cut
    for decl in declarations:
        item = copy.deepcopy(next(p for p in data["patches"] if p["file"] == decl.source))
        item.update(file=decl.file, description=one_line(decl.description), last_update=decl.last_update,
                    targets=list(decl.targets))
        want["patches"].append(item)
    return want


def one_line(text: str) -> str:
    """Text as a folded YAML scalar reads back: words separated by single spaces."""
    return " ".join(text.split())


def _check(text: str, display: str, intended: dict) -> None:
    got, _ = load_yaml_text(text, display)
    if got != intended:
        raise InternalError(f"the port's edit of {display} does not read back as the data it should; nothing was "
                            "written (a bug in optkit.versions.recipe_edit)")


# --------------------------------------------------------------------------- writing, checked


def write_checked(folder: Path, text: str, new_files: dict[str, str], check) -> list[Path]:
    """Write ``recipe.yaml`` and the new files in ``folder``, then run ``check()`` (problems, as a
    list); any problem, or an error, restores the folder exactly. Returns the paths written."""
    recipe = folder / "recipe.yaml"
    original = recipe.read_bytes()
    clashes = [n for n, body in new_files.items() if (folder / n).exists() and (folder / n).read_text(
        encoding="utf-8", errors="surrogateescape") != body]
    if clashes:
        raise OptkitError(f"{folder}: {', '.join(clashes)} already exist with other content; nothing was written")
    created = [folder / n for n in sorted(new_files) if not (folder / n).exists()]
    try:
        for name in sorted(new_files):
            _atomic(folder / name, new_files[name].encode("utf-8", "surrogateescape"))
        _atomic(recipe, text.encode("utf-8"))
        problems = check()
    except BaseException:
        _restore(recipe, original, created)
        raise
    if problems:
        _restore(recipe, original, created)
        raise ValidationFailed([Problem(p.location, f"{p.message} (after the port's edit, which was undone)", p.hint)
                                for p in problems])
    return [recipe, *created]


def _atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.optkit-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _restore(recipe: Path, original: bytes, created: list[Path]) -> None:
    _atomic(recipe, original)
    for path in created:
        path.unlink(missing_ok=True)


