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

Each value keeps its source (release, page, line). What a scenario table row says and which commands implement it
are read by ``optkit.resolve.page_tables``; what a command says, and the settings of the chosen command a plan
carries (``PageAdvice.settings``), by ``optkit.resolve.page_values``. The plan computes the advice once and carries
it (``Plan.page_advice``): its ``page.*`` facts are what recipes' rules key on, and ``explain``, the report and the
lock show every value with its line.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Mapping

from packaging.version import Version

from optkit.resolve.page_commands import serves
from optkit.resolve.page_kin import kinship as _kinship, nearest_models
from optkit.resolve.page_tables import (agreeing_scenario, layout_commands as _layout_commands, on_tab,
                                        row_deployment, row_hardware, row_values, scenario_commands, scenario_row,
                                        scenario_words)
from optkit.resolve.page_values import (DCP_SETTING, EP_SETTING, PAGE_DIR, PCP_SETTING, PP_SETTING,
                                        SPEC_METHOD_SETTING, WEIGHTS_SETTING, command_layout as _command_layout, command_settings,
                                        command_values as _command_values, leading_int as _leading_int,
                                        plain as _plain)
from optkit.value import replace, valueclass

CAPTURE_SETTING = "compilation_config:cudagraph_capture_sizes"
COMMAND_FACTS = {"command_max_num_batched_tokens": "serve:--max-num-batched-tokens",
                 "command_capture_sizes_max": CAPTURE_SETTING}
"""The ``page.command_*`` facts and the command setting each is read from (``cite`` names its line)."""

