"""Page-keyed rules: what a model's tutorial page advises for one scenario, on one hardware tab, in one release.

A scheduling, layout or speculative number read on a tutorial page holds for the model the page is about, for
the hardware tab and release where the page states it. ``advice(model, generation, release, goal)`` reads it from
the committed tutorial data (``optkit.versions.tutorial_data``, extracted from upstream's trees; no tree is read
here) in this order:

1. the model's own page (``tutorials:`` in its profile), in the plan's release, or the nearest earlier release
   that has the page (labelled so);
2. on that page, the scenario table row of the request's scenario (the goal: ``throughput`` reads the "High
   throughput" row, ``latency`` the "Low latency" row) on the request's hardware tab; a row that names no
   hardware holds for every tab of the page; a row on another tab only when the page has none for this one,
   labelled optkit's generalization from that tab;
3. the page's ``vllm serve`` commands for that tab and scenario fill in what the row leaves unstated;
4. a model with no page of its own gets the nearest page by architecture (same ``model_type``; else the same
   attention kind and MoE shape), every value labelled "optkit's generalization from <page> (<release>)". A
   model with a page never gets another page's number: when its own page states nothing for the scenario, the
   advice is empty.

Each value keeps its source (release, page, line); what a command says, and the settings of the chosen command a
plan carries (``PageAdvice.settings``), are read by ``optkit.resolve.page_values``. The plan computes the advice once and carries it
(``Plan.page_advice``): its ``page.*`` facts are what recipes' rules key on, and ``explain``, the report and the
lock show every value with its line.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Mapping

from packaging.version import Version

from optkit.resolve.page_values import (PAGE_DIR, PageSource, PageValue, command_layout as _command_layout,
                                        command_settings, command_values as _command_values,
                                        layout_commands as _layout_commands, leading_int as _leading_int,
                                        plain as _plain)
from optkit.value import replace, valueclass

SCENARIOS = {"throughput": "high throughput", "latency": "low latency"}
"""The scenario row a goal reads, as upstream's scenario tables name it (compared case-insensitively, by prefix:
"High Throughput (128k)" is a high-throughput row)."""
GENERATIONS = ("A2", "A3", "A5", "310P")
_HARDWARE_WORDS = (("A2", ("a2", "910b")), ("A3", ("a3", "910c", "superpod")), ("A5", ("950", "a5")),
                   ("310P", ("300i", "310p")))
"""Words that name a hardware family in a scenario table's cell ("16 A2 NPUs", "Single-Node (A3)")."""
_PREFIXES = ("910b", "910c", "950", "300i", "310p")
"""Those of them that also name the family as a word's start ("950DT", "910B4"); 'a2' or 'a3' do not ("A3B")."""
_COLUMNS = {"max num seqs": "max_num_seqs", "max-num-seqs": "max_num_seqs", "max num batched tokens": "max_num_batched_tokens",
            "max-num-batched-tokens": "max_num_batched_tokens", "max model len": "max_model_len",
            "max-model-len": "max_model_len", "tp": "tensor_parallel_size", "dp": "data_parallel_size",
            "ep": "expert_parallel", "mtp tokens": "num_speculative_tokens", "mtp": "num_speculative_tokens",
            "mtp speculation num": "num_speculative_tokens", "prefix cache": "prefix_caching",
            "prefix caching": "prefix_caching", "async scheduling": "async_scheduling"}
"""Scenario table columns (lowercase) → the knob they state."""
_SEQUENCE_PARALLEL = ("sequence parallelism", "flashcomm1", "flashcomm")
_ASYNC = "async scheduling"


