"""A length mix: the input/output lengths of a workload with their shares, e.g. ``1024:256:7,8192:512:3``.

The grammar, one class per term, terms separated by commas::

    mix    := class ("," class)*
    class  := input ":" output [":" weight]
    input  := integer from 1 to MAX_TOKENS        (prompt tokens)
    output := integer from 1 to MAX_TOKENS        (generated tokens)
    weight := decimal above 0, e.g. 7, 0.3 or 30  (relative; default 1)

Weights are relative shares of the requests: ``1024:256:0.7,8192:512:0.3`` and ``8192:512:3,1024:256:7``
are one mix. The canonical text (``LengthMix.text``) lists the classes by input then output length, with
the smallest integer weights in the same ratio (``1024:256:7,8192:512:3``; a mix of one class is
``1024:256:1``), so two spellings of one mix plan and lock alike. A class given twice is refused.

Nothing here imports more than the standard library: the plan path parses a mix.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil, gcd, lcm

from optkit.errors import RequestError
from optkit.value import valueclass

MAX_CLASSES = 16
"""Most length classes a mix holds."""
_INT = re.compile(r"^[0-9]{1,9}$")
_WEIGHT = re.compile(r"^[0-9]{1,9}(?:\.[0-9]{1,6})?$")
_EXAMPLE = "e.g. '1024:256:0.7,8192:512:0.3'"


class LengthMixError(RequestError):
    """A length mix that does not parse: names the term, the flag or file, and the fix."""


@valueclass(frozen=True)
class LengthClass:
    """Requests of ``input_len`` prompt tokens and ``output_len`` generated tokens, ``weight`` of the mix (a share)."""

    input_len: int
    output_len: int
    weight: Fraction

    @property
    def total_len(self) -> int:
        """Prompt plus generated tokens: what ``--max-model-len`` must hold for this class."""
        return self.input_len + self.output_len


@valueclass(frozen=True)
class LengthMix:
    """The classes of a mix, by input then output length, their weights summing to 1."""

    classes: tuple[LengthClass, ...]

    def text(self) -> str:
        """The canonical text: parse(text()) == self, and equal mixes print the same."""
        return ",".join(f"{c.input_len}:{c.output_len}:{n}" for c, n in zip(self.classes, self.integer_weights()))

    def integer_weights(self) -> list[int]:
        """The classes' weights as the smallest integers in the same ratio (the canonical text's)."""
        scale = lcm(*(c.weight.denominator for c in self.classes))
        integers = [int(c.weight * scale) for c in self.classes]
        common = gcd(*integers)
        return [n // common for n in integers]

    def __str__(self) -> str:
        return self.text()

    @property
    def input_len_max(self) -> int:
        return max(c.input_len for c in self.classes)

    @property
    def output_len_max(self) -> int:
        return max(c.output_len for c in self.classes)

    @property
    def total_len_max(self) -> int:
        """The longest request, prompt plus output (not the longest prompt plus the longest output)."""
        return max(c.total_len for c in self.classes)

    @property
    def input_len_mean(self) -> int:
        """The weighted mean prompt, rounded up to a whole token."""
        return ceil(sum(c.weight * c.input_len for c in self.classes))

    @property
    def output_len_mean(self) -> int:
        """The weighted mean output, rounded up to a whole token."""
        return ceil(sum(c.weight * c.output_len for c in self.classes))


def single(input_len: int, output_len: int) -> LengthMix:
    """The mix of one class: every request ``input_len`` in, ``output_len`` out."""
    return LengthMix((LengthClass(input_len, output_len, Fraction(1)),))


def parse_length_mix(text: object, where: str = "--length-mix", max_tokens: int = 1 << 20) -> LengthMix:
    """Parse a mix; ``where`` names the flag or ``file:line: field`` an error points at."""
    if not isinstance(text, str):
        shown = str(text).lower() if isinstance(text, bool) else repr(text)
        raise LengthMixError(f"{where}: a length mix is a text such as '1024:256:0.7,8192:512:0.3', not {shown}")
    if not text.strip():
        raise LengthMixError(f"{where}: empty length mix; write classes INPUT:OUTPUT[:WEIGHT], {_EXAMPLE}")
    terms = [t.strip() for t in text.split(",")]
    if len(terms) > MAX_CLASSES:
        raise LengthMixError(f"{where}: {len(terms)} classes; a length mix holds at most {MAX_CLASSES}")
    found: dict[tuple[int, int], Fraction] = {}
    for n, term in enumerate(terms, 1):
        input_len, output_len, weight = _parse_class(term, n, where, max_tokens)
        if (input_len, output_len) in found:
            raise LengthMixError(f"{where}: class {n} {term!r}: {input_len}:{output_len} is given twice; "
                                 "keep one and give it the sum of the weights")
        found[(input_len, output_len)] = weight
    total = sum(found.values())
    return LengthMix(tuple(LengthClass(i, o, w / total) for (i, o), w in sorted(found.items())))


def _parse_class(term: str, n: int, where: str, max_tokens: int) -> tuple[int, int, Fraction]:
    if not term:
        raise LengthMixError(f"{where}: class {n} is empty (a stray comma?)")
    parts = [p.strip() for p in term.split(":")]
    if len(parts) not in (2, 3):
        raise LengthMixError(f"{where}: class {n} {term!r} is not INPUT:OUTPUT[:WEIGHT]; {_EXAMPLE}")
    lengths = []
    for name, part in zip(("input", "output"), parts):
        if not _INT.match(part) or not 1 <= int(part) <= max_tokens:
            raise LengthMixError(f"{where}: class {n} {term!r}: the {name} length {part!r} is not an integer "
                                 f"from 1 to {max_tokens}")
        lengths.append(int(part))
    weight = Fraction(1)
    if len(parts) == 3:
        if not _WEIGHT.match(parts[2]) or Fraction(parts[2]) <= 0:
            raise LengthMixError(f"{where}: class {n} {term!r}: the weight {parts[2]!r} is not a number above 0 "
                                 "with at most 6 decimals (weights are relative: 0.7 and 70 are alike)")
        weight = Fraction(parts[2])
    return lengths[0], lengths[1], weight
