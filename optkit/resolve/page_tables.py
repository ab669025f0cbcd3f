"""What a tutorial page's scenario tables say, and which of its commands implement a row: the readers
``optkit.resolve.page_rules`` chooses a page's advice with.

A scenario table row states knobs (``row_values``) for a scenario (``row_scenario``) on a hardware tab
(``row_hardware``: named in its cells or tabs, else by the page's summary table) and a deployment
(``row_deployment``); ``scenario_row`` picks the row of a scenario on a tab, ``scenario_commands`` the commands
that implement it, and ``agreeing_scenario`` the row a command the page places under no scenario agrees with;
``command_tabs`` says which tabs a command holds for, ``layout_commands`` lists a tab's commands by layout.
What one command says is ``optkit.resolve.page_values``'."""

from __future__ import annotations

import re
from typing import Any, Mapping

from optkit.resolve.page_hardware import placement, placements, tab_overruled
from optkit.resolve.page_values import (PageSource, PageValue, command_layout, command_settings, command_values,
                                        leading_int)

GENERATIONS = ("A2", "A3", "A5", "310P")
_HARDWARE_WORDS = (("A2", ("a2", "910b")), ("A3", ("a3", "910c", "superpod")), ("A5", ("950", "a5")),
                   ("310P", ("300i", "310p")))
"""Words that name a hardware family in a scenario table's cell ("16 A2 NPUs", "Single-Node (A3)")."""
_PREFIXES = ("910b", "910c", "950", "300i", "310p")
"""Those of them that also name the family as a word's start ("950DT", "910B4"); 'a2' or 'a3' do not ("A3B")."""
_COLUMNS = {"max num seqs": "max_num_seqs", "max-num-seqs": "max_num_seqs",
            "max num batched tokens": "max_num_batched_tokens",
            "max-num-batched-tokens": "max_num_batched_tokens", "max model len": "max_model_len",
            "max-model-len": "max_model_len", "tp": "tensor_parallel_size", "dp": "data_parallel_size",
            "ep": "expert_parallel", "mtp tokens": "num_speculative_tokens", "mtp": "num_speculative_tokens",
            "mtp speculation num": "num_speculative_tokens", "prefix cache": "prefix_caching",
            "prefix caching": "prefix_caching", "async scheduling": "async_scheduling"}
"""Scenario table columns (lowercase) → the knob they state."""
_SEQUENCE_PARALLEL = ("sequence parallelism", "flashcomm1", "flashcomm")
_ASYNC = "async scheduling"


def scenario_row(page: Mapping, scenario: str, hardware: str) -> tuple[Mapping | None, Mapping | None, str]:
    """The page's scenario-table row for ``scenario`` on ``hardware``: its own tab's first, then a row naming no
    hardware, then another tab's (with a note saying so)."""
    rows = [(table, row) for table in page.get("tables", ()) if table.get("kind") == "scenario"
            for row in table.get("rows", ()) if _row_scenario(table, row).startswith(scenario)
            and not _pd_row(table, row) and _has_knobs(table)]
    ranked = sorted(rows, key=lambda tr: ({hardware: 0, None: 1}.get(row_hardware(page, *tr), 2), tr[1]["line"]))
    if not ranked:
        return None, None, ""
    table, row = ranked[0]
    tab = row_hardware(page, table, row)
    note = "" if tab in (hardware, None) else (f"the page's {scenario} row is on its {tab} tab and it has none for "
                                               f"{hardware}: optkit carries it to {hardware}")
    return table, row, note


def _cell(table: Mapping, row: Mapping, *names: str) -> str:
    columns = [c.strip().lower() for c in table.get("columns", ())]
    for name in names:
        if name in columns and columns.index(name) < len(row["cells"]):
            return row["cells"][columns.index(name)].strip()
    return ""


def _row_scenario(table: Mapping, row: Mapping) -> str:
    return scenario_words(_cell(table, row, "scenario"))


def scenario_words(text: str | None) -> str:
    """A scenario as compared: lowercase, words apart ('High-Throughput' → 'high throughput')."""
    return re.sub(r"[-_\s]+", " ", (text or "").lower()).strip()


def row_deployment(table: Mapping, row: Mapping) -> str | None:
    """The data's deployment kind a row names ('MP node', 'Multi-node MP' → multi-node; 'Single node' →
    single-node), or None."""
    said = _cell(table, row, "node role", "deployment mode", "deployment", "configuration").lower()
    if "multi" in said or re.search(r"\bmp\b", said):
        return "multi-node"
    return "single-node" if "single" in said else None


def _pd_row(table: Mapping, row: Mapping) -> bool:
    role = _cell(table, row, "node role", "role").lower()
    return "prefill" in role or "decode" in role


def _has_knobs(table: Mapping) -> bool:
    return any(c.strip().lower() in _COLUMNS for c in table.get("columns", ()))


