"""Plain-text tables and word-wrapped lines, in the look of rich's default tables (without rich).

Text is text: nothing in a cell is read as markup or styles. Layout follows rich's, so the output
reads as it always did: a table is as wide as its widest cells need, at most ``WIDTH``; when it
does not fit, the widest columns give up width first; cells wrap at word boundaries and fold
words longer than their column; the header sits between a heavy top rule and a heavy
separator; the title is centred over the table. Widths are terminal cells (East Asian wide
characters take two). Where the output stream cannot encode the box-drawing characters, the
``ASCII`` box and ``to_ascii`` are used instead.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from optkit.value import field, valueclass

WIDTH = 140
_WORD = re.compile(r"\s*\S+\s*")


@valueclass(frozen=True)
class Box:
    """Border characters: top rule, header row, header separator, body rows, bottom rule."""

    top: str  # left, line, column divider, right
    head: str  # left, divider, right
    separator: str  # left, line, column divider, right
    row: str  # left, divider, right
    bottom: str  # left, line, column divider, right


HEAVY_HEAD = Box(top="┏━┳┓", head="┃┃┃", separator="┡━╇┩", row="│││", bottom="└─┴┘")  # rich's default
ASCII = Box(top="+-++", head="|||", separator="+=++", row="|||", bottom="+-++")

# What the text is written with where the stream's encoding has no such character.
_ASCII_FOR = {"−": "-", "–": "-", "—": "-", "≈": "~", "≥": ">=", "≤": "<=", "×": "x", "…": "...", "µ": "u",
              "→": "->", "←": "<-", "⟂": "_|_", "“": '"', "”": '"', "‘": "'", "’": "'"}


@valueclass
class Table:
    """A titled table of text cells."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def add_row(self, *cells: str) -> None:
        self.rows.append(list(cells))


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes: 2 for East Asian wide characters, 0 for combining marks."""
    if text.isascii():
        return len(text)
    return sum(map(_char_cells, text))


@lru_cache(maxsize=None)
def _char_cells(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def _chop(text: str, width: int) -> list[str]:
    """``text`` cut into pieces of at most ``width`` cells."""
    pieces, piece, cells = [], "", 0
    for char in text:
        size = _char_cells(char)
        if piece and cells + size > width:
            pieces.append(piece)
            piece, cells = "", 0
        piece += char
        cells += size
    return pieces + [piece] if piece else pieces


def _breaks(line: str, width: int) -> list[int]:
    """Offsets to break ``line`` at: greedy, whole words where they fit, long words folded."""
    breaks, offset = [], 0
    for match in _WORD.finditer(line):
        start, word = match.start(), match.group()
        length = cell_len(word.rstrip())
        if width - offset >= length:
            offset += cell_len(word)
        elif length > width:
            pieces = _chop(word, width)
            for index, piece in enumerate(pieces):
                if start:
                    breaks.append(start)
                if index == len(pieces) - 1:
                    offset = cell_len(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = cell_len(word)
    return breaks


def wrap(text: str, width: int) -> list[str]:
    """``text`` as lines of at most ``width`` cells; whitespace that ends a line is kept where it fits."""
    lines = []
    for line in text.expandtabs(8).split("\n"):
        bounds = [0, *_breaks(line, width), len(line)]
        for begin, end in zip(bounds, bounds[1:]):
            piece = line[begin:end]
            if len(piece) > width:  # trailing whitespace beyond the width goes
                piece = piece[:max(width, len(piece.rstrip()))]
            lines.append(_crop(piece, width))
    return lines


def _crop(text: str, width: int) -> str:
    while cell_len(text) > width:
        text = text[:-1]
    return text


def _pad(text: str, width: int) -> str:
    return text + " " * (width - cell_len(text))


def render_table(table: Table, box: Box = HEAVY_HEAD, width: int = WIDTH) -> list[str]:
    """The table's lines: centred title, heavy header, one or more lines per row."""
    widths = _column_widths(table, width - len(table.headers) - 1)
    total = sum(widths) + len(widths) + 1
    lines = [_centre(line, total) for line in wrap(table.title, total)] if table.title else []
    lines.append(_rule(box.top, widths))
    lines += _row(table.headers, widths, box.head, header=True)
    lines.append(_rule(box.separator, widths))
    for row in table.rows:
        lines += _row(row, widths, box.row)
    lines.append(_rule(box.bottom, widths))
    return lines


def _centre(line: str, width: int) -> str:
    line = _crop(line.rstrip(), width)
    left = (width - cell_len(line)) // 2
    return _pad(" " * left + line, width)


def _rule(chars: str, widths: list[int]) -> str:
    left, line, divider, right = chars
    return left + divider.join(line * w for w in widths) + right


def _row(cells: list[str], widths: list[int], chars: str, header: bool = False) -> list[str]:
    left, divider, right = chars
    wrapped = [[_pad(part, w - 2) for part in wrap(cell, w - 2)] for cell, w in zip(cells, widths)]
    height = max(len(parts) for parts in wrapped)
    for parts, w in zip(wrapped, widths):
        blank = [" " * (w - 2)] * (height - len(parts))
        if header:  # the header sits at the bottom of its row, cells at the top
            parts[:0] = blank
        else:
            parts += blank
    return [left + divider.join(f" {parts[i]} " for parts in wrapped) + right for i in range(height)]


def _column_widths(table: Table, available: int) -> list[int]:
    """Each column's width with its padding: as wide as its widest line, shrunk as rich shrinks them."""
    columns = list(zip(table.headers, *table.rows))
    widths = [min(max((cell_len(line) for cell in column for line in cell.splitlines()), default=0) + 2, available)
              for column in columns]
    excess = sum(widths) - available
    while excess > 0:  # the widest columns give up width, down to the next widest
        widest = max(widths)
        second = max((w for w in widths if w != widest), default=0)
        if widest == second:
            break
        ratios = [1 if w == widest else 0 for w in widths]
        widths = _reduce(excess, ratios, [min(excess, widest - second)] * len(widths), widths)
        excess = sum(widths) - available
    if excess > 0:  # last resort: shrink every column evenly
        widths = _reduce(excess, [1] * len(widths), widths, widths)
    return widths


def _reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """Take ``total`` from ``values`` in proportion to ``ratios``, at most ``maximums`` each (rich's ratio_reduce)."""
    ratios = [ratio if maximum else 0 for ratio, maximum in zip(ratios, maximums)]
    remaining_ratio, remaining, out = sum(ratios), total, []
    for ratio, maximum, value in zip(ratios, maximums, values):
        if ratio and remaining_ratio > 0:
            taken = min(maximum, round(ratio * remaining / remaining_ratio))
            out.append(value - taken)
            remaining -= taken
            remaining_ratio -= ratio
        else:
            out.append(value)
    return out


def to_ascii(text: str) -> str:
    """``text`` with the typographic characters this output uses written in ASCII."""
    return text if text.isascii() else "".join(_ASCII_FOR.get(char, char) for char in text)
