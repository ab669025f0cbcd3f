"""Conformance at catalog scale: every LLM command of upstream's tutorials against optkit's plan for it.

``tests/conformance_support.py`` holds optkit to the commands of the pages ``tests/conformance/tutorials.yaml``
names, one hand-written entry per command. This module does the same for the whole catalog without
hand-written entries: it reads the committed tutorial data (``versions/tutorials/<release>.json``, extracted
from each release's tree by ``optkit tutorials extract``; no tree is read here) and, for every ``vllm serve``
command of every LLM page, derives the request from the page and the command alone:

- the model: the catalog profile whose ``tutorials:`` lists the page (a page about several models: the one
  whose name or checkpoint the command's model path ends with);
- the weights: the checkpoint the model path names (the page's weights table, the profile's
  ``checkpoints:``), else ``--quantization ascend`` read as W8A8, else bf16;
- the target: the command's hardware tab (A2 → the A2 target, A3, A5, 310P), nodes and node rank as the
  page lays the command out; a command the page writes for several tabs ('Atlas 800 A3 / Atlas 800 A2') is
  compared on each, one row per tab, and one under a scenario whose rows name one tab on that tab;
- the layout and load: TP, DP, MTP and k, prefix caching, async scheduling, FlashComm1, eager mode and dtype
  as the command sets them, the concurrency its ``--max-num-seqs`` × DP sizes, the goal its scenario names (a
  command the page places under none: the scenario row its numbers agree with, ``scenario_of``, as a plan reads
  it); a long-context scenario's ``--max-model-len`` is the request's (the context the scenario serves is its
  load).

optkit's launch for that request and the command are flattened and normalized exactly as the per-page
harness does (``conformance_support.compare``: vLLM defaults, equivalent values, one knob for an
``additional_config`` key and its env var, deployment details ignored); a value that is a placeholder on both
sides (``<port>``, ``$node0_ip`` against serve.sh's ``$LEADER_IP``) is the same deployment detail.

Each command ends in one of: **reproduced** (no difference), **explained** (every difference is a recipe
optkit adds, an entry of ``tests/conformance/disagreements.yaml``, or a class of differences in
``tests/conformance/catalog.yaml`` with its evidence), **unexplained** (the rest, listed), or **not
comparable** with the reason (no profile, no hardware tab, no optkit target for the tab, a PD role, optkit
refusing the request — its message). ``python tests/conformance_catalog.py [--write]`` prints (or writes into
docs/models.md) the coverage table.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

if __package__ in (None, ""):  # run as a script: the tests folder and the repo are importable
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]

import conformance_support as cs  # noqa: E402

from optkit.resolve.page_commands import best_owners, command_weights, model_names, model_path, path_tail  # noqa: E402
from optkit.versions.tutorial_commands import Command  # noqa: E402

REPO = cs.REPO
DOC = cs.DOC
BEGIN, END = "<!-- catalog coverage: begin -->", "<!-- catalog coverage: end -->"
COMPARED_RELEASES = ("0.23.0", "0.30.0rc2")
"""The releases whose every LLM command is compared (the issue's target); the others are counted."""
PLACEHOLDER = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\{?\d+\}?|<[^<>]+>|\bxxx+\b|\bx\.x\.x\.x\b", re.I)
SCENARIO_GOALS = (("throughput", "throughput"), ("latency", "latency"))


class NotComparable(Exception):
    """A command optkit cannot express as a request, and why."""


@dataclass
class Row:
    """One tutorial command and what became of it."""

    release: str
    page: str
    command: dict
    outcome: str
    """reproduced | explained | unexplained | not comparable"""
    reason: str = ""
    tab: str | None = None
    """the hardware tab it is compared on (a command written for several tabs has a row on each)"""
    request: dict = field(default_factory=dict)
    differences: list = field(default_factory=list)
    unexplained: list = field(default_factory=list)
    siblings: frozenset = frozenset()
    """lines of the page's other commands of this command's layout and tab (``sibling_lines``)"""
    spanned: tuple = (1, frozenset())
    """the nodes optkit's plan spans, and its layout's page lines, where the command's ranks outgrow its nodes"""
    profile: str = ""
    """the profile it is compared for where the command holds for several (``profiles_of``), else ''"""


@lru_cache(maxsize=None)
def explanations() -> list[dict]:
    """tests/conformance/catalog.yaml: classes of differences explained once, each with its evidence."""
    path = cs.DATA / "catalog.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("explained", []) if path.is_file() else []


# --------------------------------------------------------------------------- the request from page and command


def _models():
    from optkit.resolve.profile_catalog import load_models

    return load_models(REPO / "models")


@lru_cache(maxsize=None)
def _targets_by_generation() -> dict[str, str]:
    from optkit.resolve.profile_catalog import load_targets

    found: dict[str, str] = {}
    for target in sorted(load_targets(REPO / "targets").values(), key=lambda t: t.id):
        found.setdefault(target.device_generation, target.id)
    return found


def profile_for(page: str, command: dict, models) -> tuple[Any, str]:
    """The catalog profile a page's command serves, or None and why not (a page about several profiles: the one
    its model path names best, ``optkit.resolve.page_commands.best_owners``, as a plan reads the page; of equals, the
    longest Hub id; a path naming none, the one owner of the served format's checkpoints)."""
    name = page.rsplit("/", 1)[-1]
    owners = [m for m in models.values() if name in m.tutorials]
    if not owners:
        return None, "no catalog profile lists this page"
    if len(owners) == 1:
        return owners[0], ""
    tail = path_tail(model_path(command))
    best = best_owners(command, owners)  # by name, else by the one owner of the served format's checkpoints
    if len(best) > 1 and not any(n and tail.startswith(n) for m in owners for n in model_names(m)):
        return None, f"the page is about {len(owners)} profiles and the model path {command.get('model')!r} names none"
    return sorted(best, key=lambda m: -len(m.hf_id))[0], ""


def profiles_of(page: str, command: dict, models) -> tuple[Any, ...]:
    """The profiles a command is compared for: (None,) — the one ``profile_for`` gives, or none and why — except
    where its model path names none of the page's several profiles and the page holds it for every one of them, as a
    plan reads it (``page_commands.serves``: every owner's page command): then each, one row per profile (Gemma4.md
    0.30.0rc2 :80 and :96, ``/root/.cache/path/to/gemma4``, for its dense and its MoE model alike, :24-29)."""
    if profile_for(page, command, models)[0] is not None:
        return (None,)
    name = page.rsplit("/", 1)[-1]
    owners = [m for m in models.values() if name in m.tutorials]
    best = best_owners(command, owners)
    return tuple(sorted(best, key=lambda m: m.id)) if len(owners) > 1 and len(best) == len(owners) else (None,)


def quantization_for(command: dict, page_data: dict, profile) -> tuple[str, str]:
    """The weight format the command serves and how it was read (``optkit.resolve.page_commands.command_weights``:
    the page's weights table's checkpoints, then the profile's)."""
    return command_weights(command, [*page_data.get("checkpoints", ()),
                                     *({"id": c.id, "quantization": c.quantization} for c in profile.checkpoints)])


def tabs_of(page_data: dict, command: dict) -> tuple[str | None, ...]:
    """The hardware tabs a command is compared on: every tab it holds for (``page_tables.command_tabs``: its
    own, each of 'Atlas 800 A3 / Atlas 800 A2', or the one its scenario's rows name); (None,) when none."""
    from optkit.resolve.page_tables import command_tabs

    return command_tabs(page_data, command) or (None,)


def goal_of(command: dict, page_data: dict | None = None) -> str | None:
    """The goal the command's scenario names; a follower node's command (node rank > 0) that names none takes its
    leader's: the page's node-0 command of the same layout and tab under the same heading (GLM5.md's A3 two-node
    deployment places "High-Throughput" on node 0's command only)."""
    scenario = (command.get("scenario") or "").lower()
    if not scenario and page_data and (command.get("node_rank") or 0) > 0:
        from optkit.resolve.page_values import command_layout

        heading = re.sub(r" #\d+$", "", command.get("where") or "")
        leader = next((c for c in page_data.get("commands", ()) if (c.get("node_rank") or 0) == 0
                       and c.get("scenario") and re.sub(r" #\d+$", "", c.get("where") or "") == heading
                       and command_layout(c) == command_layout(command) and c.get("hardware") == command.get("hardware")
                       and c.get("pd_role") == command.get("pd_role")), None)
        scenario = (leader or {}).get("scenario", "").lower()
    return next((goal for word, goal in SCENARIO_GOALS if word in scenario), None)


def request_for(release: str, page: str, command: dict, profile, target: str, quantization: str,
                page_data: dict | None = None, hardware: str | None = None) -> dict:
    """The optkit request a command implies (module docstring)."""
    from optkit.resolve.request import Request

    opts = {k: v["value"] for k, v in command.get("options", {}).items()}
    wrapper = {k: v["value"] for k, v in command.get("launcher_options", {}).items()}  # launch_online_dp.py
    opts.setdefault("--tensor-parallel-size", wrapper.get("--tp-size"))
    opts.setdefault("--data-parallel-size", wrapper.get("--dp-size"))
    speculative = {k.split(".", 1)[1]: v for k, v in opts.items() if k.startswith("--speculative-config.")}
    shaped = {flag: opts.get(flag) for flag in ("--tensor-parallel-size", "--data-parallel-size")}
    if any(_placeholder(v) for v in shaped.values()):
        raise NotComparable("its TP or DP is a script's positional argument ($N): the launch_online_dp.py command "
                            "that passes it is compared instead")
    pp = _int(opts.get("--pipeline-parallel-size", wrapper.get("--pp-size")), 1)
    dp = _int(opts.get("--data-parallel-size"), 1)
    request: dict[str, Any] = {
        "model": profile.id, "target": target, "vllm_ascend_version": release,
        "tp": _int(opts.get("--tensor-parallel-size"), 1), "dp": dp,
        "prefix_caching": _flag(opts.get("--enable-prefix-caching"), False),
        "async_scheduling": _flag(opts.get("--async-scheduling"), True),
        "enforce_eager": _flag(opts.get("--enforce-eager"), False),
        "flashcomm1": _flag(opts.get("--additional-config.enable_flashcomm1"), False)
        or (command.get("env", {}).get("VLLM_ASCEND_ENABLE_FLASHCOMM1", {}).get("value") == "1"),
    }
    if pp > 1:  # a PD prefiller's pipeline is the pair's --prefill-pp (partner_shape), one server's --pp
        request["prefill_pp" if command.get("pd_role") == "prefill" else "pp"] = pp
    if "quantization" in Request.model_fields:
        request["quantization"] = quantization
    else:
        request["quantized"] = quantization != "bf16"
    method = str(speculative.get("method", "")).lower()
    if method:
        method = "mtp" if "mtp" in method else method
        if method not in ("mtp", "eagle3", "suffix", "dspark", "dflash"):
            raise NotComparable(f"speculative method {speculative.get('method')!r} (optkit plans mtp, eagle3, suffix, "
                                "dspark, dflash)")
        request["spec_method"] = method
        if method in ("eagle3", "dflash"):  # a page's placeholder path ($EAGLE3_WEIGHT_PATH) stands in as <EAGLE3_WEIGHT_PATH>:
            draft = str(speculative.get("model") or "")  # a placeholder still, which optkit takes as written
            request["draft_model"] = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"<\1>", draft)
        if speculative.get("num_speculative_tokens"):
            request["num_speculative_tokens"] = _int(speculative["num_speculative_tokens"], 1)
    if "--dtype" in opts and opts["--dtype"] in _served_dtypes(target):
        request["dtype"] = opts["--dtype"]  # one the tab's SoC does not serve is a difference, not a request
    seqs = _int(opts.get("--max-num-seqs"), 0)
    if seqs:
        request["concurrency"] = [seqs * dp]
    if command.get("nodes") and command["nodes"] > 1:
        request["nodes"] = command["nodes"]
    if _int(opts.get("--decode-context-parallel-size"), 1) > 1:  # the layout splits each sequence's KV cache
        request["dcp"] = _int(opts["--decode-context-parallel-size"], 1)
    if _int(opts.get("--prefill-context-parallel-size"), 1) > 1:  # TP × PCP ranks per DP group
        request["pcp"] = _int(opts["--prefill-context-parallel-size"], 1)
    scenario = scenario_of(command, page_data, hardware)
    goal = next((goal for word, goal in SCENARIO_GOALS if word in scenario), None)
    if goal:
        request["goal"] = goal
    if "long context" in scenario and _int(opts.get("--max-model-len"), 0):
        request["max_model_len"] = _int(opts["--max-model-len"], 0)  # the context the scenario is about: the load
    return request


