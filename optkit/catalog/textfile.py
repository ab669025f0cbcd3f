"""The text files optkit is given, read one way: bounded, UTF-8, every failure located.

Every file a user or a bundle hands to optkit (request, recipe, model, target and kernel YAML, a
checkpoint's config.json, a bundle's lock and series, a tree's ``.optkit/`` records) is read by
``read_text``: at most ``MAX_BYTES`` (a device or a runaway file is refused, not read forever),
decoded as UTF-8 (a UTF-8 byte-order mark is dropped), UTF-16/UTF-32 and binary data refused
with what to do. The parsers built on it (``yamlio``, ``jsonio``) keep the limits below, so that
no input makes them recurse past Python's stack, expand without end, or convert a number Python
refuses; each failure is a ``ValidationFailed`` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from optkit.errors import Location, Problem, ValidationFailed

MAX_BYTES = 8 << 20
"""Largest file optkit reads (8 MiB; the flagship bundle's lock is 36 KiB, a HF config.json a few KiB)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists (optkit's own files nest at most 6 deep)."""
MAX_INT_DIGITS = 100
"""Longest integer literal (no count, length or size optkit reads needs more than 20 digits)."""
MAX_VALUES = 100_000
"""Most values a YAML document may hold with its aliases expanded (a recipe holds a few hundred)."""

_WIDE = [(codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")]  # UTF-32 LE starts like UTF-16 LE


def read_text(path: Path, display: str | None = None) -> str:
    """The text of ``path`` (UTF-8); ``display`` is the name errors use (default: the path)."""
    name = display or str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise _failed(Location(name), f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise _failed(Location(name), f"larger than {MAX_BYTES >> 20} MiB; this is not a file optkit reads")
    return decode(data, name)


def decode(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text, or a located problem saying what the bytes are instead."""
    for bom, encoding in _WIDE:
        if data.startswith(bom):
            raise _failed(Location(name, 1), f"is {encoding} encoded; optkit reads UTF-8",
                          f"convert it: iconv -f {encoding} -t UTF-8 FILE > NEW")
    if b"\0" in data:
        at = data.index(b"\0")
        if data[1::2].count(0) > len(data) // 4 or data[0::2].count(0) > len(data) // 4:
            raise _failed(Location(name, _line(data, at)), "looks UTF-16 encoded (NUL bytes between the "
                          "characters); optkit reads UTF-8", "convert it: iconv -f UTF-16LE -t UTF-8 FILE > NEW")
        raise _failed(Location(name, _line(data, at)), "holds binary data (a NUL byte), not text")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = _line(data, exc.start)
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _failed(Location(name, line), f"not UTF-8: byte 0x{data[exc.start]:02x} at column {column} "
                      "cannot be decoded", "save the file as UTF-8") from None


def _line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _failed(location: Location, message: str, hint: str = "") -> ValidationFailed:
    return ValidationFailed([Problem(location, message, hint)])