@valueclass(frozen=True)
class PageAdvice:
    """What one page advises for a request's scenario and hardware tab (empty when no page states it)."""

    scenario: str  # 'high throughput'
    hardware: str  # the request's tab: 'A2', 'A3', …
    release: str  # the plan's release
    page: str = ""  # the page read ('' none)
    page_release: str = ""  # the release whose page was read (an earlier one when the plan's has none)
    generalized: str = ""  # '' when the model's own page states it for this tab; else why the advice is optkit's
    values: tuple = ()  # PageValue, sorted by knob
    model_pages: tuple = ()  # the model's own pages (file names), whether or not one states the scenario
    settings: tuple = ()  # PageSetting: the tuned command's other settings (the model's own page, the plan's release)
    note: str = ""  # how the command was chosen when the page names no scenario
    by_layout: tuple = ()  # ((tp, dp, nodes), line, settings, scenario): the tab's other commands, for their layout
    layout_line: int = 0  # the line of the command of the plan's layout whose settings these are (for_layout)
    same_scenario: bool = False  # by_layout holds for the plan only where a command's scenario is the plan's (or none)
    settings_layout: tuple = ()  # (TP, DP, nodes) of the command whose settings these are (() none)

    def for_layout(self, tp: int, dp: int, nodes: int) -> "PageAdvice":
        """This advice with the settings of the tab's command of exactly this layout (TP, DP, nodes), when the
        scenario's own command has another layout and the page runs one with this: the page's tuned command
        for the layout the plan runs."""
        if not self.by_layout:
            return self
        if self.settings and self.settings_layout == (tp, dp, nodes):  # the scenario's own command runs this layout
            return replace(self, by_layout=())
        for layout, line, settings, scenario in self.by_layout:
            # where the page states nothing for the scenario on this tab, a command the page places under another
            # scenario (or whose numbers are another scenario row's) is that scenario's advice, not this one's
            if layout == (tp, dp, nodes) and (not self.same_scenario or not scenario
                                              or _scenario_words(scenario).startswith(self.scenario)):
                note = "; ".join(n for n in (self.note, f"the settings are its command at :{line}, of this "
                                             f"layout (TP {tp}, DP {dp}, {nodes} node{'s' if nodes > 1 else ''})") if n)
                return replace(self, settings=settings, note=note, by_layout=(), layout_line=line)
        if not self.values:  # the page's advice was only its commands of other layouts: none for this plan
            return PageAdvice(self.scenario, self.hardware, self.release, model_pages=self.model_pages)
        return replace(self, by_layout=())

    def value(self, knob: str) -> Any:
        """The page's value of ``knob``, or None when the page does not state it."""
        found = next((v for v in self.values if v.knob == knob), None)
        return None if found is None else found.value

    def lines(self) -> list[str]:
        """The advice for ``optkit plan``/``explain``: where it is read, then one line per value with its line."""
        if not self.page:
            return []
        where = f"{self.page.removeprefix(PAGE_DIR)} (vllm-ascend {self.page_release})"
        head = (f"optkit's generalization from {where}: {self.generalized}" if self.generalized
                else f"the model's own page, {where}, on its {self.hardware} tab")
        if self.note:
            head += f"; {self.note}"
        if self.page_release != self.release:
            head += f"; vllm-ascend {self.release} has no data for this page: read on {self.page_release}, the nearest earlier release that has it"
        return [f"Page advice for {self.scenario} ({head}):",
                *(f"  {v.knob} = {_shown(v.value)} ('{v.written}', {v.source.text()})" for v in self.values),
                *(f"  {s.key} = {_shown(s.value)} (the page's command, {s.source.text()})" for s in self.settings)]

    def cite(self, text: str) -> str:
        """Where the ``page.*`` facts named in ``text`` (a rule's evaluation) come from: each value's words, page
        line and release, after the generalization it is, if it is one; '' when ``text`` reads no page value."""
        knobs = sorted({name.removeprefix("page.") for name in re.findall(r"\bpage\.[a-z_]+", text)})
        cited = [f"page.{v.knob} from '{v.written}', {v.source.text()}" for v in self.values if v.knob in knobs]
        cited += [f"page.command_{s.key.removeprefix('serve:--').replace('-', '_')} from the page's command, "
                  f"{s.source.text()}" for s in self.settings
                  if s.key.startswith("serve:--") and f"command_{s.key.removeprefix('serve:--').replace('-', '_')}" in knobs]
        if not cited:
            return ""
        return (f"optkit's generalization from {self.page.removeprefix(PAGE_DIR)}: {self.generalized}; " if
                self.generalized else "") + "; ".join(cited)

    def facts(self) -> dict[str, Any]:
        """The ``page.*`` facts recipes key on (``optkit.catalog.factspec``)."""
        def number(knob: str) -> int:
            value = self.value(knob)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        def switch(knob: str) -> str:
            value = self.value(knob)
            return "unstated" if value is None else ("on" if value else "off")

        present = bool(self.page and self.values)
        return {"page.present": present, "page.own": present and not self.generalized,
                "page.model_pages": ",".join(self.model_pages),
                "page.scenario": self.scenario if present else "",
                "page.max_num_seqs": number("max_num_seqs"), "page.max_num_batched_tokens": number("max_num_batched_tokens"),
                "page.num_speculative_tokens": number("num_speculative_tokens"),
                "page.sequence_parallel": switch("sequence_parallel"), "page.prefix_caching": switch("prefix_caching"),
                "page.async_scheduling": switch("async_scheduling"),
                "page.command_max_num_batched_tokens": self.layout_number("serve:--max-num-batched-tokens"),
                "page.static_kernel": self.command_switch(
                    "additional_config:ascend_compilation_config.enable_static_kernel")}

    def command_switch(self, key: str) -> str:
        """'on' / 'off' as the carried command's setting ``key`` says (its scenario's or its layout's command, the
        model's own page on the plan's tab), 'unstated' when it does not set it."""
        found = next((s for s in self.settings if s.key == key), None)
        if found is None:
            return "unstated"
        return "off" if str(found.value).strip().lower() in ("false", "0", "off", "no") else "on"

    def layout_number(self, key: str) -> int:
        """The number setting ``key`` of the page's command of exactly the plan's layout states (0: none, not a
        number, or no such command: ``for_layout`` found none)."""
        found = next((s for s in self.settings if s.key == key), None) if self.layout_line else None
        return (_leading_int(str(found.value)) or 0) if found is not None else 0

    def data(self) -> dict[str, Any]:
        """The advice as the report and the lock record it."""
        return {"scenario": self.scenario, "hardware": self.hardware, "release": self.release, "page": self.page,
                "page_release": self.page_release, "generalized": self.generalized,
                "values": [{"knob": v.knob, "value": v.value, "written": v.written, "release": v.source.release,
                            "page": v.source.page, "line": v.source.line} for v in self.values],
                **({"note": self.note} if self.note else {}),
                **({"settings": [{"key": s.key, "value": s.value, "release": s.source.release, "page": s.source.page,
                                  "line": s.source.line} for s in self.settings]} if self.settings else {})}