SCENARIOS = {"throughput": "high throughput", "latency": "low latency"}
"""The scenario row a goal reads, as upstream's scenario tables name it (compared case-insensitively, by prefix:
"High Throughput (128k)" is a high-throughput row)."""


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
    layout_scenario: str = ""  # the scenario that command implements, as the page places it or its numbers agree
    # (the plan's own, for a long-context command serving the request's context: its load is the plan's)
    same_scenario: bool = False  # by_layout holds for the plan only where a command's scenario is the plan's (or none)
    settings_layout: tuple = ()  # (TP, DP, nodes) of the command whose settings these are (() none)
    roles: tuple = ()  # (role, (tp, dp), line, settings): the tab's PD role commands (the own page, the plan's release)
    role: str = ""  # for_role: the PD role whose command's settings these are ('' none)
    layout_exact: bool = False  # the settings are a command of exactly the plan's layout (for_layout) or role

    def for_layout(self, tp: int, dp: int, nodes: int, max_model_len: int | None = None,
                   weights: str | None = None, pcp: int = 1, method: str | None = None,
                   pp: int = 1) -> "PageAdvice":
        """This advice with the settings of the tab's command of exactly this layout (TP, DP, nodes), when the
        scenario's own command has another layout and the page runs one with this: the page's tuned command
        for the layout the plan runs (of several, the one serving the plan's ``weights`` format, then the one
        speculating with the request's ``method`` where another drafts otherwise, then the one serving the
        request's ``--max-model-len``, if any). A command of another prefill context parallel or pipeline-parallel
        size (``PCP_SETTING``, ``PP_SETTING``; ``pcp``, ``pp`` the plan's) runs more or fewer ranks: not of this
        layout."""
        def other_weights(settings) -> bool:
            return _other_deployment(settings, weights, method)

        def other_pcp(settings) -> bool:
            return (_setting(settings, PCP_SETTING) or 1) != pcp or (_setting(settings, PP_SETTING) or 1) != pp

        serving = any(layout == (tp, dp, nodes) and not other_weights(settings) and not other_pcp(settings)
                      for layout, _, settings, _ in self.by_layout)
        if self.settings and self.settings_layout == (tp, dp, nodes) and not other_pcp(self.settings) and (
                not other_weights(self.settings) or not serving):  # the scenario's own command runs this layout
            return replace(self, by_layout=(), layout_exact=True)
        if not self.by_layout:
            return self
        wanted = f"{max_model_len}" if max_model_len else None
        ranked = sorted(self.by_layout, key=lambda entry: (other_weights(entry[2]), not any(
            s.key == "serve:--max-model-len" and str(s.value) == wanted for s in entry[2])))
        def serves_context(settings, scenario) -> bool:  # a long-context command of the request's own context
            return bool(wanted) and scenario_words(scenario).startswith("long context") and any(
                s.key == "serve:--max-model-len" and str(s.value) == wanted for s in settings)

        for layout, line, settings, scenario in ranked:
            # where the page states nothing for the scenario on this tab, a command the page places under another
            # scenario (or whose numbers are another scenario row's) is that scenario's advice, not this one's;
            # but a request for the context a long-context command serves is that command's load
            served = serves_context(settings, scenario)
            ours = layout == (tp, dp, nodes) and not other_pcp(settings)
            if ours and (not self.same_scenario or not _names_goal(scenario) or served
                         or scenario_words(scenario).startswith(self.scenario)):
                note = "; ".join(n for n in (self.note, f"the settings are its command at :{line}, of this "
                                             f"layout (TP {tp}, DP {dp}, {nodes} node{'s' if nodes > 1 else ''})",
                                             f"it serves the request's --max-model-len {wanted}" if served else "")
                                 if n)
                return replace(self, settings=settings, note=note, by_layout=(), layout_line=line,
                               layout_scenario=self.scenario if served else scenario_words(scenario),
                               layout_exact=True, settings_layout=(tp, dp, nodes))
        if not self.values:  # the page's advice was only its commands of other layouts: none for this plan
            return PageAdvice(self.scenario, self.hardware, self.release, model_pages=self.model_pages,
                              page=self.page if self.roles else "", page_release=self.page_release, roles=self.roles)
        return replace(self, by_layout=())

    def for_role(self, role: str, tp: int, dp: int, weights: str | None = None,
                 method: str | None = None, dcp: int = 1) -> "PageAdvice":
        """This advice with the settings of the page's command for PD ``role`` with this instance shape (TP, DP) on
        the plan's tab, when the page runs one (its prefill and decode nodes' commands, each role's own
        environment, context length and memory share); else this advice, whose settings then hold for both roles.
        A role command serving other weights than the plan's ``weights`` is another deployment: not this plan's
        role; nor is one drafting with another speculative ``method`` than the plan's (DeepSeek-V4-Pro.md's MTP and
        DSpark PD pairs of one shape), nor one of another decode context parallel size than the plan's ``dcp``
        (GLM5.2.md's 0.23.0 1M-context pair of DCP 8 beside its W4A8C8 pair of DCP 1, both with TP 8 × DP 4
        prefillers)."""
        for said, layout, line, settings in self.roles:
            if _other_deployment(settings, weights, method) or (_setting(settings, DCP_SETTING) or 1) != dcp:
                continue
            if said == role and layout == (tp, dp):
                note = "; ".join(n for n in (self.note, f"the {role} role's settings are its command at :{line} "
                                             f"(TP {tp}, DP {dp})") if n)
                return replace(self, settings=settings, note=note, by_layout=(), roles=(), layout_line=line,
                               role=role, settings_layout=(tp, dp, 1), layout_exact=True)
        return replace(self, roles=())

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
        scenario = f"the {self.role} role" if self.role else self.scenario
        if self.note:
            head += f"; {self.note}"
        if self.page_release != self.release:
            head += f"; vllm-ascend {self.release} has no data for this page: read on {self.page_release}, the nearest earlier release that has it"
        values = () if self.role else self.values  # a role's advice: its command's settings (the values are the plan's)
        return [f"Page advice for {scenario} ({head}):",
                *(f"  {v.knob} = {_shown(v.value)} ('{v.written}', {v.source.text()})" for v in values),
                *(f"  {s.key} = {_shown(s.value)} (the page's command, {s.source.text()})" for s in self.settings)]

    def cite(self, text: str) -> str:
        """Where the ``page.*`` facts named in ``text`` (a rule's evaluation) come from: each value's words, page
        line and release, after the generalization it is, if it is one; '' when ``text`` reads no page value."""
        knobs = sorted({name.removeprefix("page.") for name in re.findall(r"\bpage\.[a-z_]+", text)})
        cited = [f"page.{v.knob} from '{v.written}', {v.source.text()}" for v in self.values if v.knob in knobs]
        cited += [f"page.{fact} from the page's command, {s.source.text()}" for fact, key in COMMAND_FACTS.items()
                  if fact in knobs for s in self.settings if s.key == key]
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
                "page.command_capture_sizes_max": self.capture_sizes_max(),
                "page.role": self.role, "page.expert_parallel": self.expert_parallel(),
                "page.static_kernel": self.command_switch(
                    "additional_config:ascend_compilation_config.enable_static_kernel"),
                "page.npugraph_ex": self.command_switch("additional_config:ascend_compilation_config.enable_npugraph_ex"),
                "page.fused_mc2": self.fused_mc2(), "page.fused_mc2_level": self.fused_mc2_level()}

    def expert_parallel(self) -> str:
        """'on' / 'off' as the model's own page runs expert parallelism for the plan: its command of exactly the
        plan's layout on the plan's tab (the flag, or its absence), else its scenario row's EP column, else the
        scenario's command; 'unstated' when none says, or when the advice is another page's or tab's (optkit's
        generalization)."""
        if self.layout_line:
            return self.command_switch(EP_SETTING)
        if self.generalized or not self.page:
            return "unstated"
        row = self.value("expert_parallel")
        if isinstance(row, bool) and not any(v.knob == "expert_parallel" and v.written.startswith("--")
                                             for v in self.values):
            return "on" if row else "off"
        return self.command_switch(EP_SETTING)

    def fused_mc2(self) -> str:
        """'on' / 'off' as the carried command sets fused MC2 (its ``enable_fused_mc2`` key, else the env var
        ``VLLM_ASCEND_ENABLE_FUSED_MC2`` vllm-ascend reads for it), 'unstated' when it sets neither."""
        said = self.command_switch("additional_config:enable_fused_mc2")
        return said if said != "unstated" else self.command_switch("env:VLLM_ASCEND_ENABLE_FUSED_MC2")

    def fused_mc2_level(self) -> int:
        """The fused MC2 level the carried command sets (its ``enable_fused_mc2`` key, else the env var): 1
        dispatch_ffn_combine, 2 dispatch_gmm_combine_decode (vllm-ascend's envs.py); ``true`` is 1; 0 when it sets
        none, sets it off, or writes no number."""
        for key in ("additional_config:enable_fused_mc2", "env:VLLM_ASCEND_ENABLE_FUSED_MC2"):
            found = next((s for s in self.settings if s.key == key), None)
            if found is not None:
                value = found.value
                if isinstance(value, bool):
                    return int(value)
                return _leading_int(str(value)) or 0
        return 0

    def command_switch(self, key: str) -> str:
        """'on' / 'off' as the carried command's setting ``key`` says (its scenario's or its layout's command, the
        model's own page on the plan's tab), 'unstated' when it does not set it."""
        found = next((s for s in self.settings if s.key == key), None)
        if found is None:
            return "unstated"
        return "off" if str(found.value).strip().lower() in ("false", "0", "off", "no") else "on"

    def layout_number(self, key: str) -> int:
        """The number setting ``key`` of the page's command of exactly the plan's layout states (0: none, not a
        number, or no such command: ``for_layout`` found none; or the command is another scenario's, such as the
        long-context command of a throughput plan's layout: its scheduler is tuned for that scenario)."""
        other = _names_goal(self.layout_scenario) and not self.layout_scenario.startswith(self.scenario)
        found = next((s for s in self.settings if s.key == key), None) if self.layout_line and not other else None
        return (_leading_int(str(found.value)) or 0) if found is not None else 0

    def capture_sizes_max(self) -> int:
        """The largest ACL-graph capture size of the page's command of exactly the plan's layout (or PD role) on the
        plan's tab (0: none, or no such command). Unlike ``layout_number``, the scenario's own command counts when
        it runs the plan's layout: capture sizes are sized by the layout's load, whatever the scenario."""
        found = next((s for s in self.settings if s.key == CAPTURE_SETTING), None) if self.layout_exact else None
        sizes = found.value if found is not None and isinstance(found.value, list) else []
        return max((n for n in sizes if isinstance(n, int) and not isinstance(n, bool)), default=0)

    def data(self) -> dict[str, Any]:
        """The advice as the report and the lock record it."""
        return {"scenario": self.scenario, "hardware": self.hardware, "release": self.release, "page": self.page,
                "page_release": self.page_release, "generalized": self.generalized,
                "values": [{"knob": v.knob, "value": v.value, "written": v.written, "release": v.source.release,
                            "page": v.source.page, "line": v.source.line} for v in self.values],
                **({"note": self.note} if self.note else {}), **({"role": self.role} if self.role else {}),
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
        return _from_pages(empty, own, source, "", _serving(model, catalog_models)) or empty
    for near in nearest_models(model, catalog_models):
        found = _from_pages(empty, [PAGE_DIR + n for n in near.tutorials], source, f"{model.id} has no page of its own; "
                            f"{near.id}'s page is the nearest by architecture ({_kinship(model, near)})",
                            _serving(near, catalog_models))
        if found:
            return found
    return empty


def _serving(model, catalog_models) -> Callable[[Mapping], bool]:
    """Whether a command of the model's page serves it: not one whose model path names another catalog model of the
    same page better than this one (``optkit.resolve.page_commands.serves``: Qwen3.5-27B-Qwen3.6-27B.md runs a TP 2
    command for each model: a Qwen3.6-27B plan never carries the Qwen3.5-27B command's context length)."""
    owners = [m for m in catalog_models if set(getattr(m, "tutorials", ())) & set(getattr(model, "tutorials", ()))]
    return lambda command: serves(command, model, owners)


def _from_pages(empty: PageAdvice, names: list[str], source: TutorialSource, generalized: str,
                serves: Callable[[Mapping], bool]) -> PageAdvice | None:
    for name in sorted(names):
        found = _read_page(empty, name, source, generalized, serves)
        if found:
            return found
    return None


def _read_page(empty: PageAdvice, name: str, source: TutorialSource, generalized: str,
               serves: Callable[[Mapping], bool] = lambda command: True) -> PageAdvice | None:
    """The advice of page ``name`` in the nearest release at or before the plan's that has it (its commands that
    serve the model: ``_serving``)."""
    page_release, page = _nearest_release(name, empty.release, source)
    if page is None:
        return None
    page = {**page, "commands": [c for c in page.get("commands", ()) if serves(c)]}
    table, row, tab_note = scenario_row(page, empty.scenario, empty.hardware)
    values = row_values(table, row, page_release, name) if row else {}
    tab = (row_hardware(page, table, row) if row else None) or empty.hardware
    commands = scenario_commands(page, empty.scenario, tab, values, row_deployment(table, row) if row else None)
    unnamed = ""
    if not commands and table is None and not any(c.get("scenario") for c in page.get("commands", ())):
        commands = on_tab(page, empty.hardware, (c for c in page.get("commands", ())
                                                 if not c.get("pd_role") and c.get("launcher") == "vllm serve"))[:1]
        unnamed = "the page names no scenario: its first command on the tab" if commands else ""
    for command in commands:
        for knob, value in _command_values(command, page_release, name).items():
            if values.get(knob) is None or values[knob].value is None:
                values[knob] = value
    by_layout: tuple = ()
    if not generalized and page_release == empty.release:  # the own page's commands on the request's own tab
        scenario_line = commands[0]["line"] if commands and tab == empty.hardware else 0
        by_layout = tuple((layout, line, settings, said or agreeing_scenario(page, line, empty.hardware))
                          for layout, line, settings, said in
                          _layout_commands(page, empty.hardware, page_release, name, exclude=scenario_line))
    roles = _role_commands(page, empty.hardware, page_release, name) if not generalized and \
        page_release == empty.release else ()
    if not values:  # nothing for the scenario; a command of exactly the plan's layout may still be carried
        return replace(empty, page=name, page_release=page_release, by_layout=by_layout, same_scenario=True,
                       note=f"the page has no {empty.scenario} advice", roles=roles) if by_layout or roles else None
    label = "; ".join(n for n in (generalized, tab_note) if n)
    carried = ()
    if not label and page_release == empty.release and tab == empty.hardware and commands:
        carried = command_settings(commands[0], page_release, name, page.get("checkpoints", ()))
    return PageAdvice(empty.scenario, empty.hardware, empty.release, name, page_release, label,
                      tuple(values[k] for k in sorted(values)), empty.model_pages, carried, unnamed, by_layout,
                      same_scenario=tab != empty.hardware,
                      settings_layout=_command_layout(commands[0]) if carried else (), roles=roles)


def _role_commands(page: Mapping, tab: str, release: str, name: str) -> tuple:
    """(role, (tp, dp), line, settings) of the page's PD role commands on ``tab`` (its own first, then those written
    for it and others; a role's first node's command of a shape), one per role, instance shape, weight format,
    speculative method and decode context parallel size."""
    found: dict[tuple, tuple] = {}
    for command in on_tab(page, tab, (c for c in page.get("commands", ()) if c.get("pd_role"))):
        shape = [(command.get(k, {}).get(flag) or {}).get("value") for k in ("options", "launcher_options")
                 for flag in ("--tensor-parallel-size", "--data-parallel-size", "--tp-size", "--dp-size")]
        if any(isinstance(v, str) and ("$" in v or "<" in v) for v in shape):
            continue  # a per-rank script's positional TP or DP ($7): its launch_online_dp.py command has the shape
        tp, dp, _ = _command_layout(command)
        settings = command_settings(command, release, name, page.get("checkpoints", ()))
        key = (command["pd_role"], (tp, dp), _setting(settings, WEIGHTS_SETTING), _setting(settings, SPEC_METHOD_SETTING),
               _setting(settings, DCP_SETTING))
        found.setdefault(key, (command["line"], settings))
    return tuple((role, layout, line, settings) for (role, layout, *_), (line, settings) in found.items())


def _names_goal(scenario: str) -> bool:
    """Whether a command's scenario names a goal another scenario's advice must not borrow (high throughput, low
    latency, long context, balanced); a row naming a deployment alone ('Single Node Mixed (Ascend 950DT)',
    DeepSeek-V4-Flash.md's A5 row) names none: its command is the tab's command of its layout."""
    return bool(re.search(r"throughput|latency|long context|long sequence|balanced", scenario_words(scenario)))


def _setting(settings, key: str) -> Any:
    """The value of a page command's setting ``key`` (``PageSetting.key``), or None when it has none."""
    return next((s.value for s in settings if s.key == key), None)


def _other_deployment(settings, weights: str | None, method: str | None) -> bool:
    """Whether a page command serves other weights than ``weights`` or drafts with another speculative ``method``
    than the plan's (None: whatever it does): another deployment of its layout or PD role."""
    served, drafts = _setting(settings, WEIGHTS_SETTING), _setting(settings, SPEC_METHOD_SETTING)
    return (weights is not None and served is not None and served != weights) or (
        method is not None and drafts is not None and drafts != method)


def _nearest_release(name: str, release: str, source: TutorialSource) -> tuple[str, Mapping | None]:
    for candidate in [release] + [r for r in sorted(source.releases(), key=Version, reverse=True)
                                  if Version(r) < Version(release)]:
        data = source.pages(candidate)
        if data and name in data:
            return candidate, data[name]
    return release, None


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


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


