"""The words of an exported series: commit messages from a patch's DEP-3 header and its recipe,
without optkit-only wording.

A patch header is written for optkit's catalog: it names other recipes by id, tells how the patch
was re-derived from the one for an older release, and its ``Origin`` names the article and the
seed map. Upstream reads none of that. ``upstream_text`` rewrites a header text for upstream:

- a recipe id becomes the recipe's title in quotes (the change it names, in words);
- optkit's own port history goes: a sentence that starts ``Re-derived for …`` or says a part ``of
  the 0.23 patch is gone`` / ``dropped``, or names optkit; the phrases ``as for 0.23`` and ``of the
  0.23 patch`` elsewhere;
- what is left is wrapped at 72 columns, paragraph by paragraph.

``commit_message`` builds subject, body and trailers; ``optkit_words`` lists what is still
optkit-only in a text (a recipe id, the word optkit), so that the exporter can refuse a message
that would carry it rather than send it. ``title_prefix`` is the PR title's class, one of those of
vllm-ascend's contribution guide (docs/source/developer_guide/contribution/index.md, "PR Title and
Classification"), from the paths the series touches.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

WIDTH = 72

_HISTORY = re.compile(r"^Re-derived\b|\bof the 0\.\d+(?:\.\w+)? patch (?:is|are) (?:gone|dropped)\b|\boptkit\b", re.I)
_PHRASES = re.compile(r",? as for 0\.\d+(?:\.\w+)?\b| of the 0\.\d+(?:\.\w+)? patch\b")
_SENTENCE_END = re.compile(r"(?<=[.;:])\s+(?=[A-Z])")

# (path prefix, class), first match wins; the classes of the contribution guide, in its order.
_CLASSES = (
    ("vllm_ascend/worker/model_runner", "[ModelRunner]"),
    ("vllm_ascend/worker/", "[Worker]"),
    ("vllm_ascend/attention/", "[Attention]"),
    ("vllm_ascend/distributed/", "[Communicator]"),
    ("vllm_ascend/ops/", "[Kernel]"),
    ("csrc/", "[Kernel]"),
    ("vllm_ascend/platform.py", "[Platform]"),
    ("tests/", "[Test]"),
    ("docs/", "[Doc]"),
)
_ORDER = ("[Attention]", "[Communicator]", "[ModelRunner]", "[Platform]", "[Worker]", "[Core]", "[Kernel]",
          "[Test]", "[Doc]")


def title_prefix(paths: Iterable[str]) -> str:
    """``[Worker][ModelRunner]``-style prefix for a change touching ``paths`` (tests and docs add no
    class of their own when code is touched too)."""
    found = {next((c for p, c in _CLASSES if path.startswith(p)), "[Core]") for path in paths}
    if found - {"[Test]", "[Doc]"}:
        found -= {"[Test]", "[Doc]"}
    return "".join(c for c in _ORDER if c in found)


def upstream_text(text: str, titles: dict[str, str], width: int | None = WIDTH) -> str:
    """``text`` rewritten for upstream (see the module docstring); ``titles``: recipe id → title;
    ``width`` None: paragraphs on one line each (Markdown)."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    out = []
    for paragraph in paragraphs:
        flat = " ".join(paragraph.split())
        kept = [_named(s, titles) for s in _SENTENCE_END.split(flat) if not _HISTORY.search(s)]
        kept = [_PHRASES.sub("", s) for s in kept if s]
        if kept and width is None:
            out.append(" ".join(kept))
        elif kept:
            out.append(textwrap.fill(" ".join(kept), width, break_long_words=False, break_on_hyphens=False))
    return "\n\n".join(out)


def _named(sentence: str, titles: dict[str, str]) -> str:
    for rid in sorted(titles, key=len, reverse=True):
        sentence = re.sub(rf"(?<![\w-]){re.escape(rid)}(?![\w-])", f'"{titles[rid]}"', sentence)
    return sentence


def optkit_words(text: str, recipe_ids: Iterable[str]) -> list[str]:
    """What in ``text`` is optkit-only: recipe ids, the word optkit (sorted, no repeats)."""
    found = {rid for rid in recipe_ids if re.search(rf"(?<![\w-]){re.escape(rid)}(?![\w-])", text)}
    found |= {m.lower() for m in re.findall(r"\boptkit\b", text, re.I)}
    return sorted(found)


def commit_message(subject: str, description: str, article: str, bug: str, signoff: str | None,
                   titles: dict[str, str]) -> str:
    """Subject, the description for upstream, where the idea comes from, ``Bug:`` and the DCO
    sign-off (``signoff``: ``Name <mail>``, or None for none)."""
    parts = [subject, upstream_text(description, titles)]
    if article:
        parts.append(textwrap.fill(article, WIDTH, break_long_words=False, break_on_hyphens=False))
    trailers = [f"Bug: {bug}"] if bug else []
    trailers += [f"Signed-off-by: {signoff}"] if signoff else []
    if trailers:
        parts.append("\n".join(trailers))
    return "\n\n".join(p for p in parts if p) + "\n"


ARTICLES = {1: "国产算力·昇腾 910C 大模型推理优化（上）：镜像更新与参数调优提速 40%",
            2: "昇腾 910C 大模型推理优化实践（下篇）"}
"""The article's parts by their published titles (得物技术); they are not linked: no stable address is known."""


def article_name(provenance) -> str:
    """The article a recipe comes from, named so a reader can find it (no address is known to link)."""
    article = getattr(provenance, "article", None)
    part = getattr(article, "part", None)
    title = ARTICLES.get(part)
    return f"the 得物技术 article “{title}” (Ascend 910C LLM inference tuning, part {part})" if title else \
        "the 得物技术 article on Ascend 910C LLM inference tuning"


def article_line(provenance) -> str:
    """Where the optimisation is described, in words (the recipe's article provenance)."""
    article = getattr(provenance, "article", None)
    if article is None:
        return ""
    section = f', section "{article.section}"' if getattr(article, "section", "") else ""
    return f"The optimisation is described in {article_name(provenance)}{section}."