def plan_advice(model, target, release, goal: str) -> PageAdvice:
    """The advice a plan uses: ``advice`` for the request's model, its target's hardware tab and its vllm-ascend
    release (a ``Version``), the nearest page sought among the shipped model catalog (cached: the plan's facts and
    its views read the same object)."""
    key = (_architecture(model), target.device_generation, str(release), goal)
    if key not in _ADVICE:
        _ADVICE[key] = advice(model, target.device_generation, str(release), goal, catalog_models=_catalog_models())
    return _ADVICE[key]


_ADVICE: dict[tuple, PageAdvice] = {}
"""``plan_advice``'s answers (profiles are not hashable: keyed by what the advice reads of them)."""


def _architecture(model) -> tuple:
    return (model.id, model.source, model.hf_model_type, model.num_experts, model.hidden_size, model.gdn_layers,
            model.is_moe, model.shared_experts, getattr(model, "kv_lora_rank", None),
            getattr(model, "sliding_window", None), tuple(model.tutorials))


@lru_cache(maxsize=1)
def _catalog_models() -> tuple:
    from optkit.catalog.paths import project_root
    from optkit.resolve.profile_catalog import load_models

    return tuple(load_models(project_root() / "models").values())


@valueclass(frozen=True)
class TutorialSource:
    """Where page rules read tutorial data: the releases that have it, and a release's pages (the data's ``pages``
    mapping, or None). The committed data by default (``committed_releases``, ``committed_pages``); tests hand in
    their own."""

    releases: Callable[[], list]
    pages: Callable[[str], "Mapping[str, Any] | None"]


def advice(model, generation: str, release: str, goal: str, *, catalog_models=(),
           source: TutorialSource | None = None) -> PageAdvice:
    """What the model's page (or, without one, the nearest page by architecture among ``catalog_models``) advises
    for the goal's scenario on hardware ``generation`` in ``release`` (module docstring)."""
    # looked up when called, not bound here: the committed data is read once, on the first plan that needs it
    source = source or TutorialSource(lambda: committed_releases(), lambda r: committed_pages(r))
    empty = PageAdvice(SCENARIOS.get(goal, goal), generation, release, model_pages=tuple(sorted(model.tutorials)))
    own = [PAGE_DIR + name for name in model.tutorials]
    if own:
        return _from_pages(empty, own, source, "") or empty
    for near in nearest_models(model, catalog_models):
        found = _from_pages(empty, [PAGE_DIR + n for n in near.tutorials], source, f"{model.id} has no page of its own; "
                            f"{near.id}'s page is the nearest by architecture ({_kinship(model, near)})")
        if found:
            return found
    return empty


