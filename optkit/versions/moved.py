"""Where the code a patch changes went, when its file is not in a release.

A hunk is located by what it touches: the definitions enclosing its changed lines in the base file
(read with ``ast``), and the identifiers of its old side (context and removed lines). For files
that are not Python, the function name git put in the hunk header (``@@ … @@ void name(``) is
looked up as a word in the new tree's files of the same suffix. Every function and method of the new
tree's Python files under the same top folder is a candidate:

- a definition with the same qualified name (``Class.method``) is the destination;
- otherwise the candidate whose identifiers cover most of the hunk's, each identifier weighted by
  how rare it is in the new tree (idf), discounted for large definitions (a big function covers
  many names by chance); a hunk is placed only when the weighted coverage reaches ``MIN_COVER``.

Hunks at module level (imports, constants) follow the functions and are not placed on their own.
The file a patch's section moved to is the one its placed hunks point to most (by score). This is
a heuristic, said so wherever it is shown: it names a place to look, and the three-way merge
against that file (``optkit.versions.port``) is what decides whether the old change still fits.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from optkit.catalog.patchfile import Hunk

MIN_COVER = 0.3
"""Weighted share of a hunk's identifiers a candidate must contain for the hunk to be placed."""
SIZE_DISCOUNT = 0.1
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IGNORED = frozenset(keyword.kwlist) | {"self", "cls"}
_HEADER_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_:]*)\s*\(")


@dataclass(frozen=True)
class Definition:
    """One function, method or class of a file."""

    path: str
    qualname: str
    start: int
    end: int
    is_class: bool
    names: frozenset[str]


@dataclass(frozen=True)
class Placement:
    """Where one hunk's code is in the new tree."""

    hunk: int
    """The hunk's old start line (``@@ -N``)."""
    touches: str
    """The base definition the hunk changes (qualified name), or ``<module>``."""
    path: str = ""
    qualname: str = ""
    line: int = 0
    cover: float = 0.0
    by_name: bool = False

    @property
    def placed(self) -> bool:
        return bool(self.path)

    def words(self) -> str:
        if not self.placed:
            return f"hunk @@ -{self.hunk} ({self.touches}): not found"
        how = "same name" if self.by_name else f"holds {self.cover:.0%} of the hunk's identifiers"
        where = f"{self.path}:{self.line} {self.qualname}" if self.line else f"{self.path} {self.qualname}"
        return f"hunk @@ -{self.hunk} ({self.touches}) → {where} ({how})"


@dataclass(frozen=True)
class Move:
    """Where a missing file's hunks went: the best file, and each hunk's placement."""

    destination: str
    placements: tuple[Placement, ...]

    def words(self) -> str:
        return "; ".join(p.words() for p in self.placements if p.touches != "<module>")


def _names(line: str) -> set[str]:
    return {n for n in _IDENT.findall(line.split("#", 1)[0]) if n not in _IGNORED}


def parse(text: str) -> ast.Module:
    """``ast.parse`` without the warnings upstream's code raises (invalid escapes are not ours to report)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def definitions(text: str, path: str) -> list[Definition]:
    """Every def and class of a Python file, with the identifiers of its lines."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError):
        return []
    per_line = [frozenset(_names(line)) for line in text.splitlines()]
    out: list[Definition] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = prefix + child.name
                names = frozenset().union(*per_line[child.lineno - 1:child.end_lineno])
                out.append(Definition(path, qualname, child.lineno, child.end_lineno or child.lineno,
                                      isinstance(child, ast.ClassDef), names))
                walk(child, qualname + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


@dataclass(frozen=True)
class _Index:
    functions: tuple[Definition, ...]
    idf: dict[str, float]


@lru_cache(maxsize=8)
def _index(root: Path, top: str) -> _Index:
    defs: list[Definition] = []
    for path in sorted((root / top).rglob("*.py")):
        if path.is_file():
            defs += definitions(path.read_text(encoding="utf-8", errors="replace"), path.relative_to(root).as_posix())
    counts: Counter[str] = Counter()
    for d in defs:
        counts.update(d.names)
    idf = {name: math.log((len(defs) + 1) / (n + 1)) for name, n in counts.items()}
    return _Index(tuple(d for d in defs if not d.is_class), idf)


def innermost(defs: list[Definition], line: int) -> Definition | None:
    """The smallest def or class around ``line``, or None at module level."""
    return min((d for d in defs if d.start <= line <= d.end), key=lambda d: (d.end - d.start, d.start), default=None)


def _enclosing(defs: list[Definition], lines: list[int]) -> str:
    """The innermost function (else class) around the changed base lines, or ``<module>``."""
    around = [d for d in defs if any(d.start <= n <= d.end for n in lines)]
    if not around:
        return "<module>"
    return min(around, key=lambda d: (d.is_class, d.end - d.start)).qualname


def find_move(rel: str, base_text: str, hunks: list[Hunk], root: Path) -> Move:
    """Where the hunks of ``rel`` went in the tree at ``root``, which lacks ``rel``."""
    top = rel.split("/", 1)[0] if "/" in rel else "."
    if not rel.endswith(".py"):
        return _find_by_header(rel, hunks, root, top)
    index = _index(root.resolve(), top)
    base_defs = definitions(base_text, rel)
    placements = [_place(h.old_start, _enclosing(base_defs, h.changed_old_lines), h.old_side, index) for h in hunks]
    weights: Counter[str] = Counter()
    for p in placements:
        if p.placed and p.touches != "<module>":
            weights[p.path] += 1.0 if p.by_name else p.cover
    return Move(_heaviest(weights), tuple(placements))


def _heaviest(weights: Counter) -> str:
    return min(weights, key=lambda path: (-weights[path], path)) if weights else ""


def _find_by_header(rel: str, hunks: list[Hunk], root: Path, top: str) -> Move:
    """Files that are not Python: the names in the hunk headers (``@@ … @@ void name(``), looked up
    as words in the tree's files of the same suffix."""
    suffix = Path(rel).suffix
    files = [p for p in sorted((root / top).rglob(f"*{suffix}")) if p.is_file()] if suffix else []
    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace") for p in files}
    placements, weights = [], Counter()
    for hunk in hunks:
        names = _HEADER_CALL.findall(hunk.header.split("@@", 2)[-1])
        name = names[-1] if names else ""
        hits = sorted(path for path, text in texts.items() if name and re.search(rf"\b{re.escape(name)}\s*\(", text))
        placements.append(Placement(hunk.old_start, name or "<module>", hits[0] if hits else "", name, 0, 0.0, bool(hits)))
        for path in hits:
            weights[path] += 1.0 / len(hits)
    return Move(_heaviest(weights), tuple(placements))


def _place(start: int, touches: str, old_side: list[str], index: _Index) -> Placement:
    if touches == "<module>":
        return Placement(start, touches)
    same = [d for d in index.functions if d.qualname == touches]
    wanted = set().union(*(_names(line) for line in old_side)) if old_side else set()
    total = sum(index.idf.get(n, 0.0) for n in wanted)
    if same:
        best = min(same, key=lambda d: (-_cover(wanted, d, index, total), d.path, d.start))
        return Placement(start, touches, best.path, best.qualname, best.start, _cover(wanted, best, index, total), True)
    if not total:
        return Placement(start, touches)
    best = min(index.functions, key=lambda d: (-_score(wanted, d, index, total), d.path, d.start), default=None)
    cover = _cover(wanted, best, index, total) if best else 0.0
    if best is None or cover < MIN_COVER:
        return Placement(start, touches)
    return Placement(start, touches, best.path, best.qualname, best.start, cover)


def _cover(wanted: set[str], d: Definition, index: _Index, total: float) -> float:
    return sum(index.idf.get(n, 0.0) for n in wanted & d.names) / total if total else 0.0


def _score(wanted: set[str], d: Definition, index: _Index, total: float) -> float:
    cover = _cover(wanted, d, index, total)
    size = sum(index.idf.get(n, 0.0) for n in d.names)
    return cover * cover * total / (total + SIZE_DISCOUNT * size)