def scenario_of(command: dict, page_data: dict | None, hardware: str | None) -> str:
    """The scenario a command implements (lower case; '' none): the one the page places it under, its leader's
    (``goal_of``), else the scenario row of its tab whose numbers it agrees with, as a plan reads the page
    (``optkit.resolve.page_tables.agreeing_scenario``: the one reading both sides share)."""
    from optkit.resolve.page_tables import agreeing_scenario

    scenario = (command.get("scenario") or "").lower()
    if not scenario and goal_of(command, page_data):
        return next(word for word, goal in SCENARIO_GOALS if goal == goal_of(command, page_data))
    if not scenario and page_data and hardware and command.get("line"):
        scenario = agreeing_scenario(page_data, command["line"], hardware).lower()
    return scenario


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return str(value).lower() not in ("false", "0", "")


# --------------------------------------------------------------------------- one command


def _command(command: dict) -> Command:
    from optkit.resolve.page_values import plain

    return Command(
        where=command["where"], line=command["line"], model=command.get("model") or "",
        options=_p2p_unwrapped({k: (plain(v["value"]), v["line"]) for k, v in command.get("options", {}).items()}),
        env={k: (v["value"], v["line"]) for k, v in command.get("env", {}).items()},
        problems=list(command.get("problems", ())))