def _from_pages(empty: PageAdvice, names: list[str], source: TutorialSource, generalized: str) -> PageAdvice | None:
    for name in sorted(names):
        found = _read_page(empty, name, source, generalized)
        if found:
            return found
    return None


def _read_page(empty: PageAdvice, name: str, source: TutorialSource, generalized: str) -> PageAdvice | None:
    """The advice of page ``name`` in the nearest release at or before the plan's that has it."""
    page_release, page = _nearest_release(name, empty.release, source)
    if page is None:
        return None
    table, row, tab_note = _scenario_row(page, empty.scenario, empty.hardware)
    values = _row_values(table, row, page_release, name) if row else {}
    tab = (_row_hardware(page, table, row) if row else None) or empty.hardware
    commands = _commands(page, empty.scenario, tab, values, _row_deployment(table, row) if row else None)
    unnamed = ""
    if not commands and table is None and not any(c.get("scenario") for c in page.get("commands", ())):
        commands = [c for c in page.get("commands", ()) if c.get("hardware") == empty.hardware
                    and not c.get("pd_role") and c.get("launcher") == "vllm serve"][:1]
        unnamed = "the page names no scenario: its first command on the tab" if commands else ""
    for command in commands:
        for knob, value in _command_values(command, page_release, name).items():
            if values.get(knob) is None or values[knob].value is None:
                values[knob] = value
    by_layout: tuple = ()
    if not generalized and page_release == empty.release:  # the own page's commands on the request's own tab
        scenario_line = commands[0]["line"] if commands and tab == empty.hardware else 0
        by_layout = tuple((layout, line, settings, said or _agreeing_scenario(page, line, empty.hardware))
                          for layout, line, settings, said in
                          _layout_commands(page, empty.hardware, page_release, name, exclude=scenario_line))
    if not values:  # nothing for the scenario; a command of exactly the plan's layout may still be carried
        return replace(empty, page=name, page_release=page_release, by_layout=by_layout, same_scenario=True,
                       note=f"the page has no {empty.scenario} advice") if by_layout else None
    label = "; ".join(n for n in (generalized, tab_note) if n)
    carried = ()
    if not label and page_release == empty.release and tab == empty.hardware and commands:
        carried = command_settings(commands[0], page_release, name)
    return PageAdvice(empty.scenario, empty.hardware, empty.release, name, page_release, label,
                      tuple(values[k] for k in sorted(values)), empty.model_pages, carried, unnamed, by_layout,
                      same_scenario=tab != empty.hardware,
                      settings_layout=_command_layout(commands[0]) if carried else ())


def _nearest_release(name: str, release: str, source: TutorialSource) -> tuple[str, Mapping | None]:
    for candidate in [release] + [r for r in sorted(source.releases(), key=Version, reverse=True)
                                  if Version(r) < Version(release)]:
        data = source.pages(candidate)
        if data and name in data:
            return candidate, data[name]
    return release, None


def _scenario_row(page: Mapping, scenario: str, hardware: str) -> tuple[Mapping | None, Mapping | None, str]:
    """The page's scenario-table row for ``scenario`` on ``hardware``: its own tab's first, then a row naming no
    hardware, then another tab's (with a note saying so)."""
    rows = [(table, row) for table in page.get("tables", ()) if table.get("kind") == "scenario"
            for row in table.get("rows", ()) if _row_scenario(table, row).startswith(scenario)
            and not _pd_row(table, row) and _has_knobs(table)]
    ranked = sorted(rows, key=lambda tr: ({hardware: 0, None: 1}.get(_row_hardware(page, *tr), 2), tr[1]["line"]))
    if not ranked:
        return None, None, ""
    table, row = ranked[0]
    tab = _row_hardware(page, table, row)
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
    return _scenario_words(_cell(table, row, "scenario"))


def _scenario_words(text: str | None) -> str:
    """A scenario as compared: lowercase, words apart ('High-Throughput' → 'high throughput')."""
    return re.sub(r"[-_\s]+", " ", (text or "").lower()).strip()


def _row_deployment(table: Mapping, row: Mapping) -> str | None:
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


