"""The hardware family of a page command no tab, heading or label places, from what the page states.

``page_tables.command_tabs`` places a command by its own tab or context first, then by the scenario rows it
stands under. What is left (Hy3-preview.md's one command, Qwen3-VL-235B-A22B-Instruct.md's PD nodes,
DeepSeek-R1.md's multi-node DP scripts, a ``launch_online_dp.py`` template) is placed here, by the page's
hardware statements (``optkit.versions.tutorial_hardware``), each placement with the line it rests on:

1. a ``run_dp_template.sh`` template runs where the ``launch_online_dp.py`` runs that start it run, when
   they all run on one family; else it is placed as a command of at least TP ranks per node (launch_online_dp.py
   gives each DP rank the devices ``i × TP`` … ``(i + 1) × TP − 1`` of its own node: a TP group never spans nodes);
2. the statements of the command's own section, then of each enclosing section outwards, then of the whole
   page: the first of these scopes that names a family the command can run on decides;
3. a family can run the command when one of its nodes holds the command's ranks per node (TP × PCP × PP ×
   DP over its nodes; ``NODE_DEVICES``): a 16-rank node is an A3's, not an A2's; and it serves the command's dtype
   (``SERVING_DTYPES``: an Atlas 300I DUO runs a command with ``--dtype float16``, not one left to bfloat16);
4. when several families remain, the one a statement of alternatives gives the command's node count
   ("1 Atlas 800 A3 (64GB × 16) or 2 Atlas 800 A2 (64GB × 8)" and a two-node script: A2); else none.

Where these place it on no one family, the command holds for **each** family the page states for it alike
(``placements``), as a command written under an "Atlas 800 A3 / Atlas 800 A2" tab holds for both: the families the
weights table offers the checkpoint it serves on, where its model path names one (Qwen3.5-27B-Qwen3.6-27B.md
0.30.0rc2: the accuracy command :823 serves ``Eco-Tech/Qwen3.5-27B-w8a8-mtp``, offered on "1 Atlas 800 A3 … or 1
Atlas 800 A2 … or Atlas 300I DUO", :24); else the families the first scope of step 2 names that can run it
(Gemma4.md: "supported on Atlas A2, Atlas A3, and 950PR&950DT Products", :9). Every one of them is named, none is
picked. A command the page states no hardware for keeps no tab (the coverage table's "no hardware tab"): nothing
is guessed.
"""

from __future__ import annotations

from typing import Mapping

from optkit.resolve.page_commands import model_path, path_tail
from optkit.resolve.page_values import command_layout, leading_int
from optkit.value import valueclass

SEPARATOR = " › "
"""How the tutorial data joins a heading path (``optkit.versions.tutorial_commands.SEPARATOR``, whose module a plan
does not import; a test holds the two equal)."""
NODE_DEVICES = {"A2": 8, "A3": 16, "A5": 8, "310P": 8}
"""NPU devices one node of a family holds, as the targets give them (``targets/*.yaml`` ``devices_per_node`` by
``device_generation``; a test holds these to them): A3's 16 are the dies of 8 cards."""
SERVING_DTYPES = {"310P": ("float16", "half")}
"""The ``--dtype`` values a family serves where it does not serve a model's bfloat16 (``Target.serving_dtypes`` of
the family's targets: Atlas 300I DUO serves float16 alone, PaddleOCR-VL.md:162, Qwen-VL-Dense.md:288; a test holds
these to the targets). A command that leaves ``--dtype`` to the checkpoint's bfloat16 does not run there."""
_TEMPLATE_ARGS = ("$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8")


@valueclass(frozen=True)
class Placement:
    """Where the page places a command: the family and the page line it rests on, and how."""

    family: str
    line: int
    why: str

    def note(self) -> str:
        return f"{self.family} by :{self.line} ({self.why})"


