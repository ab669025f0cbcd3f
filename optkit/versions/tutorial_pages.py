"""One upstream tutorial page as data: its checkpoints, its tables, its commands with their context.

``read_page(text)`` reads a page of ``docs/source/tutorials/`` (both markdown dialects, see
``tutorial_commands``) into the page entry of ``versions/tutorials/<release>.json`` (format 1,
docs/tutorials.md):

- ``checkpoints``: the weights the "Model Weight" section lists (a table or a bullet list), each with
  its Hub id read off the download link, its quantization read off its name, and the hardware it
  requires as written and as ``{hardware, nodes, devices_per_node, hbm_gib}`` (``tutorial_checkpoints``);
- ``tables``: every pipe table, every row and cell as written, with the headings and tabs above it;
- ``commands``: every ``vllm serve`` command and every ``python launch_online_dp.py`` run (which starts
  the page's ``vllm serve`` template once per local DP rank, ``$1``…``$7`` filled in), with the hardware
  family, scenario, deployment, node count and rank and PD role its tabs, headings, label and own flags
  say — None where they say nothing;
- ``tabs``: every distinct tab text of the page (docs/tutorials.md maps each to its hardware family);
- ``hardware``: the page's statements of its hardware outside its tabs (``tutorial_hardware``), which place
  the commands no tab or heading places (``optkit.resolve.page_hardware``);
- ``unread``: the lines that launch a server in a way this reader does not interpret, and why.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from optkit.versions.tutorial_commands import (SEPARATOR, Block, Command, TextLine, block_commands, command_tokens,
                                               options, settings_only, walk)
from optkit.versions.tutorial_checkpoints import (NUMBER_WORDS, REQUIREMENT, bullet_checkpoints, in_weights,
                                                  stated_weights, table_checkpoints)
from optkit.versions.tutorial_hardware import statements
from optkit.versions.tutorial_tabs import families

KINDS = ("llm", "embedding", "reranker", "asr", "ocr", "reward", "other")
_KIND_WORDS = (("reranker", r"rerank"), ("embedding", r"embedding|siglip"), ("asr", r"\basr\b|transcribe"),
               ("ocr", r"ocr"), ("reward", r"-rm-|\breward\b"))
"""A page's kind by the words of its file name and title: the first that matches."""

_SCENARIO = re.compile(r"high[- ]?throughput|low[- ]?latency|long[- ]?(context|sequence)|balanced", re.IGNORECASE)
_MULTI_FLAGS = ("--data-parallel-address", "--headless", "--data-parallel-start-rank", "--nnodes", "--master-addr")
_NODES = re.compile(r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")[- ]?nodes?\b", re.IGNORECASE)
_NODE_RANK = re.compile(r"\bnode[ _-]?(\d+)\b", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"<[A-Za-z_][^<>]*>|\$\{[^{}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\d|\{[A-Za-z_][A-Za-z0-9_]*\}")
_LAUNCHER = re.compile(r"^python3?\s+(\S*/)?launch_online_dp\.py\b")
_SCRIPT_RUN = re.compile(r"^(?:(?:ba)?sh\s+|\./)(\S*/)?run_dp_template\.sh\s*$")
"""``bash run_dp_template.sh``: a node runs its script itself, with no launcher (GLM5.2.md 0.30.0rc2 :695): the
script is started, and starts no command beyond the script's own ``vllm serve``."""
_LAUNCHER_ARGS = ("--dp-size", "--tp-size", "--dp-size-local", "--dp-rank-start", "--dp-address", "--dp-rpc-port",
                  "--vllm-start-port", "--pp-size")
_TEMPLATE_POSITIONS = {"$2": "--vllm-start-port", "$3": "--dp-size", "$4": "--dp-rank-start", "$5": "--dp-address",
                       "$6": "--dp-rpc-port", "$7": "--tp-size", "$8": "--pp-size"}
"""run_dp_template.sh's arguments as launch_online_dp.py passes them (examples/external_online_dp/
launch_online_dp.py, run_command): devices, engine port, dp size, dp rank, dp address, rpc port, tp size;
the first local rank's values (rank dp-rank-start, port vllm-start-port). A page's own launcher may add pipeline
parallelism as the eighth (MiniMax-M3.md in 0.30.0rc2, :435 and :505-527: ``--pp-size``, default 1)."""


