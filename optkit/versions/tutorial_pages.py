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

from optkit.versions.tutorial_checkpoints import bullet_checkpoints, in_weights, stated_weights, table_checkpoints
from optkit.versions.tutorial_commands import SEPARATOR, Block, Command, TextLine, block_commands, settings_only, walk
from optkit.versions.tutorial_context import command_data, comment_above
from optkit.versions.tutorial_hardware import statements
from optkit.versions.tutorial_launchers import LAUNCHER, Scripts, alternatives, launch_key, launcher, paired_runs

KINDS = ("llm", "embedding", "reranker", "asr", "ocr", "reward", "other")
_KIND_WORDS = (("reranker", r"rerank"), ("embedding", r"embedding|siglip"), ("asr", r"\basr\b|transcribe"),
               ("ocr", r"ocr"), ("reward", r"-rm-|\breward\b"))
"""A page's kind by the words of its file name and title: the first that matches."""



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
    lines = [item for item in items if isinstance(item, TextLine)]
    commands, unread = _commands(blocks, lines)
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


def _commands(blocks: list[Block], text: list[TextLine]) -> tuple[list[dict], list[dict]]:
    """Every command of the page's blocks, launchers after their template is read, and what was not read;
    a second command of one launcher under one name gets `` #2`` (as ``tutorial_commands.commands`` does). A run
    that starts several templates (``tutorial_launchers.alternatives``) is one command per template, in page order,
    the further ones saying why (``alternative``)."""
    runs = Counter(launch_key(block, offset) for block in blocks if not _unread_block(block)
                   for offset, raw in enumerate(block.lines) if LAUNCHER.match(raw.strip()))
    readable = [block for block in blocks if not _unread_block(block)]
    carried: list[tuple[Block, tuple]] = []  # blocks that only set variables, with what they set
    read_of: dict[int, dict[int, Command]] = {}
    for block in readable:
        if (settings := settings_only(block)) is not None:
            carried.append((block, settings))
            continue
        read_of[block.start] = {c.line: c for c in block_commands(block, inherited=_inherited(block, carried))}
    paired = paired_runs(readable, read_of)

    def read(block: Block, variables: dict[str, str]) -> list:  # a saved script, with its wrapper's variables
        before = [(b, settings) for b, settings in carried if b.start < block.start]
        variables_before, env = _inherited(block, before) or ({}, {})
        return block_commands(block, inherited=({**variables_before, **variables}, env))
    scripts = Scripts(readable, read)
    commands: list[dict] = []
    unread: list[dict] = []
    placed: dict[int, tuple[Block, int]] = {}  # a run's block and offset
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
                commands.append(command_data(block, read[number], comment_above(block, offset)))
            elif LAUNCHER.match(line):
                commands.append(launcher(block, offset, commands, runs, paired.get(number), scripts))
                placed[number] = (block, offset)
            elif why := _unread(block, line):
                unread.append({"line": number, "why": why})
    for run, template, why in alternatives(commands, placed, text):  # each after the last of its run: page order
        block, offset = placed[run]
        after = max(i for i, c in enumerate(commands) if c["line"] == run)
        commands.insert(after + 1, {**launcher(block, offset, commands, runs, template), "alternative": why})
    seen: dict[tuple[str, str], int] = {}
    for command in commands:
        key = (command["launcher"], command["where"])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            command["where"] += f" #{seen[key]}"
    return commands, unread




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
























# --------------------------------------------------------------------------- launch_online_dp.py




def _inherited(block: Block, carried: list[tuple[Block, tuple]]) -> tuple | None:
    """What the nearest earlier block that only sets variables, in ``block``'s own section (its headings, a prefix of
    its tabs), set: a page that sets them once for the per-node commands after it."""
    for earlier, settings in reversed(carried):
        if earlier.headings == block.headings and earlier.tabs == block.tabs[:len(earlier.tabs)]:
            return settings
    return None








__all__ = ["KINDS", "TUTORIALS", "dump", "read_page", "read_tree"]