def _row_hardware(page: Mapping, table: Mapping, row: Mapping) -> str | None:
    """The hardware a row holds for: named in its cells or its table's tabs, else in the page's summary row of the
    same scenario (the one with the same device count when there are several); None when the page names none."""
    named = {h for cell in row["cells"] for h in [hardware_named(cell)] if h}
    named |= {h for tab in table.get("tabs", ()) for h in [hardware_named(tab)] if h}
    if len(named) == 1:
        return named.pop()
    scenario, devices = _row_scenario(table, row), _leading_int(_cell(table, row, "npus", "total npus"))
    summary = [(hardware_named(" ".join(r["cells"])), _leading_int(_cell(t, r, "total npus", "npus")))
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


def _row_values(table: Mapping, row: Mapping, release: str, page: str) -> dict[str, PageValue]:
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


def _commands(page: Mapping, scenario: str, hardware: str, row: dict, deployment: str | None) -> list[Mapping]:
    """The page's commands (not a PD role's) on ``hardware`` that implement the scenario: those the page places
    under it; else, when the page names no scenario for them, those of the row's deployment that agree with every
    number the row states (at least one): the row's own command, as in Qwen3.5-397B-A17B.md's multi-node MP
    scripts for its high-throughput row."""
    on_tab = [c for c in page.get("commands", ()) if c.get("hardware") == hardware and not c.get("pd_role")]
    named = [c for c in on_tab if _scenario_words(c.get("scenario")).startswith(scenario)]
    if named or deployment is None:
        return sorted(named, key=lambda c: c["line"])
    return sorted((c for c in on_tab if not c.get("scenario") and c.get("deployment") == deployment
                   and _agrees(c, row)), key=lambda c: c["line"])


def _agreeing_scenario(page: Mapping, line: int, hardware: str) -> str:
    """The scenario of the first scenario-table row (this tab's, or one naming no hardware) whose numbers the
    command at ``line`` agrees with: the row a command the page places under no scenario implements ('' none)."""
    command = next(c for c in page.get("commands", ()) if c["line"] == line)
    for table in page.get("tables", ()):
        if table.get("kind") != "scenario" or not _has_knobs(table):
            continue
        for row in table.get("rows", ()):
            if not _pd_row(table, row) and _row_hardware(page, table, row) in (hardware, None) and \
                    _agrees(command, _row_values(table, row, "", "")):
                return _row_scenario(table, row)
    return ""


def _agrees(command: Mapping, row: dict) -> bool:
    said = {k: v.value for k, v in _command_values(command, "", "").items()}
    shared = [k for k, v in row.items() if v.value is not None and not isinstance(v.value, bool) and k in said]
    return bool(shared) and all(said[k] == row[k].value for k in shared)


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def nearest_models(model, catalog_models) -> list:
    """Catalog models with a page, nearest to ``model`` by architecture first: the same ``model_type`` (family),
    else the same attention kind and MoE shape; nearer expert counts and widths before farther; none of another
    kind."""
    def kin(other) -> int | None:
        if other.hf_model_type == model.hf_model_type:
            return 0
        if _attention(other) == _attention(model) and _moe(other) == _moe(model):
            return 1
        return None

    near = [m for m in catalog_models if m.tutorials and m.id != model.id and kin(m) is not None]
    return sorted(near, key=lambda m: (kin(m), abs(m.num_experts - model.num_experts),
                                       abs(m.hidden_size - model.hidden_size), m.id))


def _attention(model) -> str:
    if getattr(model, "kv_lora_rank", None):
        return "MLA"
    if model.gdn_layers:
        return "GDN hybrid"
    return "sliding window" if getattr(model, "sliding_window", None) else "full attention"


def _moe(model) -> tuple:
    return (model.is_moe, model.is_moe and model.shared_experts)


def _kinship(model, near) -> str:
    if near.hf_model_type == model.hf_model_type:
        return f"the same model_type, {model.hf_model_type}"
    shape = "MoE with shared experts" if model.shared_experts else ("MoE" if model.is_moe else "dense")
    return f"the same attention ({_attention(model)}) and shape ({shape})"


def committed_releases() -> list[str]:
    """The releases whose tutorial data is committed."""
    try:
        from optkit.versions import tutorial_data
    except ImportError:  # the extraction's data has not landed: no page rules
        return []
    return list(tutorial_data.releases())


@lru_cache(maxsize=None)
def committed_pages(release: str) -> Mapping[str, Any] | None:
    """The committed tutorial data's pages of ``release`` (``optkit.versions.tutorial_data``), as plain mappings;
    None when no data is committed for it. The one place page rules read the data."""
    if release not in committed_releases():
        return None
    from optkit.versions import tutorial_data

    return _plain(tutorial_data.load(release).pages)