def row_hardware(page: Mapping, table: Mapping, row: Mapping) -> str | None:
    """The hardware a row holds for: named in its cells or its table's tabs, else in the page's summary row of the
    same scenario (the one with the same device count when there are several); None when the page names none."""
    named = {h for cell in row["cells"] for h in [hardware_named(cell)] if h}
    named |= {h for tab in table.get("tabs", ()) for h in [hardware_named(tab)] if h}
    if len(named) == 1:
        return named.pop()
    scenario, devices = _row_scenario(table, row), leading_int(_cell(table, row, "npus", "total npus"))
    summary = [(hardware_named(" ".join(r["cells"])), leading_int(_cell(t, r, "total npus", "npus")))
               for t in page.get("tables", ()) if t.get("kind") == "scenario" and not _has_knobs(t)
               for r in t.get("rows", ()) if _row_scenario(t, r) == scenario]
    tabs = {h for h, _ in summary if h}
    if len(tabs) > 1:
        tabs = {h for h, n in summary if h and n == devices}
    return tabs.pop() if len(tabs) == 1 else None


def hardware_named(text: str) -> str | None:
    """The hardware family a table cell or tab names ("16 A2 NPUs" → 'A2'), or None."""
    if text in GENERATIONS:
        return text
    words = re.findall(r"[a-z0-9]+", text.lower())
    found = {family for family, names in _HARDWARE_WORDS for w in words for n in names
             if w == n or (w.startswith(n) and n in _PREFIXES)}
    return found.pop() if len(found) == 1 else None


def row_values(table: Mapping, row: Mapping, release: str, page: str) -> dict[str, PageValue]:
    """The knobs a scenario row states, each as written; its optimizations column says whether sequence
    parallelism runs (the row lists what it turns on: absent is off) and whether async scheduling and
    speculative decoding do (only when named)."""
    source = PageSource(release, page, row["line"])
    values: dict[str, PageValue] = {}
    for column, cell in zip(table.get("columns", ()), row["cells"]):
        knob = _COLUMNS.get(column.strip().lower())
        if knob is not None and cell.strip():
            values[knob] = PageValue(knob, _cell_value(knob, cell.strip()), f"{column.strip()}: {cell.strip()}", source)
    optimizations = _cell(table, row, "main optimizations", "optimizations")
    if optimizations:
        said = optimizations.lower()
        written = f"{_column_named(table, ('main optimizations', 'optimizations'))}: {optimizations}"
        values["sequence_parallel"] = PageValue("sequence_parallel", any(w in said for w in _SEQUENCE_PARALLEL),
                                                written, source)
        if _ASYNC in said:
            values["async_scheduling"] = PageValue("async_scheduling", True, written, source)
        if "speculative decoding disabled" in said:
            values.setdefault("num_speculative_tokens", PageValue("num_speculative_tokens", 0, written, source))
    return values


def _column_named(table: Mapping, names: tuple[str, ...]) -> str:
    return next(c.strip() for c in table.get("columns", ()) if c.strip().lower() in names)


def _cell_value(knob: str, cell: str) -> Any:
    """A scenario cell as a value: '16 per DP' → 16 sequences per DP group, 'On'/'Off' → a switch, a bare number →
    the number; anything else ('4 or more', 'Tune by concurrency', '1024 to 4096') → None (kept as written)."""
    said = cell.lower()
    if knob in ("prefix_caching", "expert_parallel", "async_scheduling"):
        return {"on": True, "off": False, "yes": True, "no": False}.get(said)
    if knob == "num_speculative_tokens" and said in ("off", "no", "-", "disabled"):
        return 0
    match = re.fullmatch(r"(\d+)(?: per dp)?", said) if knob == "max_num_seqs" else re.fullmatch(r"\d+", said)
    return int(match.group(1) if knob == "max_num_seqs" else match.group(0)) if match else None


def layout_commands(page: Mapping, tab: str, release: str, name: str, exclude: int):
    """((tp, dp, nodes), line, settings, scenario) of the tab's plain commands (not a PD role's; a multi-node
    layout's first node): the tab's own first, then those the page writes for this tab and others
    (``command_tabs``), each in page order; ``scenario`` is the one the page places the command under ('' none)."""
    for command in on_tab(page, tab, (c for c in page.get("commands", ()) if not c.get("pd_role"))):
        if command["line"] != exclude and (command.get("node_rank") or 0) == 0:
            settings = command_settings(command, release, name, page.get("checkpoints", ()))
            yield command_layout(command), command["line"], settings, command.get("scenario") or ""


