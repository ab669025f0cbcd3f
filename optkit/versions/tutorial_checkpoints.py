"""The checkpoints a tutorial page lists, and the hardware each requires.

A page's "Model Weight" section lists its checkpoints in a table (a download link, a hardware requirement) or as
bullets (``- `Name`(desc): require … [Download](url)``). Each becomes ``{line, name, id, quantization,
hardware_text, requirements}``: its Hub id read off the link, its weight format off its name (``QUANTIZATIONS``),
and each alternative of its hardware requirement as ``{hardware, nodes, devices_per_node, hbm_gib}``
(``requirements``, which ``tutorial_hardware`` reads the pages' hardware statements with too).
"""

from __future__ import annotations

import re

from optkit.versions.tutorial_commands import SEPARATOR, TextLine
from optkit.versions.tutorial_tabs import families

NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
"""Counts the pages write in words ("two nodes")."""


def in_weights(headings) -> bool:
    """Under the page's weights section, as the releases title it (``Model Weight(s)``, ``Model Weights and
    Hardware``, ``Prepare Model Weights``, ``Weight Preparation``), not a FAQ or step that mentions weights."""
    return any(re.fullmatch(r"(model |prepare (model )?)?weights?( and hardware| preparation)?", heading.strip(),
                            re.IGNORECASE) for heading in headings)


_HUB_ID = re.compile(r"(?:modelscope\.cn/models|huggingface\.co|hf-mirror\.com|modelers\.cn/models)/"
                     r"([\w.-]+/[\w.-]+)")
REQUIREMENT = re.compile(r"(?:\b(\d+|one|two|three|four|eight)(?:\s*[x×]\s*|\s+))?([A-Za-z0-9][^().]*?)\s*"
                          r"\(\s*(\d+)\s*GB?\s*[×xX*]\s*(\d+)(?:\s*NPUs?)?(?:\s*each)?\s*\)", re.IGNORECASE)
_QUANTIZATIONS = ((r"mxfp4", "w4a4-mxfp4"), (r"mxfp8", "w8a8-mxfp8"), (r"w8a8sc", "w8a8sc"), (r"w8a8c8", "w8a8c8"),
                  (r"w4a8c8", "w4a8c8"), (r"w4a8", "w4a8"), (r"w4a4", "w4a4"), (r"w8a8", "w8a8"), (r"bf16", "bf16"))
"""A checkpoint's weight format by the words of its name and description, most specific first; the values
are optkit's quantization names (optkit.resolve.profiles.QUANTIZATIONS, which a test holds these to)."""


def table_checkpoints(tables: list[dict]) -> list[dict]:
    """The checkpoints the page's weights tables list, a row each."""
    found = []
    for table in tables:
        columns = [column.lower() for column in table["columns"]]
        hardware = next((i for i, c in enumerate(columns) if "hardware" in c), None)
        for row in table["rows"]:
            cells = row["cells"]
            text = " ".join(cells)
            name = re.sub(r"\(.*", "", cells[0]).replace("`", "").replace("*", "").strip() if cells else ""
            if not name:
                continue
            requirement = cells[hardware].replace("*", "").strip() if hardware is not None and hardware < len(cells) else ""
            found.append(_checkpoint(row["line"], name, text, requirement, table["label"]))
    return found


def _checkpoint(line: int, name: str, text: str, requirement: str, label: str = "") -> dict:
    """One checkpoint; its quantization is read off its own row, else off the label above its table
    (``**BF16 Versions:**``)."""
    hub = _HUB_ID.search(text)
    quantization = next((q for words in (text, label) for pattern, q in _QUANTIZATIONS
                         if re.search(pattern, words.lower())), None)
    return {"line": line, "name": name, "id": hub.group(1).rstrip(".") if hub else None, "quantization": quantization,
            "hardware_text": requirement or None, "requirements": requirements(requirement)}


