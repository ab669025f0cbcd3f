"""The context of a command on a tutorial page: the hardware family, scenario, deployment, node count and rank
and PD role that its comment, tabs, list item, lead text, section, headings and own flags say (None where they say
nothing), for ``tutorial_pages`` and ``tutorial_launchers``."""

from __future__ import annotations

import re

from optkit.versions.tutorial_checkpoints import NUMBER_WORDS, REQUIREMENT
from optkit.versions.tutorial_commands import SEPARATOR, Block, Command
from optkit.versions.tutorial_tabs import families

_SCENARIO = re.compile(r"high[- ]?throughput|low[- ]?latency|long[- ]?(context|sequence)|balanced", re.IGNORECASE)


_NODES = re.compile(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")[- ]?nodes?\b", re.IGNORECASE)


_NODE_RANK = re.compile(r"\bnode[ _-]?(\d+)\b", re.IGNORECASE)


_PLACEHOLDER = re.compile(r"<[A-Za-z_][^<>]*>|\$\{[^{}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\d|\{[A-Za-z_][A-Za-z0-9_]*\}")


def comment_above(block: Block, offset: int) -> str:
    """The comment line just above a command in its block (``# Prefill node 0``, ``# d1``), or ''."""
    for line in reversed(block.lines[:offset]):
        if line.strip():
            return line.strip() if line.strip().startswith("#") else ""
    return ""


def command_data(block: Block, command: Command, comment: str, launcher: str = "vllm serve") -> dict:
    opts = {flag: {"value": value, "line": line} for flag, (value, line) in sorted(command.options.items())}
    env = {name: {"value": value, "line": line} for name, (value, line) in sorted(command.env.items())}
    data = {"where": command.where, "line": command.line, "heading": SEPARATOR.join(block.headings),
            "tabs": list(block.tabs), "label": block.label, "comment": comment, "launcher": launcher, "model": command.model,
            "options": opts, "env": env, "problems": list(command.problems)}
    data.update(context(block, command, comment))
    data["placeholders"] = _placeholders(command)
    return data


_STATES_HARDWARE = re.compile(r"\bhardware\b|\brequires?\b|\brecommended for\b|\bassume you have\b", re.IGNORECASE)
"""A section line stating the hardware its commands run on (``**Hardware**: 3 × Atlas 800 A3``, ``It is
recommended for the W8A8 model on 2 Atlas 800 A2 (64GB x 8) nodes``), as does any sized product
(``1 Atlas 800 A3 (64GB × 16) node``)."""


_DENIES = re.compile(r"\bnot (?:be )?supported\b|\bunsupported\b|\bdo(?:es)? not support\b|\bnot available\b",
                     re.IGNORECASE)
"""A line saying what hardware a deployment does *not* run on (``Multi-node PD separation deployment is **not
supported** on Atlas 300I DUO.``, Qwen3.5-27B-Qwen3.6-27B.md 0.30.0rc2 :466) places no command on it."""


_TITLE = 120
"""A lead line this short titles the block (``**Low Latency Configuration:**``); a longer one is prose
(``Suitable for pure text dialogue, mathematical reasoning, and long-context scenarios. …``), and so are
list items, quotes, notes and table rows: their words (``- **Decode nodes** focus on low-latency token
generation``, ``| Low Latency | 2 (A3) |``) are no statement about the command."""


def context(block: Block, command: Command, comment: str) -> dict:
    """Hardware, scenario, deployment, nodes, rank and PD role, nearest first: the command's comment, the
    block's tabs, the short lines just before it and the list item it is nested in; for hardware also its
    section's lines stating the hardware or what it requires, the headings and the block's comments; the
    command's own flags and, where no text names a family, its environment (``_env_family``); ``devices`` where
    the section says the server runs on one NPU (``_ON_DEVICES``)."""
    comments = [line.strip() for line in block.lines[:command.line - block.start] if line.strip().startswith("#")]
    titles = [line for line in reversed(block.lead) if len(line) <= _TITLE and not re.match(r"[|>]|[-*] |!!!", line)
              and not _DENIES.search(line)]
    stated = [line for line in reversed(block.section) if (_STATES_HARDWARE.search(line) or REQUIREMENT.search(line))
              and not _DENIES.search(line)]
    near = [comment, *reversed(block.tabs), *titles, *([block.item][:len(block.item) <= _TITLE])]
    named = next((found for text in [*near, *stated, *reversed(block.headings), *reversed(comments)]
                  if (found := families(text))), None) or _env_family(command)
    scenario = next((m.group(0) for text in [*near, *reversed(block.headings)] if (m := _SCENARIO.search(text))), None)
    role = pd_role(block, command, comment)
    deployment, nodes, rank = _layout(block, command, role, comment)
    found = {"hardware": named[0] if len(named) == 1 else None, "hardware_families": named, "scenario": scenario,
             "deployment": deployment, "nodes": nodes, "node_rank": rank, "pd_role": role}
    said = next((m.group(1).lower() for line in [comment, *reversed(block.section)] if (m := _ON_DEVICES.search(line))),
                None)
    if said in ("single", "one"):
        found["devices"] = 1
    return found


