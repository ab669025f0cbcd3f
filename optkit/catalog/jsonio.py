"""Read JSON with the limits and the located errors of the YAML reader.

Python's ``json`` recurses in C (``RecursionError`` near 1,000 nested brackets), raises
``ValueError`` on a 5,000-digit integer, keeps the last of two equal keys and accepts ``NaN``.
``load_json`` refuses each of these as a located problem: nesting deeper than ``MAX_DEPTH``,
integers longer than ``MAX_INT_DIGITS``, duplicate keys (naming both lines), ``NaN``/``Infinity``
and escaped lone surrogates (``"\\ud800"``, which no UTF-8 file can hold). Lines are found only
when a problem needs one: JSON as optkit and Hugging Face write it is YAML flow syntax, so the
YAML reader's line map serves (a file it cannot read gets problems without a line).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from optkit.catalog.textfile import MAX_DEPTH, MAX_INT_DIGITS, read_text
from optkit.catalog.yamlio import LineMap, walk_text
from optkit.errors import Location, Problem, ValidationFailed

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused(Exception):
    """Raised from json's hooks: what was refused, and the text to find it by."""

    def __init__(self, message: str, needle: str = ""):
        self.message, self.needle = message, needle


class JsonLines(LineMap):
    """The lines of a JSON document, worked out on first use (most documents never need one)."""

    def __init__(self, file: str, text: str):
        super().__init__(file)
        self._text: str | None = text

    def line_of(self, path: tuple) -> int | None:
        if self._text is not None:
            walk = walk_text(self._text, self.file)
            self.lines, self._text = (walk.lines if walk else {}), None
        return super().line_of(path)


def load_json(path: Path, display: str | None = None) -> tuple[Any, LineMap]:
    """Read and parse a JSON file; ``display`` is the name errors use (default: the path)."""
    name = display or str(path)
    return load_json_text(read_text(path, name), name)


def load_json_text(text: str, file: str) -> tuple[Any, LineMap]:
    """Parse a JSON document; any problem becomes a ``ValidationFailed`` at its line."""
    lines = JsonLines(file, text)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_bounded_int, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise _failed(file, exc.lineno, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except _Refused as exc:
        walk = walk_text(text, file) if exc.needle == "duplicate" else None
        if walk is not None and walk.duplicates:  # with both lines
            raise ValidationFailed(walk.duplicates) from None
        raise _failed(file, _line_of_text(text, exc.needle), exc.message) from None
    except RecursionError:
        data = None  # deeper than json can go: reported by the depth check below
    deep = _too_deep(text)
    if deep is not None:
        raise _failed(file, text.count("\n", 0, deep) + 1, f"nested more than {MAX_DEPTH} levels deep")
    where = _surrogate_path(data)
    if where is not None:
        raise ValidationFailed([Problem(lines.location(where), "holds an escaped lone surrogate (\\ud800-\\udfff), "
                                        "which is not a character", "write the character itself")])
    return data, lines


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Refused(f"key {key!r} appears twice in one object", "duplicate")
    return data


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-'))} digits; no number optkit reads has more than "
                       f"{MAX_INT_DIGITS}", text)
    return int(text)


def _no_constant(name: str):
    raise _Refused(f"{name} is not a JSON number", name)


def _line_of_text(text: str, needle: str) -> int | None:
    at = text.find(needle) if needle and needle != "duplicate" else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def _too_deep(text: str) -> int | None:
    """Offset of the first bracket nested deeper than MAX_DEPTH (strings blanked out), or None."""
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub(lambda m: " " * len(m.group()), text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            return match.start()
    return None


def _surrogate_path(data: Any) -> tuple | None:
    """The path of the first key or string holding a lone surrogate, or None (iterative: no recursion)."""
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str) and _SURROGATE.search(value):
            return path
        if isinstance(value, dict):
            for key, item in value.items():
                if _SURROGATE.search(key):
                    return path + (key,)
                stack.append((path + (key,), item))
        elif isinstance(value, list):
            stack.extend((path + (i,), item) for i, item in enumerate(value))
    return None


def _failed(file: str, line: int | None, message: str) -> ValidationFailed:
    return ValidationFailed([Problem(Location(file, line), message)])