TUTORIALS = "docs/source/tutorials"
"""Where a vllm-ascend tree keeps its tutorials; every ``*.md`` under it but ``index.md`` pages is read."""


def read_tree(tree: Path, release: str, digest: str) -> dict:
    """The tutorial data of the release tree at ``tree`` (format 1; ``digest``: the sdist's sha256)."""
    root = tree / TUTORIALS
    pages = {path.relative_to(root).as_posix(): path for path in sorted(root.rglob("*.md")) if path.name != "index.md"}
    return {"format": 1, "release": release, "tree": digest,
            "pages": {name: read_page(name, path.read_text(encoding="utf-8", errors="replace"))
                      for name, path in pages.items()}}


def dump(data: dict) -> str:
    """The data as its committed file: sorted keys, one-space indent, UTF-8 as is, a final newline."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def read_page(path: str, text: str) -> dict:
    """The data of the page at ``path`` (relative to docs/source/tutorials/) whose markdown is ``text``."""
    items = walk(text.splitlines())
    title = next((line.text.lstrip("#").strip() for line in items if isinstance(line, TextLine)
                  and line.text.startswith("# ")), path)
    blocks = [item for item in items if isinstance(item, Block)]
    commands, unread = _commands(blocks)
    lines = [item for item in items if isinstance(item, TextLine)]
    tables = _tables(lines)
    weights = [table for table in tables if _table_kind(table) == "weights"]
    checkpoints = sorted(table_checkpoints(weights) + bullet_checkpoints(lines), key=lambda c: c["line"])
    tabs = sorted({tab for item in items for tab in item.tabs})
    for command in commands:  # a placeholder model path: the weights the prose above it states, where it does
        if stated := stated_weights(command, lines):
            command["stated_weights"] = stated
    return {"title": title, "kind": _kind(path, title, commands or unread), "checkpoints": checkpoints, "tabs": tabs,
            "tables": [_table_data(table) for table in tables], "commands": commands, "unread": unread,
            "hardware": statements(lines)}


def _kind(path: str, title: str, serves: list[dict]) -> str:
    """The page's kind by its words; else an LLM for a model page that serves (commands, or launches not
    read), other for the rest."""
    words = f"{path.rsplit('/', 1)[-1]} {title}".lower()
    for kind, pattern in _KIND_WORDS:
        if re.search(pattern, words):
            return kind
    return "llm" if serves and path.startswith("models/") else "other"


# --------------------------------------------------------------------------- tables


def _tables(lines: list[TextLine]) -> list[dict]:
    """Every pipe table: header, separator and rows, each row with its line."""
    found: list[dict] = []
    run: list[TextLine] = []
    label, before = "", ""  # the last text line under the current heading; the one before the current run
    for line in [*lines, TextLine(0, "", (), ())]:
        is_row = line.text.strip().startswith("|")
        if is_row and run and line.number == run[-1].number + 1:
            run.append(line)
            continue
        if len(run) >= 2 and re.fullmatch(r"\|?[\s:|-]*-{3,}[\s:|-]*\|?", run[1].text.strip()):
            first = run[0]
            found.append({"line": first.number, "heading": SEPARATOR.join(first.headings), "headings": first.headings,
                          "tabs": list(first.tabs), "label": before, "columns": _cells(first.text),
                          "rows": [{"line": row.number, "cells": _cells(row.text)} for row in run[2:]]})
        run, before = ([line], label) if is_row else ([], before)
        if line.text.lstrip().startswith("#"):
            label = ""
        elif line.text.strip() and not is_row:
            label = line.text.strip()
    return found


def _cells(row: str) -> list[str]:
    text = row.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", text)]


def _table_kind(table: dict) -> str:
    columns = [column.lower() for column in table["columns"]]
    if any("download" in c or "hardware requirement" in c for c in columns) or in_weights(table["headings"]):
        return "weights"
    if any(c.strip("*") == "scenario" for c in columns) or (
            re.search(r"scenario|performance tuning|recommended config", table["heading"], re.IGNORECASE)
            and {"tp", "dp"} & {c.strip("* ") for c in columns}):
        return "scenario"
    return "other"


def _table_data(table: dict) -> dict:
    return {"line": table["line"], "heading": table["heading"], "tabs": table["tabs"], "kind": _table_kind(table),
            "columns": table["columns"], "rows": table["rows"]}


# --------------------------------------------------------------------------- commands


def _commands(blocks: list[Block]) -> tuple[list[dict], list[dict]]:
    """Every command of the page's blocks, launchers after their template is read, and what was not read;
    a second command of one launcher under one name gets `` #2`` (as ``tutorial_commands.commands`` does)."""
    runs = Counter(_launch_key(block, offset) for block in blocks if not _unread_block(block)
                   for offset, raw in enumerate(block.lines) if _LAUNCHER.match(raw.strip()))
    readable = [block for block in blocks if not _unread_block(block)]
    carried: list[tuple[Block, tuple]] = []  # blocks that only set variables, with what they set
    read_of: dict[int, dict[int, Command]] = {}
    for block in readable:
        if (settings := settings_only(block)) is not None:
            carried.append((block, settings))
            continue
        read_of[block.start] = {c.line: c for c in block_commands(block, inherited=_inherited(block, carried))}
    paired = _paired_runs(readable, read_of)
    commands: list[dict] = []
    unread: list[dict] = []
    for block in blocks:
        if why := _unread_block(block):
            unread.append({"line": block.start - 1, "why": why})
            continue
        if block.start not in read_of:  # it only sets variables
            continue
        read = read_of[block.start]
        for offset, raw in enumerate(block.lines):
            line = raw.strip()
            number = block.start + offset
            if number in read:
                commands.append(_command_data(block, read[number], _comment_above(block, offset)))
            elif _LAUNCHER.match(line):
                commands.append(_launcher(block, offset, commands, runs, paired.get(number)))
            elif why := _unread(block, line):
                unread.append({"line": number, "why": why})
    seen: dict[tuple[str, str], int] = {}
    for command in commands:
        key = (command["launcher"], command["where"])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            command["where"] += f" #{seen[key]}"
    return commands, unread