def command_tabs(page: Mapping, command: Mapping) -> tuple[str, ...]:
    """The hardware tabs a command holds for: its own tab (unless the tab's node cannot hold it and a statement
    above it in the tab names the family that can: ``page_hardware.tab_overruled``); else every family its context names ('Atlas 800 A3 /
    Atlas 800 A2' → A2, A3); else, for a command the page places under a scenario, the one tab that scenario's
    rows name (Qwen3-30B-A3B.md's 'Low Latency' command under a table whose row says '2 (A3)'); else the family
    the page's hardware statements place it on, or each family they state alike for it (``page_hardware.placements``);
    else none."""
    if command.get("hardware"):
        overruled = tab_overruled(page, command)
        return (overruled.family if overruled else command["hardware"],)
    if command.get("hardware_families"):
        return tuple(sorted(command["hardware_families"]))
    scenario = scenario_words(command.get("scenario"))
    tabs = {row_hardware(page, table, row) for table in page.get("tables", ()) if scenario
            and table.get("kind") == "scenario" and _has_knobs(table) for row in table.get("rows", ())
            if _row_scenario(table, row) == scenario}
    if len(tabs) == 1 and None not in tabs:
        return (tabs.pop(),)
    return tuple(placed.family for placed in placements(page, command))


def on_tab(page: Mapping, tab: str, commands) -> list[Mapping]:
    """``commands`` that hold for ``tab``: the tab's own first, then those written for it and others."""
    found = [(len(tabs) > 1, c["line"], c) for c in commands for tabs in [command_tabs(page, c)] if tab in tabs]
    return [c for _, _, c in sorted(found, key=lambda f: f[:2])]


def scenario_commands(page: Mapping, scenario: str, hardware: str, row: dict, deployment: str | None) -> list[Mapping]:
    """The page's commands (not a PD role's) on ``hardware`` that implement the scenario: those the page places
    under it; else, when the page names no scenario for them, those of the row's deployment that agree with every
    number the row states (at least one): the row's own command, as in Qwen3.5-397B-A17B.md's multi-node MP
    scripts for its high-throughput row."""
    tabbed = on_tab(page, hardware, (c for c in page.get("commands", ()) if not c.get("pd_role")))
    named = [c for c in tabbed if scenario_words(c.get("scenario")).startswith(scenario)]
    if named or deployment is None:
        return named
    return [c for c in tabbed if not c.get("scenario") and c.get("deployment") == deployment and _agrees(c, row)
            and _agreement(c, row) >= _best_agreement(page, c, hardware)[0] and not _alike(page, c)]


def _alike(page: Mapping, command: Mapping) -> bool:
    """Whether the command holds for its tabs only as one of several families the page states alike for it
    (``page_hardware.placements``): it is compared on each, and is the page's command of its layout there after the
    tab's own, but it implements no scenario row by agreeing with its numbers — Qwen3.5-27B-Qwen3.6-27B.md's accuracy
    command (0.30.0rc2 :823: TP 2, no DP, 32 sequences, 133000) is no A2 high-throughput row's command (:900, TP 2 ×
    DP 4), which the A3/A2 tab's own startup command (:246) stays the nearest to."""
    return not command.get("hardware") and not command.get("hardware_families") and placement(page, command) is None


def agreeing_scenario(page: Mapping, line: int, hardware: str) -> str:
    """The scenario of the scenario-table row (this tab's, or one naming no hardware) whose numbers the command at
    ``line`` agrees with on the most numbers (the first of a tie): the row a command the page places under no
    scenario implements ('' none)."""
    command = next(c for c in page.get("commands", ()) if c["line"] == line)
    return _best_agreement(page, command, hardware)[1]


def _best_agreement(page: Mapping, command: Mapping, hardware: str) -> tuple[int, str]:
    """(numbers agreed, scenario) of the row ``command`` agrees with on the most numbers; (0, '') none."""
    best = (0, "")
    for table in page.get("tables", ()):
        if table.get("kind") != "scenario" or not _has_knobs(table):
            continue
        for row in table.get("rows", ()):
            if not _pd_row(table, row) and row_hardware(page, table, row) in (hardware, None):
                agreed = _agreement(command, row_values(table, row, "", ""))
                best = max(best, (agreed, _row_scenario(table, row)), key=lambda b: b[0])
    return best


def _agrees(command: Mapping, row: dict) -> bool:
    return _agreement(command, row) > 0


def _agreement(command: Mapping, row: dict) -> int:
    """How many numbers a row states that the command sets too, all equal (0: none shared, or one differs): a
    Long-context command (TP 2, DP 1, 128 sequences, 262144, 16384) agrees with its own row on five and with a
    Low-latency row stating only TP 2 and DP 1 on two."""
    said = {k: v.value for k, v in command_values(command, "", "").items()}
    shared = [k for k, v in row.items() if v.value is not None and not isinstance(v.value, bool) and k in said]
    return len(shared) if all(said[k] == row[k].value for k in shared) else 0