_KV = "--kv-transfer-config."


def _p2p_unwrapped(options: dict) -> dict:
    """A command's flags with a MultiConnector's P2P connector in its place: the entry of its ``connectors`` that
    names a P2P connector optkit writes (optkit.versions.pd PAGE_CONNECTORS) is compared, key by key, with optkit's
    connector, and the list keeps the other entries (the KV pool's AscendStoreConnector, which optkit does not
    deploy: tests/conformance/catalog.yaml explains it per page). Before, the wrapper's name and the whole list were
    two differences, and the P2P connector's shapes, port and engine keys inside it were never compared."""
    from optkit.versions.pd import PAGE_CONNECTORS

    connectors = options.get(_KV + "kv_connector_extra_config.connectors")
    if options.get(_KV + "kv_connector", (None,))[0] != "MultiConnector" or connectors is None \
            or not isinstance(connectors[0], (list, tuple)):
        return options
    entries, line = connectors
    p2p = next((e for e in entries if isinstance(e, Mapping) and e.get("kv_connector") in PAGE_CONNECTORS), None)
    if p2p is None:
        return options
    unwrapped = {k: v for k, v in options.items() if k != _KV + "kv_connector"}
    others = [e for e in entries if e is not p2p]
    if others:
        unwrapped[_KV + "kv_connector_extra_config.connectors"] = (others, line)
    else:
        del unwrapped[_KV + "kv_connector_extra_config.connectors"]

    def put(prefix: str, value) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                put(f"{prefix}.{key}", inner)
        else:
            unwrapped.setdefault(prefix, (value, line))  # the wrapper's own keys (its kv_role) stand

    for key, value in p2p.items():
        put(_KV + key, value)
    unwrapped[_KV + "kv_connector"] = (p2p["kv_connector"], line)
    return unwrapped


def _placeholder(value: Any) -> bool:
    return isinstance(value, str) and bool(PLACEHOLDER.search(value))