_ON_DEVICES = re.compile(r"\bon (?:a |an )?(single|one|multi(?:ple)?|\d+)[- ]NPUs?\b", re.IGNORECASE)
"""A section line saying how many NPUs its server runs on, the nearest above the command deciding: ``Run docker
container to start the vLLM server on single-NPU:`` (Qwen-VL-Dense.md 0.30.0rc2 :199, above three tabs of scripts
taking TP and DP as ``$4`` and ``$3`` with no runner), not a later "on multi-NPU" tab's. One NPU gives the command
``devices: 1``: its TP × DP is 1. "Fits in a single NPU" states no deployment."""


def _env_family(command: Command) -> list[str]:
    """The family a command's own environment names: ``ASCEND_A3_ENABLE=1``, the switch the pages' Mooncake PD
    scripts set on A3 only (DeepSeek-V3.2.md and GLM4.x.md's PD nodes; the tree's e2e configs set it in their
    A3 PD cases, ``tests/e2e/cases/features/kv_pool/GLM-5.2-W8A8C8-A3-Memcache-PD.yaml``)."""
    return ["A3"] if str(command.env.get("ASCEND_A3_ENABLE", ("",))[0]) == "1" else []


def pd_role(block: Block, command: Command, comment: str) -> str | None:
    """The PD role of a command: its ``kv_role``, else the words around it. A command with options but no
    ``--kv-transfer-config`` joins no PD pair, whatever its lead text says (Qwen3.8-27B.md's co-located command
    follows a parameter list that speaks of decode requests); a launcher's bare command (no options yet) is
    placed by its words alone."""
    kv_role = command.options.get("--kv-transfer-config.kv_role", (None, 0))[0]
    if kv_role in ("kv_producer", "kv_consumer"):
        return "prefill" if kv_role == "kv_producer" else "decode"
    if command.options and not any(flag.startswith("--kv-transfer-config") for flag in command.options):
        return None
    for text in (comment, *reversed(block.tabs), *reversed(block.lead[-2:])):
        prefill = re.search(r"\bprefill(er)?\b|\bP node\b|^#\s*p\d", text, re.IGNORECASE)
        decode = re.search(r"\bdecode(r)?\b|\bD node\b|^#\s*d\d", text, re.IGNORECASE)
        if bool(prefill) != bool(decode):
            return "prefill" if prefill else "decode"
    return None


def _layout(block: Block, command: Command, role: str | None, comment: str) -> tuple[str, int | None, int | None]:
    """(deployment, nodes, node rank): the DP sizes' ratio first (``--data-parallel-size`` over its local
    part), then the flags only a node of several takes (``--headless``, a start rank past 0, ray), then
    what the comment, tabs, lead text and headings say."""
    flags = command.options
    context = " ".join([comment, *block.tabs, *block.lead, *block.headings])
    local = " ".join([comment, *block.tabs, *block.lead[-2:]])
    by_flags = _nodes_by_flags(flags)
    rank_match = _NODE_RANK.search(local)
    rank = _rank(flags)
    if rank is None and rank_match:
        rank = int(rank_match.group(1))
    follower = "--headless" in flags or bool(as_int(flags.get("--data-parallel-start-rank", (None,))[0]))
    follower = follower or "--nnodes" in flags or flags.get("--distributed-executor-backend", ("",))[0] == "ray"
    single_said = re.search(r"single[- ]?node", context, re.IGNORECASE) is not None
    if by_flags is not None:
        multi = by_flags > 1 or follower
    elif follower:
        multi = True
    else:
        multi = not single_said and ("--data-parallel-address" in flags or (_nodes_said(context) or 1) > 1
                                     or re.search(r"multi[- ]?node", context, re.IGNORECASE) is not None)
    nodes = by_flags or _nodes_said(context)
    if role is not None:  # a kv_both instance (PD colocated, a KV pool) is no PD split: its layout decides
        return "pd", nodes, rank
    if multi:
        return "multi-node", nodes, rank
    if single_said or not re.search(r"\bnodes\b", context, re.IGNORECASE):
        return "single-node", 1, 0
    return "unknown", nodes, rank


def _nodes_by_flags(flags: dict) -> int | None:
    size, local = (as_int(flags.get(f, (None,))[0]) for f in ("--data-parallel-size", "--data-parallel-size-local"))
    return -(-size // local) if size and local else None


def _nodes_said(context: str) -> int | None:
    if match := _NODES.search(context):
        word = match.group(1).lower()
        return int(word) if word.isdigit() else NUMBER_WORDS[word]
    return None


def _rank(flags: dict) -> int | None:
    """The node rank the DP flags give, before any words (Hy4-preview.md's "Node 1 script" runs the leader):
    the start rank over the local DP size, and 0 for a node that takes a local size but no start rank and is not
    headless (vLLM's start rank defaults to 0); None where they say nothing."""
    start, local = (as_int(flags.get(f, (None,))[0]) for f in ("--data-parallel-start-rank", "--data-parallel-size-local"))
    if start is not None and local:
        return start // local
    if local and "--data-parallel-start-rank" not in flags and "--headless" not in flags:
        return 0
    return None


def as_int(value) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _placeholders(command: Command) -> list[str]:
    values = [command.model, *(v for v, _ in command.options.values()), *(v for v, _ in command.env.values())]
    return sorted({m.group(0) for v in values if isinstance(v, str) for m in _PLACEHOLDER.finditer(v)})
