"""The generated tables of docs/tutorials.md, from the committed tutorial data (``optkit docs`` writes them).

``summary_table()``: per release, what was extracted (pages, commands by launcher and hardware family,
lines not read). ``hardware_table()``: every distinct tab text of every release and the hardware family
``optkit.versions.tutorial_tabs`` maps it to, with the releases and pages it appears on.
"""

from __future__ import annotations

from pathlib import Path

from optkit.versions.tutorial_data import load, releases
from optkit.versions.tutorial_tabs import FAMILIES, families


def summary(release: str, root: Path | None = None) -> dict[str, int]:
    """One release's counts, by the columns of ``summary_table``."""
    data = load(release, root)
    pages = data.pages.values()
    commands = data.commands()
    counts = {"pages": len(data.pages), "model pages": sum(name.startswith("models/") for name in data.pages),
              "LLM pages": sum(page["kind"] == "llm" for page in pages),
              "with a scenario table": sum(any(t["kind"] == "scenario" for t in page["tables"]) for page in pages),
              "commands": len(commands),
              "vllm serve": sum(c["launcher"] == "vllm serve" for c in commands),
              "vllm serve on model pages": len(_model_serves(data)),
              "launch_online_dp.py": sum(c["launcher"] == "launch_online_dp.py" for c in commands)}
    for family in (*FAMILIES, None):
        counts[family or "no one family"] = sum(c["hardware"] == family for c in commands)
    counts["with problems"] = sum(bool(c["problems"]) for c in commands)
    counts["unread"] = sum(len(page["unread"]) for page in pages)
    return counts


def _model_serves(data) -> list:
    return [c for name, page in data.pages.items() if name.startswith("models/") for c in page["commands"]
            if c["launcher"] == "vllm serve"]


def summary_table(root: Path | None = None) -> list[str]:
    """The per-release summary as markdown table lines."""
    rows = {release: summary(release, root) for release in releases(root)}
    columns = list(next(iter(rows.values()))) if rows else []
    lines = ["| release | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    lines += [f"| {release} | " + " | ".join(str(counts[c]) for c in columns) + " |" for release, counts in rows.items()]
    return lines


def hardware_table(root: Path | None = None) -> list[str]:
    """Every tab text of the committed data, the family it maps to, where it appears."""
    seen: dict[str, dict[str, set[str]]] = {}
    for release in releases(root):
        for name, page in load(release, root).pages.items():
            for tab in page["tabs"]:
                entry = seen.setdefault(tab, {"releases": set(), "pages": set()})
                entry["releases"].add(release)
                entry["pages"].add(name)
    order = releases(root)
    lines = ["| tab text | families named | hardware | releases | pages |", "|---|---|---|---|---|"]
    for tab in sorted(seen, key=str.lower):
        named = families(tab)
        span = sorted(seen[tab]["releases"], key=order.index)
        where = span[0] if len(span) == 1 else f"{span[0]} … {span[-1]} ({len(span)})"
        lines.append(f"| {_cell(tab)} | {', '.join(named) or '—'} | {named[0] if len(named) == 1 else '—'} | "
                     f"{where} | {len(seen[tab]['pages'])} |")
    return lines


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


__all__ = ["hardware_table", "summary", "summary_table"]