def carried_command(page_data: dict, result, siblings: frozenset, entry: dict, release: str) -> tuple[int, dict]:
    """(line, entries) of the page's other command of this layout whose settings the plan carries (the sibling
    holding every line its page settings cite: Dots3-Note.md's text-only command for its image and audio forms of
    one TP 16 layout), its entries flattened as a tutorial side (the release's additional_config/env knobs as one);
    (0, {}) when the plan carries none of the siblings."""
    from optkit.versions.releases import load_release

    advice = result.page_advice
    if advice is None or not advice.settings:
        return 0, {}
    said = {s.source.line for s in advice.settings}  # the lines of the settings the plan carries

    def lines_of(c: dict) -> set:
        return {c["line"]} | {e.get("line", 0) for part in ("options", "env") for e in c.get(part, {}).values()}

    other = next((c for c in page_data.get("commands", ()) if c["line"] in siblings and said <= lines_of(c)), None)
    if other is None:
        return 0, {}
    line = other["line"]
    env_of = dict(load_release(release).knobs.additional_config.env)
    return line, cs._one_knob(cs.tutorial_side(_command(other), entry), env_of)


def explained_by(d: cs.Difference, siblings: frozenset = frozenset(), command: dict | None = None,
                 spanned: tuple[int, frozenset] = (1, frozenset()), carried: tuple[int, dict] = (0, {})) -> str:
    """What explains a difference: a recipe, a per-command disagreement, a class of differences; '' if nothing.
    ``siblings``: the lines of the page's other commands of the compared command's layout on its tab, where
    optkit's value may come from (``sibling_lines``); ``command``: the compared command (a class may hold only
    for the KV connector it names or an option it sets; a decoder's step is read off it); ``spanned``: the nodes
    optkit's plan spans where the command's ranks do not fit the nodes the page writes it for, and the lines of the
    page's command of that layout (``spanned_lines``)."""
    if d.recipe_added:
        return f"recipe {d.source}"
    if d.page_added:
        return f"the page's tuned command {d.source}"
    if carried[0] and cs._same(carried[1].get(d.key, (d.optkit_value,))[0] if d.source in ("", "unset")
                               else carried[1].get(d.key, (cs.ABSENT,))[0], d.optkit_value):
        return (f"the page's own command of this layout at :{carried[0]}, which optkit carries (one of the page's "
                "commands of a layout: its scenario's, else the first on the tab), has optkit's value here")
    if command and (redundant := _redundant_max_capture(d, command)):
        return redundant
    page, _, line = (d.source or "").removeprefix("page:").rpartition(":")
    if (d.source or "").startswith("page:") and page == d.tutorial and line.isdigit() and int(line) in siblings:
        return (f"the page's own command of this layout at :{line} (optkit carries one of the page's commands of a "
                "layout: its scenario's, else the first on the tab)")
    if (d.source or "").startswith("page:") and page == d.tutorial and line.isdigit() and int(line) in spanned[1]:
        return (f"the page writes this command for one node, but its ranks need more devices than a node of the tab "
                f"has: optkit's plan spans {spanned[0]} nodes and carries the page's own command of that layout at "
                f":{line}")
    if cs._entry_for(d) is not None:
        return "disagreements.yaml"
    if (unread := _unread_by_release(d)):
        return unread
    if command and (short := _short_decode_step(d, command) or _captures_full_step(d, command)):
        return short
    if _yarn_length(d):
        return ("the page's YaRN override with max_position_embeddings = original × factor added: vLLM 0.30.0 reads a "
                "YaRN config's length as already scaled (optkit.resolve.context_length.scaled_overrides)")
    for n, entry in enumerate(explanations()):
        if _matches(entry, d, command or {}):
            return f"catalog.yaml #{n + 1}"
    return ""


def _redundant_max_capture(d: cs.Difference, command: dict) -> str:
    """The page's ``max_cudagraph_capture_size`` where it is the largest of its own ``cudagraph_capture_sizes``:
    vLLM takes the largest size of the list as the maximum and refuses a different one beside it
    (vllm/config/vllm.py:2370-2393 in vLLM 0.30.0), so the key restates the list; '' otherwise."""
    if d.key != "--compilation-config.max_cudagraph_capture_size" or d.optkit_value is not cs.ABSENT:
        return ""
    sizes = (command.get("options", {}).get("--compilation-config.cudagraph_capture_sizes") or {}).get("value")
    if isinstance(sizes, str):
        sizes = [int(n) for n in re.findall(r"\d+", sizes)]
    if not sizes or not cs._same(str(max(int(n) for n in sizes)), str(d.tutorial_value)):
        return ""
    return (f"the largest of the page's own cudagraph_capture_sizes ({max(int(n) for n in sizes)}), which vLLM takes "
            "as the maximum where sizes are given (vllm/config/vllm.py:2370-2393 in vLLM 0.30.0)")


def _unread_by_release(d: cs.Difference) -> str:
    """An ``--additional-config`` key the page sets where its release does not read it (``optkit.versions.knobs
    .unread_at`` on the release's committed knobs, scanned from its tree): optkit leaves it out
    (``optkit.resolve.settings._unread``); '' otherwise."""
    from optkit.versions.knobs import unread_at
    from optkit.versions.onrelease import release_view

    if not d.key.startswith("--additional-config.") or d.optkit_value is not cs.ABSENT:
        return ""
    found = unread_at(release_view(d.release).data.knobs.additional_config, d.key.split(".", 1)[1])
    return "" if found is None else (f"vllm-ascend {d.release} does not read it there (unknown keys "
                                     f"{found[1].unknown_keys}): optkit leaves it out")