def _comment_above(block: Block, offset: int) -> str:
    """The comment line just above a command in its block (``# Prefill node 0``, ``# d1``), or ''."""
    for line in reversed(block.lines[:offset]):
        if line.strip():
            return line.strip() if line.strip().startswith("#") else ""
    return ""


def _unread_block(block: Block) -> str | None:
    """Why a whole block is not read: a directive whose content the docs build generates or lays out."""
    if block.info.startswith("{model-code}"):
        source = next((line.split(":", 2)[2].strip() for line in block.lines if line.startswith(":test_case_path:")), "")
        return (f"a `{{model-code}}` block, generated by the docs build from {source or 'a test case'}: "
                "its command is not on the page, not read")
    if block.info.startswith("{list-table}"):
        return "a `{list-table}` table: its rows are not read"
    return None


def _unread(block: Block, line: str) -> str | None:
    """Why a code line that launches a server is not read (None: it launches none)."""
    if "vllm.entrypoints.openai.api_server" in line:
        return "a `python -m vllm.entrypoints.openai.api_server` launch: not read"
    if not re.search(r"\bvllm serve\b", line) or re.search(r"\b(pkill|pgrep|grep|ps)\b", line):
        return None
    if line.startswith("#"):
        return "a commented-out `vllm serve`: not read"
    if "python" in block.info:
        return "a `vllm serve` inside a python block: not read"
    return "a `vllm serve` that does not start a shell line (inside a heredoc, a string or a loop): not read"


def _command_data(block: Block, command: Command, comment: str, launcher: str = "vllm serve") -> dict:
    opts = {flag: {"value": value, "line": line} for flag, (value, line) in sorted(command.options.items())}
    env = {name: {"value": value, "line": line} for name, (value, line) in sorted(command.env.items())}
    data = {"where": command.where, "line": command.line, "heading": SEPARATOR.join(block.headings),
            "tabs": list(block.tabs), "label": block.label, "comment": comment, "launcher": launcher, "model": command.model,
            "options": opts, "env": env, "problems": list(command.problems)}
    data.update(_context(block, command, comment))
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


