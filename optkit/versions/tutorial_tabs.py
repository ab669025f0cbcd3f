"""The Ascend hardware family a tutorial's tab, heading or label names: A2, A3, A5, 310P, or none.

vllm-ascend's tutorials split their commands by hardware under tabs (``=== "A3 series"``,
``::::{tab-item} Atlas 800I A2``), headings (``### Atlas 800 A3 (four-node)``) and bold labels
(``**Atlas 800I A2/A3:**``). ``families(text)`` reads which families a text names, by the product
names Huawei gives them:

- A2: Atlas 800 A2 / 800I A2 / "Atlas A2 inference products", Ascend 910B (910B1…910B4);
- A3: Atlas 800 A3 / 800I A3 / A3 SuperPoD / "Atlas A3 inference products", Ascend 910C;
- A5: Ascend 950 (950DT, 950PR; "Ascend950DT series", "950DT Products");
- 310P: Atlas 300I DUO / Atlas 300I / "Atlas inference products" / "Atlas 300 inference products", Ascend 310P.

``family(text)`` is the one family a text names, or None when it names none or several
("A2 / A3 series" is both: a command under it is not one family's). Unknown products (Atlas 200I Pro)
name no family: left None rather than guessed.
"""

from __future__ import annotations

import re

FAMILIES = ("A2", "A3", "A5", "310P")
"""The families, in the order ``families`` lists them."""

_PATTERNS = {
    "A2": re.compile(r"(?<![\w.])A2(?![\w])|910B\d?\b", re.IGNORECASE),
    "A3": re.compile(r"(?<![\w.])A3(?![\w])|910C\b", re.IGNORECASE),
    "A5": re.compile(r"(?<!\d)950(DT|PR)?\b|(?<![\w.])A5(?![\w])", re.IGNORECASE),
    "310P": re.compile(r"300I\b|300I[ -]?DUO|\bAtlas (300 )?inference products|310P", re.IGNORECASE),
}
"""What names each family: A2/A3 as words (not ``w8a8``'s ``a8``, not a version ``1.A2``), 950 with or
without its DT/PR suffix, and the 300-series inference cards. ``Atlas inference products`` (no A2/A3
in it) is how the pages name the 300I cards; ``Atlas A2 inference products`` is caught by A2 first."""


def families(text: str) -> list[str]:
    """Every family ``text`` names, in ``FAMILIES`` order."""
    return [name for name in FAMILIES if _PATTERNS[name].search(text)]


def family(text: str) -> str | None:
    """The one family ``text`` names, or None (none, or several)."""
    found = families(text)
    return found[0] if len(found) == 1 else None


__all__ = ["FAMILIES", "families", "family"]