def _decoder_step(command: dict, colocated: bool = False) -> tuple[int, int, int]:
    """A PD decoder command's (max-num-seqs, full decode step max-num-seqs × (1 + k), --max-num-batched-tokens);
    with ``colocated``, a server that prefills and decodes alike too (no PD role); zeros where it does not say (or
    is no decoder)."""
    if command.get("pd_role") != "decode" and (not colocated or command.get("pd_role") is not None):
        return 0, 0, 0
    options = {k: v.get("value") for k, v in command.get("options", {}).items()}
    seqs = _int(options.get("--max-num-seqs"), 0)
    k = _int(options.get("--speculative-config.num_speculative_tokens"), 0)
    return seqs, seqs * (1 + k), _int(options.get("--max-num-batched-tokens"), 0)


def _short_decode_step(d: cs.Difference, command: dict) -> str:
    """A PD decoder whose page caps --max-num-batched-tokens below its full decode step, max-num-seqs × (1 + k),
    where optkit's sched-capacity-for-load keeps the full step ('' otherwise)."""
    seqs, step, _ = _decoder_step(command)
    if d.key != "--max-num-batched-tokens" or d.source != "sched-capacity-for-load":
        return ""
    page, mine = _int(d.tutorial_value, 0), _int(d.optkit_value, 0)
    if not (0 < page < step <= mine):
        return ""
    per = step // seqs
    return (f"the page caps its decoder's step at {page} tokens, below its {step} (max-num-seqs × (1 + k)): vLLM's "
            "scheduler spends that budget on its running requests' 1 + k tokens each (vllm/v1/core/sched/scheduler.py"
            ":581, :612-665 in vLLM 0.30.0; :360, :410 in 0.23.0), so at most "
            f"{page // per} of its sequences decode per step; optkit keeps the full step (sched-capacity-for-load's "
            "floor). The page gives no reason; neither is measured")


def _captures_full_step(d: cs.Difference, command: dict) -> str:
    """A PD decoder, or a server without a PD role, whose page captures graphs only up to a size below its full
    decode step, max-num-seqs × (1 + k) (its step capped below that too, or not: GLM5.2.md's 0.23.0 A2 decoder steps
    768 tokens and captures up to 384; Qwen-VL-Dense.md's 0.30.0rc2 server runs 128 sequences and captures up to
    32), where optkit's capture ladder reaches the full step: the capture recipes' effective_when (the page's list
    stops short of the load's decode step); '' otherwise."""
    _, step, budget = _decoder_step(command, colocated=True)
    who = "decoder" if command.get("pd_role") == "decode" else "server"
    if d.key != "--compilation-config.cudagraph_capture_sizes" or not str(d.source).startswith("cudagraph-capture-sizes-"):
        return ""
    page = [n for n in d.tutorial_value or () if isinstance(n, int)] if isinstance(d.tutorial_value, list) else []
    mine = [n for n in d.optkit_value or () if isinstance(n, int)] if isinstance(d.optkit_value, list) else []
    if not (page and mine and max(page) < max(mine) <= step):
        return ""
    capped = f"caps its step at {budget} tokens and " if 0 < budget < step else ""
    return (f"the page's {who} {capped}captures graphs up to {max(page)} rows; optkit keeps the full step, {step} "
            f"rows (max-num-seqs × (1 + k)), and captures up to {max(mine)}: where a page's list stops short of the "
            "load's largest decode step, the capture recipes' sizes apply (their effective_when, "
            "page.command_capture_sizes_max). Neither list is measured")


def _yarn_length(d: cs.Difference) -> bool:
    """Whether optkit's ``--hf-overrides`` is the page's with the YaRN length its release's vLLM needs stated."""
    import json

    from optkit.resolve.context_length import scaled_overrides
    from optkit.resolve.facts import paired_vllm
    from optkit.versions.onrelease import release_view

    if d.key != "--hf-overrides" or not isinstance(d.tutorial_value, str) or not isinstance(d.optkit_value, str):
        return False
    scaled = scaled_overrides(d.tutorial_value, paired_vllm(release_view(d.release)))
    return scaled is not None and json.loads(scaled) == json.loads(d.optkit_value.strip("'"))


def _matches(entry: dict, d: cs.Difference, command: dict) -> bool:
    if "key_pattern" in entry:
        if not re.match(entry["key_pattern"], d.key):
            return False
    elif entry["key"] != d.key:
        return False
    if "tutorial_value" in entry and not cs._same(entry["tutorial_value"], d.tutorial_value):
        return False
    if "optkit_value" in entry and not cs._same(entry["optkit_value"], d.optkit_value):
        return False
    if "tutorial_value_in" in entry and not any(cs._same(v, d.tutorial_value) for v in entry["tutorial_value_in"]):
        return False
    if "pages" in entry and d.tutorial.rsplit("/", 1)[-1] not in entry["pages"]:
        return False
    if "command_option" in entry and entry["command_option"] not in command.get("options", {}):
        return False
    return "pd_connector" not in entry or entry["pd_connector"] in _connectors(command)


def _connectors(command: dict) -> set:
    """The KV connectors a command names: its own and, for a MultiConnector, the P2P one inside it
    (``_p2p_unwrapped``): a class of one connector holds for a pool that wraps it (GLM5.3.md's §5.3)."""
    options = command.get("options", {})
    named = {options.get(_KV + "kv_connector", {}).get("value")}
    unwrapped = _p2p_unwrapped({k: (v["value"], v["line"]) for k, v in options.items()})
    return named | {unwrapped.get(_KV + "kv_connector", (None,))[0]}


