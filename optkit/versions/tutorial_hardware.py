"""What a tutorial page says about its hardware in prose and tables: the page's hardware statements.

Most commands stand under a tab or a heading that names their hardware family (``tutorial_tabs``). Some
pages write their commands under none, and say the hardware once, in prose or in a table:

- Hy3-preview.md: "The verified configuration uses one Atlas A3 node with 16 NPUs" (under "Hardware");
- Minitron-8B-Base.md: "`Minitron-8B-Base`(BF16 version): requires 1 Ascend 910B";
- Qwen3-VL-235B-A22B-Instruct.md: "- 1 Prefill node: 1 Atlas 800 A3 (64G x 16), DP2 + TP8 + EP." at the
  top of the section whose Prefill and Decode subsections hold the commands;
- DeepSeek-R1.md: "can be deployed on 1 Atlas 800 A3 (64GB × 16) or 2 Atlas 800 A2 (64GB × 8)".

``statements(lines)`` reads every such sentence (page lines outside code blocks; a table row's cells one by one)
into ``{line, heading, families, requirements}``, with ``tabs`` where the sentence stands under a tab (GLM5.md in
0.23.0 writes "`glm-5-w8a8`: require 2 Atlas 800 A3 (64GB × 16)" inside its A2 tab, :677, above the commands it
sizes): a sentence stating hardware (``tutorial_pages``'s words:
"hardware", "requires", "recommended for", "assume you have", or a sized product such as
``1 Atlas 800 A3 (64GB × 16)``), or any sentence in a section whose heading names "hardware"; a sentence
that negates ("Other Ascend hardware (e.g., Atlas A2 Products) is not supported") states nothing.
``requirements`` are its alternatives with their node counts (``tutorial_checkpoints.requirements``).

The reading is as written: which family a command runs on follows from these in
``optkit.resolve.page_hardware``, where the rule (the enclosing section's statement first, the devices a
node holds, the node count a statement gives) is stated and labelled on each command it places.
"""

from __future__ import annotations

import re

from optkit.versions.tutorial_checkpoints import requirements
from optkit.versions.tutorial_commands import SEPARATOR, TextLine
from optkit.versions.tutorial_tabs import families

_STATES = re.compile(r"\bhardware\b|\brequires?\b|\brecommended for\b|\bassume you have\b|\bdeployed on\b"
                     r"|\bsupport(s|ed)?\b|\buses? (one|two|four|eight|\d+) \w", re.IGNORECASE)
"""Words that make a sentence a statement of the hardware it names."""
_SIZED = re.compile(r"\(\s*\d+\s*GB?\s*[×xX*]\s*\d+", re.IGNORECASE)
"""A sized product, ``(64GB × 16)``: a statement of hardware wherever it stands."""
_NEGATION = re.compile(r"\bnot\b|\bunsupported\b|\bno longer\b|\bexcept\b|\bwithout\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+")
_RULE_ROW = re.compile(r"\|?[\s:|-]+\|?")
_COUNTED = re.compile(r"\b(\d+|one|two|three|four|eight)\s+(?=Atlas\b|Ascend\b|9[15]\d)", re.IGNORECASE)
"""A count before a product: where a sentence's first alternative starts (its words before are no product's)."""


def statements(lines: list[TextLine]) -> list[dict]:
    """The page's hardware statements, in page order (module docstring)."""
    found = []
    for line in lines:
        text = line.text.strip()
        if not text or _RULE_ROW.fullmatch(text):
            continue
        under_hardware = any(re.search(r"\bhardware\b", heading, re.IGNORECASE) for heading in line.headings)
        pieces = [cell.strip() for cell in text.strip("|").split("|")] if text.startswith("|") else _SENTENCE.split(text)
        for sentence in pieces:
            named = families(sentence)
            if not named or _NEGATION.search(sentence):
                continue
            if under_hardware or _STATES.search(sentence) or _SIZED.search(sentence):
                counted = _COUNTED.search(sentence)  # "deployed on 1 Atlas 800 A3 (…)": read from its count
                found.append({"line": line.number, "heading": SEPARATOR.join(line.headings), "families": named,
                              "requirements": requirements(sentence[counted.start():] if counted else sentence),
                              **({"tabs": list(line.tabs)} if line.tabs else {})})
    return found


__all__ = ["statements"]