def placement(page: Mapping, command: Mapping) -> Placement | None:
    """The family ``page`` places ``command`` on by its statements (module docstring), or None."""
    if _is_template(command) and (placed := _by_launchers(page, command)):
        return placed
    statements = [s for s in page.get("hardware") or () if not s.get("tabs")]  # a tab's own: tab_overruled
    if not statements:
        return None
    ranks = ranks_per_node(command)
    for scope in _scopes(command.get("heading") or "", statements):
        fitting = sorted({f for s in scope for f in s["families"] if _runs_on(f, command, ranks)})
        if len(fitting) == 1:
            line = next(s["line"] for s in scope if fitting[0] in s["families"])
            return Placement(fitting[0], line, _why(scope, ranks, fitting[0]))
        if len(fitting) > 1:
            return _by_node_count(scope, fitting, command.get("nodes"))
    return None


def placements(page: Mapping, command: Mapping) -> tuple[Placement, ...]:
    """Every family ``page`` places ``command`` on: the one ``placement`` gives, else each the page states alike for
    it (module docstring), in family order; () where the page states none."""
    if placed := placement(page, command):
        return (placed,)
    if _is_template(command) and any(c.get("template_line") == command["line"] for c in page.get("commands", ())):
        return ()  # a template runs where its runs do: placed by them or not at all
    ranks, nodes = ranks_per_node(command), command.get("nodes")
    tail = path_tail(model_path(command))
    for checkpoint in page.get("checkpoints") or ():
        if tail and tail == path_tail(checkpoint.get("id")):
            fitting = sorted({r["hardware"] for r in checkpoint.get("requirements", ()) if r.get("hardware")
                              and _runs_on(r["hardware"], command, ranks)
                              and (r.get("nodes") is None or nodes is None or r["nodes"] == nodes)})
            if fitting:
                return tuple(Placement(f, checkpoint["line"], f"the weights table offers {checkpoint.get('name') or tail} "
                                       f"on {_listed(fitting)} alike") for f in fitting)
    statements = [s for s in page.get("hardware") or () if not s.get("tabs")]
    for scope in _scopes(command.get("heading") or "", statements) if statements else ():
        fitting = sorted({f for s in scope for f in s["families"] if _runs_on(f, command, ranks)})
        if fitting:
            return tuple(Placement(f, next(s["line"] for s in scope if f in s["families"]),
                                   f"the page states {_listed(fitting)} alike") for f in fitting)
    return ()


def _listed(families: list[str]) -> str:
    return ", ".join(families[:-1]) + f" and {families[-1]}" if len(families) > 1 else families[0]


def tab_overruled(page: Mapping, command: Mapping) -> Placement | None:
    """The family a command runs on where its own tab cannot hold it: its ranks per node exceed the tab family's
    node, and the nearest hardware statement above it in the same tab names one family that holds them (GLM5.md in
    0.23.0: TP 16 × DP 2 with one DP rank a node, 16 devices a node, in the A2 tab under "`glm-5-w8a8`: require 2
    Atlas 800 A3 (64GB × 16)", :677). None where the tab holds the command, or nothing above it says otherwise."""
    tab, ranks = command.get("hardware"), ranks_per_node(command)
    if not tab or ranks is None or ranks <= NODE_DEVICES.get(tab, ranks):
        return None
    above = [s for s in page.get("hardware") or () if s.get("tabs") and tuple(s["tabs"]) == tuple(command.get("tabs", ()))
             and s["line"] < command["line"]]
    for statement in sorted(above, key=lambda s: -s["line"]):
        fitting = sorted({f for f in statement["families"] if ranks <= NODE_DEVICES.get(f, 0)})
        if len(fitting) == 1:
            return Placement(fitting[0], statement["line"],
                             f"the {tab} tab's node holds {NODE_DEVICES[tab]} devices, the command runs {ranks} a "
                             "node; the statement above it in the tab names " + fitting[0])
    return None