def compare_command(release: str, page: str, page_data: dict, command: dict, models, workspace,
                    hardware: str | None, for_profile: Any = None) -> Row:
    """One command's outcome on one of its hardware tabs (for ``for_profile`` where it holds for several:
    ``profiles_of``)."""
    from optkit.bundle.launch import Launch
    from optkit.bundle.pd import RoleLaunch
    from optkit.errors import OptkitError
    from optkit.resolve.plan import plan
    from optkit.resolve.request import Request

    def row(outcome: str, reason: str = "", **extra) -> Row:
        return Row(release, page, command, outcome, reason, tab=hardware, profile=getattr(for_profile, "id", ""), **extra)

    command = on_one_device(command)
    if command.get("launcher") not in ("vllm serve", "launch_online_dp.py"):
        return row("not comparable", f"launched by {command.get('launcher')} (a wrapper optkit does not emit)")
    role = command.get("pd_role")
    if command.get("problems"):
        return row("not comparable", UNREAD + command["problems"][0])
    profile, why = (for_profile, "") if for_profile is not None else profile_for(page, command, models)
    if profile is None:
        return row("not comparable", why)
    if hardware is None:
        return row("not comparable", "no hardware tab")
    target = _targets_by_generation().get(hardware)
    if target is None:
        return row("not comparable", f"no optkit target for the {hardware} tab")
    quantization, _ = quantization_for(command, page_data, profile)
    try:
        request = request_for(release, page, command, profile, target, quantization, page_data, hardware)
    except NotComparable as exc:
        return row("not comparable", str(exc))
    if role:  # one role of a PD deployment: a --pd plan of this command's instance shape, its role's launch
        request["pd"] = "1:1"
        request.pop("nodes", None)
        request.update(partner_shape(command, role, (request["tp"], request["dp"])))
        if "prefill_tp" in request:  # a pair of two shapes: the page sizes DCP per role, each command its own
            own, other = request.pop("dcp", None), partner_dcp(page_data, command, hardware, request)
            mine, theirs = ("prefill_dcp", "dcp") if role == "prefill" else ("dcp", "prefill_dcp")
            request.update({k: v for k, v in ((mine, own), (theirs, other)) if v and v > 1})
    try:
        result = plan(Request(**request), workspace)
        launch = RoleLaunch(result, workspace, role) if role else Launch(result, workspace)
    except (OptkitError, ValueError) as exc:  # ValueError: pydantic's ValidationError of a request field
        return row("not comparable", f"optkit refuses: {str(exc).splitlines()[0][:160]}", request=request)
    entry = {"node_rank": 0 if role else command.get("node_rank") or 0, **({"role": role} if role else {})}
    _, differences = cs.compare(release, page.rsplit("/", 1)[-1], _command(command), entry, result, launch)
    differences = [d for d in differences if not (_placeholder(d.tutorial_value) and _placeholder(d.optkit_value))]
    siblings = sibling_lines(page_data, command, hardware)
    spanned = spanned_lines(page_data, command, hardware, result.layout.nodes)
    carried = carried_command(page_data, result, siblings, entry, release)
    unexplained = [d for d in differences if not explained_by(d, siblings, command, spanned, carried)]
    outcome = "reproduced" if not differences else "unexplained" if unexplained else "explained"
    return row(outcome, request=request, differences=differences, unexplained=unexplained, siblings=siblings,
               spanned=spanned)


@lru_cache(maxsize=None)
def _served_dtypes(target: str) -> tuple[str, ...]:
    """The dtypes optkit's ``target`` serves (``Target.serving_dtypes``: float16 alone on Atlas 300I DUO)."""
    from optkit.resolve.profile_catalog import find_target, load_targets

    return tuple(find_target(load_targets(REPO / "targets"), target).serving_dtypes or ("bfloat16", "float16", "float32"))


def on_one_device(command: dict) -> dict:
    """A script whose TP and DP are positional arguments no run passes, where its section says the server runs on
    one NPU (the extraction's ``devices: 1``: Qwen-VL-Dense.md's "start the vLLM server on single-NPU", 0.30.0rc2
    :199): TP × DP is 1, so both are 1, filled in as the page's statement gives them; any other command as it is."""
    options = command.get("options", {})
    flags = ("--tensor-parallel-size", "--data-parallel-size")
    if command.get("devices") != 1 or not any(re.fullmatch(r"\$\d", str((options.get(f) or {}).get("value", "")))
                                              for f in flags):
        return command
    filled = {f: {**options[f], "value": "1"} for f in flags if f in options}
    return {**command, "options": {**options, **filled}}