def _context(block: Block, command: Command, comment: str) -> dict:
    """Hardware, scenario, deployment, nodes, rank and PD role, nearest first: the command's comment, the
    block's tabs, the short lines just before it and the list item it is nested in; for hardware also its section's lines stating the
    hardware or what it requires, the headings and the block's comments; the command's own flags and, where no
    text names a family, its environment (``_env_family``)."""
    comments = [line.strip() for line in block.lines[:command.line - block.start] if line.strip().startswith("#")]
    titles = [line for line in reversed(block.lead) if len(line) <= _TITLE and not re.match(r"[|>]|[-*] |!!!", line)
              and not _DENIES.search(line)]
    stated = [line for line in reversed(block.section) if (_STATES_HARDWARE.search(line) or REQUIREMENT.search(line))
              and not _DENIES.search(line)]
    near = [comment, *reversed(block.tabs), *titles, *([block.item][:len(block.item) <= _TITLE])]
    named = next((found for text in [*near, *stated, *reversed(block.headings), *reversed(comments)]
                  if (found := families(text))), None) or _env_family(command)
    scenario = next((m.group(0) for text in [*near, *reversed(block.headings)] if (m := _SCENARIO.search(text))), None)
    role = _pd_role(block, command, comment)
    deployment, nodes, rank = _layout(block, command, role, comment)
    return {"hardware": named[0] if len(named) == 1 else None, "hardware_families": named, "scenario": scenario,
            "deployment": deployment, "nodes": nodes, "node_rank": rank, "pd_role": role}


def _env_family(command: Command) -> list[str]:
    """The family a command's own environment names: ``ASCEND_A3_ENABLE=1``, the switch the pages' Mooncake PD
    scripts set on A3 only (DeepSeek-V3.2.md and GLM4.x.md's PD nodes; the tree's e2e configs set it in their
    A3 PD cases, ``tests/e2e/cases/features/kv_pool/GLM-5.2-W8A8C8-A3-Memcache-PD.yaml``)."""
    return ["A3"] if str(command.env.get("ASCEND_A3_ENABLE", ("",))[0]) == "1" else []


def _pd_role(block: Block, command: Command, comment: str) -> str | None:
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
    follower = "--headless" in flags or bool(_int(flags.get("--data-parallel-start-rank", (None,))[0]))
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
    size, local = (_int(flags.get(f, (None,))[0]) for f in ("--data-parallel-size", "--data-parallel-size-local"))
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
    start, local = (_int(flags.get(f, (None,))[0]) for f in ("--data-parallel-start-rank", "--data-parallel-size-local"))
    if start is not None and local:
        return start // local
    if local and "--data-parallel-start-rank" not in flags and "--headless" not in flags:
        return 0
    return None


def _int(value) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _placeholders(command: Command) -> list[str]:
    values = [command.model, *(v for v, _ in command.options.values()), *(v for v, _ in command.env.values())]
    return sorted({m.group(0) for v in values if isinstance(v, str) for m in _PLACEHOLDER.finditer(v)})


# --------------------------------------------------------------------------- launch_online_dp.py


def _paired_runs(blocks: list[Block], read_of: dict[int, dict[int, Command]]) -> dict[int, int]:
    """{launch line: template line} where a page writes one ``run_dp_template.sh`` per node and then as many
    ``launch_online_dp.py`` runs of their PD role and family, in page order: the templates of a role and family
    written since its last run, and the runs after them, pair in order when they count alike (GLM5.2.md in
    0.30.0rc2: decode node 0's script, :588, and node 1's, :649, started by :708 and :715; its 1M section's two
    more, :1383 and :1446, by :1510 and :1517). A node that runs its script itself (``_SCRIPT_RUN``) counts as a run:
    GLM5.2.md's first prefill scripts, :463 and :526, run by :695 and :701, are no part of the 1M section's set."""
    sets: dict[tuple, list[tuple[list[int], list[int]]]] = {}
    for block in blocks:
        read = read_of.get(block.start, {})
        for offset, raw in enumerate(block.lines):
            number = block.start + offset
            if number in read and any(value in _TEMPLATE_POSITIONS for value, _ in read[number].options.values()
                                      if isinstance(value, str)):
                context = _context(block, read[number], _comment_above(block, offset))
                groups = sets.setdefault((context["pd_role"], context["hardware"]), [])
                if not groups or groups[-1][1]:  # the first template after runs starts a new set
                    groups.append(([], []))
                groups[-1][0].append(number)
            elif _LAUNCHER.match(raw.strip()) or _SCRIPT_RUN.match(raw.strip()):
                groups = sets.setdefault(_launch_key(block, offset), [])
                if groups:
                    groups[-1][1].append(number)
    return {run: template for groups in sets.values() for templates, runs in groups
            if len(templates) > 1 and len(templates) == len(runs) for template, run in zip(templates, runs)}