def ranks_per_node(command: Mapping) -> int | None:
    """The devices a command runs on one node: TP × PCP × PP × DP over its nodes (``--data-parallel-size-local``
    where given, else ``--nnodes``: GLM5.3.md's TP 16 × PP 2 prefiller over two nodes); None where the page gives
    neither its node count nor its local DP size."""
    tp, dp, _ = command_layout(command)
    options = command.get("options", {})
    pcp = leading_int(str((options.get("--prefill-context-parallel-size") or {}).get("value", "1"))) or 1
    pp = leading_int(str((options.get("--pipeline-parallel-size") or {}).get("value", "1"))) or 1
    local = (options.get("--data-parallel-size-local") or command.get("launcher_options", {}).get("--dp-size-local")
             or {}).get("value")
    if local is not None and leading_int(str(local)):
        return tp * pcp * pp * leading_int(str(local))
    spanned = leading_int(str((options.get("--nnodes") or {}).get("value", "")))
    if spanned:  # one group over --nnodes nodes (vLLM's multi-node executor): its ranks split evenly over them
        return -(-tp * pcp * pp * dp // spanned)
    if command.get("nodes"):
        return tp * pcp * pp * -(-dp // command["nodes"])
    if _is_template(command):  # launch_online_dp.py gives each DP rank its node's devices i·TP … (i+1)·TP − 1
        return tp * pcp * pp
    return None


def _runs_on(family: str, command: Mapping, ranks: int | None) -> bool:
    """Whether a node of ``family`` can run ``command``: it holds the command's ranks per node, and serves the dtype
    the command runs (``SERVING_DTYPES``)."""
    if ranks is not None and ranks > NODE_DEVICES.get(family, 0):
        return False
    served = SERVING_DTYPES.get(family)
    return served is None or str((command.get("options", {}).get("--dtype") or {}).get("value", "auto")) in served


def _scopes(heading: str, statements) -> list[list[Mapping]]:
    """The statements of the command's section, then of each enclosing section, then every statement."""
    parts = heading.split(SEPARATOR) if heading else []
    scopes = []
    for depth in range(len(parts), 0, -1):
        here = SEPARATOR.join(parts[:depth])
        found = [s for s in statements if s["heading"] == here]
        if found:
            scopes.append(found)
    scopes.append(list(statements))
    return scopes


def _by_node_count(scope, fitting: list[str], nodes) -> Placement | None:
    """The one family a statement of alternatives ("1 Atlas 800 A3 (64GB × 16) or 2 Atlas 800 A2 (64GB × 8)")
    gives the command's node count, when every statement of the scope that offers all the fitting families as
    alternatives agrees on it."""
    if not nodes:
        return None
    found = {}
    for statement in scope:
        alternatives = statement.get("requirements", ())
        if not set(fitting) <= {r.get("hardware") for r in alternatives if r.get("nodes")}:
            continue  # offers a fitting family not, or without its node count
        matching = {r["hardware"] for r in alternatives if r.get("hardware") in fitting and r.get("nodes") == nodes}
        if len(matching) == 1:
            found.setdefault(matching.pop(), statement["line"])
    if len(found) != 1:
        return None
    family, line = next(iter(found.items()))
    return Placement(family, line, f"the page's alternatives give {nodes} {family} node{'s' if nodes > 1 else ''}, "
                                   "as the command runs")


def _why(scope, ranks: int | None, family: str) -> str:
    named = sorted({f for s in scope for f in s["families"]})
    if len(named) == 1:
        return "the page's hardware statement"
    others = ", ".join(f for f in named if f != family)
    return f"the page's hardware statement; {ranks} devices per node exceed a {others} node"


def _is_template(command: Mapping) -> bool:
    return command.get("launcher") == "vllm serve" and any(
        entry.get("value") in _TEMPLATE_ARGS for entry in command.get("options", {}).values())


def _by_launchers(page: Mapping, template: Mapping) -> Placement | None:
    from optkit.resolve.page_tables import command_tabs

    runs = [c for c in page.get("commands", ()) if c.get("template_line") == template["line"]]
    tabs = {tab for run in runs for tab in command_tabs(page, run)}
    if len(tabs) != 1:
        return None
    family = tabs.pop()
    return Placement(family, runs[0]["line"], "the launch_online_dp.py runs that start this template")


__all__ = ["NODE_DEVICES", "SERVING_DTYPES", "Placement", "placement", "placements", "ranks_per_node", "tab_overruled"]