def partner_shape(command: dict, role: str, own: tuple[int, int]) -> dict:
    """The request fields of a PD role command whose connector names a partner role of another shape: its
    ``kv_connector_extra_config`` gives both roles' TP and DP (the decode's as ``tp``/``dp``, the prefill's as
    ``prefill_tp``/``prefill_dp``, its ``pp_size`` as ``prefill_pp``; a MultiConnector's in its P2P connector's entry); {} when it names none, or names this command's own role otherwise than the
    command runs it (the page contradicting itself: its own shape is compared, both roles alike)."""
    options = command.get("options", {})
    nested = options.get("--kv-transfer-config.kv_connector_extra_config.connectors", {}).get("value")
    inner = next((c.get("kv_connector_extra_config", {}) for c in nested if isinstance(c, Mapping)
                  and {"prefill", "decode"} <= set(c.get("kv_connector_extra_config", {}))), {}) \
        if isinstance(nested, (list, tuple)) else {}  # a MultiConnector's: the shapes sit in its P2P connector's entry

    def size(which: str, key: str) -> int | None:
        entry = options.get(f"--kv-transfer-config.kv_connector_extra_config.{which}.{key}")
        value = _int(entry.get("value") if entry else (inner.get(which) or {}).get(key), 0)
        return value or None

    shapes = {which: (size(which, "tp_size"), size(which, "dp_size")) for which in ("prefill", "decode")}
    pipeline = size("prefill", "pp_size") or 1  # the prefiller's stages (the decoders run PP 1)
    if any(None in shape for shape in shapes.values()) or shapes[role] != own \
            or (shapes["prefill"] == shapes["decode"] and pipeline == 1):
        return {}
    (ptp, pdp), (dtp, ddp) = shapes["prefill"], shapes["decode"]
    return {"tp": dtp, "dp": ddp, "prefill_tp": ptp, "prefill_dp": pdp,
            **({"prefill_pp": pipeline} if pipeline > 1 else {})}


def partner_dcp(page_data: dict, command: dict, hardware: str | None, request: dict) -> int | None:
    """The decode context parallel size of the PD partner of ``command`` (its other role, of the shape the
    connector names: ``request``'s ``tp``/``dp`` for a decoder, ``prefill_tp``/``prefill_dp`` for a prefiller),
    as the page's command of that role and shape on the tab sets it; None when the page has no such command."""
    from optkit.resolve.page_values import command_layout

    role = "decode" if command.get("pd_role") == "prefill" else "prefill"
    shape = (request["tp"], request["dp"]) if role == "decode" else (request["prefill_tp"], request["prefill_dp"])
    sizes = {_int((other.get("options", {}).get("--decode-context-parallel-size") or {}).get("value"), 1)
             for other in page_data.get("commands", ()) if other.get("pd_role") == role
             and hardware in tabs_of(page_data, other) and command_layout(other)[:2] == shape}
    return sizes.pop() if len(sizes) == 1 else None


def spanned_lines(page_data: dict, command: dict, hardware: str | None, nodes: int) -> tuple[int, frozenset]:
    """(nodes, lines) where the page writes ``command`` for fewer nodes than its ranks need on this tab (GLM4.x.md's
    single-node TP8 DP2, 16 devices, compared on A2's 8 per node): optkit's plan spans ``nodes`` and carries the
    page's command of that layout, whose lines are these; (nodes, frozenset()) otherwise."""
    from optkit.resolve.page_values import command_layout

    if nodes <= command_layout(command)[2] or command.get("pd_role"):
        return nodes, frozenset()
    return nodes, sibling_lines(page_data, {**command, "nodes": nodes}, hardware) - {command["line"]}


def sibling_lines(page_data: dict, command: dict, hardware: str | None) -> frozenset:
    """Every line (its own, its options', its env's) of the page's other commands of ``command``'s layout (TP, DP,
    nodes) and PD role on the same tab: where a page runs one layout twice with different values (an introductory
    deployment and a tuned scenario), optkit carries one of them and the other's row differs from the page itself."""
    from optkit.resolve.page_values import command_layout

    layout = (command_layout(command), command.get("pd_role"))
    lines: set[int] = set()
    for other in page_data.get("commands", ()):
        if other is command or (command_layout(other), other.get("pd_role")) != layout:
            continue
        if hardware not in tabs_of(page_data, other):
            continue
        lines.add(other["line"])
        lines.update(e.get("line", 0) for part in ("options", "env") for e in other.get(part, {}).values())
    return frozenset(lines)


# --------------------------------------------------------------------------- all of it


def llm_commands(release: str):
    from optkit.versions.tutorial_data import load

    data = load(release)
    for name in sorted(data.pages):
        page = data.pages[name]
        if page["kind"] == "llm" and name.startswith("models/"):
            for command in page["commands"]:
                yield name, page, command


@lru_cache(maxsize=None)
def release_rows(release: str) -> tuple[Row, ...]:
    from optkit.resolve.plan import load_workspace

    workspace, models = load_workspace(), _models()
    rows = [compare_command(release, name, page, command, models, workspace, tab, profile)
            for name, page, command in llm_commands(release) for tab in tabs_of(page, command)
            for profile in profiles_of(name, command, models)]
    return tuple(through_runs(row, rows) for row in rows)


POSITIONAL = "its TP or DP is a script's positional argument"
UNREAD = "the reader could not read it: "
_WORST = ("unexplained", "explained", "reproduced")