def requirements(text: str) -> list[dict]:
    """Each alternative of a hardware requirement (``1 Atlas 800 A3 (64GB × 16) node or 2 Atlas 800 A2 (64GB × 8)
    nodes, or Atlas 300I DUO``): its family, node count, devices per node and HBM per device, each null
    where the alternative does not say it."""
    found = []
    for part in re.split(r"(?:,|<br>)\s*(?:or\s+)?|\s+or\s+", text):
        matches = list(REQUIREMENT.finditer(part))
        found += [_sized(match) for match in matches]
        if not matches and _one_family(part):
            count = re.match(r"\s*(\d+|one|two|three|four|eight)\s+(?!cards?\b|NPUs?\b)", part, re.IGNORECASE)
            found.append({"hardware": _one_family(part), "nodes": _count(count.group(1)) if count else None,
                          "devices_per_node": None, "hbm_gib": None})
    return found


def _sized(match: re.Match) -> dict:
    """One alternative with its sizes: ``2 Atlas 800 A2 (64GB × 8) nodes``; a count of cards (``1 card on
    Atlas 800I A2 (…)``) is no node count, unless the cards are ``in 1 Atlas 800 A3 (…) node``."""
    name = match.group(2)
    inside = re.match(r"(cards?|NPUs?)\s+in\s+(\d+|one|two)\s+(.*)$", name, re.IGNORECASE)
    per_card = re.match(r"(cards?|NPUs?)\b", name, re.IGNORECASE)
    nodes = _count(inside.group(2)) if inside else None if per_card or not match.group(1) else _count(match.group(1))
    return {"hardware": _one_family(name), "nodes": nodes, "devices_per_node": int(match.group(4)),
            "hbm_gib": int(match.group(3))}


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS[word.lower()]


def _one_family(text: str) -> str | None:
    found = families(text)
    return found[0] if len(found) == 1 else None


def bullet_checkpoints(lines: list[TextLine]) -> list[dict]:
    """The checkpoints a weights section lists as bullets: ``- `Name`(desc): require … [Download](url)``."""
    found = []
    for line in lines:
        match = re.match(r"\s*[-*]\s+`([^`]+)`(.*)$", line.text)
        if not match or not in_weights(line.headings) or not _HUB_ID.search(line.text):
            continue
        require = re.search(r"requires?\s+(.*?)(\.\s*\[|\[|$)", match.group(2))
        found.append(_checkpoint(line.number, match.group(1).strip(), line.text,
                                 require.group(1).strip().rstrip(".") if require else ""))
    return found


__all__ = ["NUMBER_WORDS", "REQUIREMENT", "bullet_checkpoints", "in_weights", "requirements", "table_checkpoints"]


_WEIGHT_WORD = re.compile(r"\bweights?\b", re.IGNORECASE)


def stated_weights(command: dict, lines: list) -> dict | None:
    """The weight format the page's prose states for a command whose model path it leaves to the reader (``$MODEL``,
    ``<MODEL_PATH>``): the nearest line above it, in its section or an enclosing one and its tab or none, that speaks
    of weights and names one format (GLM5.2.md in 0.23.0, :1263: "Recommended configurations for serving `GLM-5.2`
    with a 1M context window on Atlas 800 A3 (64GB x 16) and quantized GLM-5.2(W4A8C8) weights", above its 1M
    commands): ``{"quantization", "line"}``, or None where no such line is, or it names several formats."""
    model = str(command.get("model") or "").strip("'\"")
    if not model.startswith(("$", "<")):
        return None
    headings, tabs = tuple(command["heading"].split(SEPARATOR)) if command.get("heading") else (), tuple(command["tabs"])
    for line in sorted(lines, key=lambda line: -line.number):
        if line.number >= command["line"] or tuple(line.headings) != headings[:len(line.headings)] \
                or tuple(line.tabs) != tabs[:len(line.tabs)] or not _WEIGHT_WORD.search(line.text):
            continue
        named = {q for pattern, q in _QUANTIZATIONS if re.search(pattern, line.text.lower())}
        named -= {q for q in named for other in named if other != q and other.startswith(q)}  # w4a8c8 names w4a8 too
        if len(named) == 1:
            return {"quantization": named.pop(), "line": line.number}
        if named:
            return None
    return None