def _inherited(block: Block, carried: list[tuple[Block, tuple]]) -> tuple | None:
    """What the nearest earlier block that only sets variables, in ``block``'s own section (its headings, a prefix of
    its tabs), set: a page that sets them once for the per-node commands after it."""
    for earlier, settings in reversed(carried):
        if earlier.headings == block.headings and earlier.tabs == block.tabs[:len(earlier.tabs)]:
            return settings
    return None


def _launch_key(block: Block, offset: int) -> tuple[str | None, str | None]:
    """(PD role, hardware family) of the ``launch_online_dp.py`` run at ``offset``, as its words place it: the
    templates it may start are those of its role and family."""
    number, comment = block.start + offset, _comment_above(block, offset)
    return (_pd_role(block, Command(block.where, number, ""), comment),
            _context(block, Command(block.where, number, ""), comment)["hardware"])


def _launcher(block: Block, offset: int, earlier: list[dict], runs: Counter, paired: int | None = None) -> dict:
    """A ``python launch_online_dp.py`` run as the command it starts on its first local DP rank (``runs``: the
    page's runs per ``_launch_key``, which pair with its templates in order where they count as many)."""
    number = block.start + offset
    words, used = command_tokens(block.lines, offset)
    span = block.lines[offset:offset + used]
    args = {}
    for flag, value, _ in options(words):
        args[flag] = {"value": value, "line": number + next((i for i, line in enumerate(span) if flag in line), 0)}
    comment = _comment_above(block, offset)
    role, hardware = _launch_key(block, offset)
    template = next((c for c in earlier if c["line"] == paired), None) if paired else None
    template = template or _template(earlier, role, hardware, runs[(role, hardware)])
    command = Command(block.where, number, template["model"] if template else "")
    if template is None:
        command.problems.append(f"line {number}: launch_online_dp.py runs run_dp_template.sh, but no `vllm serve` "
                                "with $1…$7 arguments stands before it on the page")
    else:
        for flag, entry in template["options"].items():
            value, line = entry["value"], entry["line"]
            if isinstance(value, str) and value in _TEMPLATE_POSITIONS:
                source = args.get(_TEMPLATE_POSITIONS[value])
                value, line = (source["value"], source["line"]) if source else (value, line)
            command.options[flag] = (value, line)
        command.env = {name: (entry["value"], entry["line"]) for name, entry in template["env"].items()}
    data = _command_data(block, command, comment, launcher="launch_online_dp.py")
    data["launcher_options"] = args
    data["template_line"] = template["line"] if template else None
    size, local = (_int((args.get(f) or {}).get("value")) for f in ("--dp-size", "--dp-size-local"))
    local = local or size  # launch_online_dp.py: --dp-size-local defaults to --dp-size
    if size and local:
        start = _int((args.get("--dp-rank-start") or {}).get("value")) or 0
        data["nodes"], data["node_rank"] = -(-size // local), start // local
        data["deployment"] = "pd" if data["pd_role"] else ("multi-node" if size > local else "single-node")
    return data


def _template(earlier: list[dict], role: str | None, hardware: str | None, runs: int) -> dict | None:
    """The page's run_dp_template.sh ``vllm serve`` the launcher runs: of the templates before it taking
    ``$1``…``$7``, of the launcher's PD role and hardware family where it has them and a template matches, the one
    in the launcher's place where the page runs as many launchers of that role and hardware (``runs``) as it writes
    templates (DeepSeek-V3.2.md's "Node 0(Prefill)" and "Node 1(Prefill)" scripts, started by its first and second
    prefill launch lines), else the last."""
    templates = [c for c in earlier if c["launcher"] == "vllm serve"
                 and any(isinstance(e["value"], str) and e["value"] in _TEMPLATE_POSITIONS for e in c["options"].values())]
    for key, wanted in (("pd_role", role), ("hardware", hardware)):
        fitting = [c for c in templates if wanted is not None and c[key] == wanted]
        templates = fitting or templates
    if len(templates) > 1 and len(templates) == runs:
        lines = {t["line"] for t in templates}
        place = sum(1 for c in earlier if c["launcher"] == "launch_online_dp.py" and c.get("template_line") in lines)
        return templates[min(place, runs - 1)]
    return (templates or [None])[-1]


__all__ = ["KINDS", "TUTORIALS", "dump", "read_page", "read_tree"]