def through_runs(row: Row, rows: list[Row]) -> Row:
    """A run_dp_template.sh ``vllm serve`` whose TP or DP is a positional argument, compared through the
    ``launch_online_dp.py`` runs that start it on its tab: each run is this very line with $1…$7 filled in
    (``tutorial_pages._launcher``), compared flag by flag. Its outcome is the worst of theirs (unexplained before
    explained before reproduced), with their lines; not comparable, for their reason, when none of them is
    comparable; a template no run starts stays not comparable, saying so.

    So is a template the reader cannot read alone but its runs read through their wrappers (GLM5.3-Flash.md
    0.30.0rc2 :591, whose ``${SERVER_ROLE_ARGS:-}`` the P0 and P1 wrappers set: ``tutorial_launchers.Scripts``)."""
    runs = [r for r in rows if r.page == row.page and r.tab == row.tab and r.profile == row.profile
            and r.command.get("template_line") == row.command["line"]]
    wrapped = row.reason.startswith(UNREAD) and runs and all(r.command.get("wrapper") for r in runs)
    if row.outcome != "not comparable" or not (row.reason.startswith(POSITIONAL) or wrapped):
        return row
    compared = [r for r in runs if r.outcome != "not comparable"]
    if not runs:
        return replace(row, reason=f"{POSITIONAL} ($N) and no launch_online_dp.py run on its tab starts it")
    if not compared:  # its runs are not comparable: the script is not, for their reason
        return replace(row, reason=f"{_reason_class(runs[0].reason)}, in the launch_online_dp.py runs that start it")
    lines = ", ".join(f":{r.command['line']}" for r in compared)
    outcome = next(o for o in _WORST if any(r.outcome == o for r in compared))
    return Row(row.release, row.page, row.command, outcome, f"through the launch_online_dp.py runs that start it ({lines})",
               row.tab, request=compared[0].request, profile=row.profile,
               unexplained=[d for r in compared for d in r.unexplained])


def coverage_table(releases: list[str]) -> str:
    """docs/models.md's coverage table: per release, LLM commands by outcome, and the reasons not compared."""
    from optkit.versions.tutorial_data import load

    lines = ["| release | LLM pages | LLM commands (× tabs, × profiles) | reproduced | explained | unexplained | not comparable |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    reasons: Counter = Counter()
    for release in releases:
        data = load(release)
        pages = sum(1 for n, p in data.pages.items() if p["kind"] == "llm" and n.startswith("models/"))
        if release not in COMPARED_RELEASES:
            count = sum(len(tabs_of(page, command)) for _, page, command in llm_commands(release))
            lines.append(f"| {release} | {pages} | {count} | – | – | – | extracted, not compared |")
            continue
        rows = release_rows(release)
        by = Counter(r.outcome for r in rows)
        lines.append(f"| {release} | {pages} | {len(rows)} | {by['reproduced']} | {by['explained']} | "
                     f"{by['unexplained']} | {by['not comparable']} |")
        reasons.update((release, _reason_class(r.reason)) for r in rows if r.outcome == "not comparable")
    lines += ["", "| release | not comparable because | commands |", "| --- | --- | --- |"]
    lines += [f"| {release} | {reason} | {n} |" for (release, reason), n in sorted(reasons.items())]
    keys: Counter = Counter(d.key for release in releases if release in COMPARED_RELEASES
                            for r in release_rows(release) for d in r.unexplained)
    lines += ["", "| unexplained entry | differences (both compared releases) |", "| --- | --- |"]
    lines += [f"| `{key}` | {n} |" for key, n in sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines) + "\n"


def _reason_class(reason: str) -> str:
    if reason.startswith(UNREAD) and reason.endswith("a fragment of a command, not read as one"):
        return "a fragment of a command (`...` for flags the page writes elsewhere)"
    return reason.split(": ", 1)[0] if reason.startswith(("optkit refuses", "the reader")) else reason


def _tab_shown(release: str, row: Row) -> str:
    """The row's tab, with the page line that places it where the command's own context names none
    (``optkit.resolve.page_hardware``: 'A3 by :29 (the page's hardware statement)')."""
    from optkit.resolve.page_hardware import placements, tab_overruled
    from optkit.resolve.page_tables import scenario_words
    from optkit.versions.tutorial_data import load

    command, shown = row.command, str(row.tab)
    if row.tab is not None and command.get("hardware"):
        overruled = tab_overruled(load(release).pages[row.page], command)
        shown = overruled.note() if overruled else shown
    elif row.tab is not None and not command.get("hardware_families") and not scenario_words(command.get("scenario")):
        shown = next((p.note() for p in placements(load(release).pages[row.page], command) if p.family == row.tab),
                     shown)
    return f"{shown}, for {row.profile}" if row.profile else shown


def main(argv: list[str]) -> int:
    from optkit.versions.tutorial_data import releases

    rendered = coverage_table(releases())
    if "--write" in argv:
        text = DOC.read_text(encoding="utf-8")
        DOC.write_text(cs._replace(text, BEGIN, END, rendered), encoding="utf-8")
    else:
        sys.stdout.write(rendered)
    if "--unexplained" in argv:
        for release in COMPARED_RELEASES:
            for r in release_rows(release):
                for d in r.unexplained:
                    sys.stdout.write(f"{release} {r.page}:{d.line} [{d.where}] ({r.tab}) {d.key}: tutorial "
                                     f"{cs._shown(d.tutorial_value)} optkit {cs._shown(d.optkit_value)} "
                                     f"({d.source or 'unset'})\n")
    if "--refused" in argv:
        for release in COMPARED_RELEASES:
            for r in release_rows(release):
                if r.outcome == "not comparable":
                    sys.stdout.write(f"{release} {r.page}:{r.command['line']} ({r.tab}) {r.reason}\n")
    if "--rows" in argv:  # every row's outcome: diff two runs to see what a change moved
        for release in COMPARED_RELEASES:
            for r in release_rows(release):
                keys = " ".join(sorted(d.key for d in r.differences))
                sys.stdout.write(f"{release} {r.page}:{r.command['line']} ({_tab_shown(release, r)}) {r.outcome} "
                                 f"{r.reason or keys}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
