"""The ``vllm serve`` commands of an upstream tutorial page, as data: where each stands, its env, its flags.

vllm-ascend's tutorials (``docs/source/tutorials/models/*.md``) are written in two markdown dialects:
MyST up to 0.23.x (```` ```{code-block} bash ```` fences, ``::::{tab-item} Name`` colon fences) and
mkdocs-material from 0.24 (indented fences under ``=== "Name"`` tabs). ``commands(text)`` reads both:
it walks the page line by line keeping the heading and the open tabs, collects every fenced code
block, and in each block finds the ``vllm serve`` commands, joined over ``\\`` continuations and
multi-line quotes and split with ``shlex`` as the shell would. ``where`` names a command by the last
heading (its section number dropped, so a renumbered page keeps its names) and the open tabs, e.g.
``Single-Node Online Deployment › Atlas 300I DUO``; a second command under the same name gets
`` #2``.

A command's ``env`` is what its block exports before it (``export K=V``; shell variables assigned in
the block, ``nic_name="xxxx"``, are expanded as the shell would, unknown ones kept as ``$name``), and
its ``options`` are its flags with the line each stands on, ``--no-X`` read as ``--X false`` and JSON
values (``--additional-config '{…}'``) parsed and flattened into ``--additional-config.key`` entries.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from optkit.versions.tutorial_shell import ASSIGN, expand, follow_array, follow_if, own_default, shell_word, words_of

JSON_FLAGS = ("--additional-config", "--compilation-config", "--speculative-config", "--kv-transfer-config")
"""Flags whose value is JSON: compared key by key (``--additional-config.enable_cpu_binding``)."""
SEPARATOR = " › "

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(\{:.*\})?\s*$")
_NUMBER = re.compile(r"^(\d+(\.\d+)*\.?|Q\d+:)\s+")
_MKDOCS_TAB = re.compile(r'^(\s*)===\s+"(.*)"\s*$')
_MYST_TAB = re.compile(r"^\s*(:{3,})\{tab-item\}\s*(.*?)\s*$")
_MYST_OPEN = re.compile(r"^\s*(:{3,})\{[\w-]+\}.*$")
_MYST_CLOSE = re.compile(r"^\s*(:{3,})\s*$")
_MYST_OPTION = re.compile(r"^\s*:[\w-]+:")  # a MyST directive's option (``:sync: prefill node2``), no text
_FENCE = re.compile(r"^(\s*)(`{3,})(.*)$")
_LIST_ITEM = re.compile(r"^\s*(\d+\.|[-*+])\s+\S")


@dataclass
class Command:
    """One ``vllm serve`` command of a tutorial page."""

    where: str
    line: int
    """1-based line of ``vllm serve`` in the page."""
    model: str
    options: dict[str, tuple[object, int]] = field(default_factory=dict)
    """flag (or ``--json-flag.key.path``) → (value, line); a bare flag is True, ``--no-X`` is ``--X`` False."""
    env: dict[str, tuple[str, int]] = field(default_factory=dict)
    """variables the block exports before the command → (value, line)."""
    problems: list[str] = field(default_factory=list)
    """what could not be read as the shell or vLLM would (an open quote, a JSON value that is no JSON),
    each with its page line; such a value is kept as its raw string."""


@dataclass
class Block:
    """One fenced code block of a page, dedented, with where it stands."""

    start: int
    """1-based page line of the block's first code line."""
    lines: list[str]
    where: str
    headings: tuple[str, ...] = ()
    """the headings it stands under, outermost first, section numbers dropped."""
    tabs: tuple[str, ...] = ()
    """the open tabs (mkdocs ``=== "Name"`` or MyST ``{tab-item} Name``), outermost first."""
    lead: tuple[str, ...] = ()
    """the text lines (stripped, non-empty) between the previous block or heading and this block."""
    info: str = ""
    """the fence's info string: ``bash``, ``shell``, ``python``, ``{code-block} bash``."""
    section: tuple[str, ...] = ()
    """the text lines (stripped, non-empty) between the last heading and this block."""
    numbers: tuple[str, ...] = ()
    """the section numbers of its headings as written (``5.3``), '' for an unnumbered one, outermost first."""
    item: str = ""
    """the innermost list item the block is indented under (``1. `run_dp_template.sh` script(A3)``), stripped,
    or '': it titles every block nested in it, not only the first (DeepSeek-V3.1.md 0.30.0rc2 :496-793)."""

    @property
    def label(self) -> str:
        """the last text line before the block (``**Prefill node:**``), or ''."""
        return self.lead[-1] if self.lead else ""


@dataclass(frozen=True)
class TextLine:
    """One line of a page outside code blocks, with the headings and tabs it stands under."""

    number: int
    text: str
    headings: tuple[str, ...]
    tabs: tuple[str, ...]


def commands(text: str, keep: tuple[str, ...] = ()) -> list[Command]:
    """Every ``vllm serve`` command of a tutorial page, in page order; the shell variables ``keep``
    (a node's address, its network interface) stay ``$name`` instead of the block's example value."""
    found: list[Command] = []
    seen: dict[str, int] = {}
    for block in _blocks(text.splitlines()):
        for command in block_commands(block, keep):
            seen[command.where] = seen.get(command.where, 0) + 1
            if seen[command.where] > 1:
                command.where += f" #{seen[command.where]}"
            found.append(command)
    return found


def _blocks(lines: list[str]) -> list[Block]:
    """The fenced code blocks of a page, each with the heading and tabs it stands under."""
    return [item for item in walk(lines) if isinstance(item, Block)]


def walk(lines: list[str]) -> list[Block | TextLine]:
    """A page as its code blocks and its other lines, in page order, each with its headings and tabs."""
    items: list[Block | TextLine] = []
    headings: list[tuple[int, str]] = []  # (level, name)
    tabs: list[tuple[str, int, str]] = []  # (dialect, indent or fence length, name)
    fence: tuple[str, int, int, list[str], str] | None = None  # (backticks, indent, start, lines, info)
    lead: list[str] = []
    section: list[str] = []
    items_open: list[tuple[int, str]] = []  # (indent, text) of the list items a later line may nest in
    numbers: list[tuple[int, str]] = []  # (level, section number) beside ``headings``
    for number, line in enumerate(lines, 1):
        if fence is not None:
            match = _FENCE.match(line)
            if match and len(match.group(2)) >= len(fence[0]) and not match.group(3).strip():
                items.append(Block(fence[2], _dedent(fence[3], fence[1]), _where(headings, tabs),
                                   tuple(name for _, name in headings), _names(tabs), tuple(lead), fence[4],
                                   tuple(section), tuple(n for _, n in numbers), _enclosing(items_open, fence[1])))
                fence, lead = None, []
            else:
                fence[3].append(line)
            continue
        match = _FENCE.match(line)
        if match:
            tabs = _close_mkdocs(tabs, len(match.group(1)))
            fence = (match.group(2), len(match.group(1)), number + 1, [], match.group(3).strip())
            continue
        headings, tabs = _structure(line, headings, tabs)
        items_open = _list_items(items_open, line)
        if heading := _HEADING.match(line):
            lead, section, items_open = [], [], []
            numbered, level = _NUMBER.match(heading.group(2)), len(heading.group(1))
            numbers = [*(n for n in numbers if n[0] < level), (level, numbered.group(1).rstrip(".") if numbered else "")]
        elif line.strip() and not any(p.match(line) for p in (_MKDOCS_TAB, _MYST_OPEN, _MYST_CLOSE, _MYST_OPTION)):
            lead.append(line.strip())
            section.append(line.strip())
        items.append(TextLine(number, line, tuple(name for _, name in headings), _names(tabs)))
    return items


def _list_items(items_open: list[tuple[int, str]], line: str) -> list[tuple[int, str]]:
    """The list items open after a non-code line: a line closes the items indented as far as it or further,
    and a list item (``1. …``, ``- …``) opens one; blank lines and tab markers close none."""
    if not line.strip() or _MKDOCS_TAB.match(line):
        return items_open
    indent = len(line) - len(line.lstrip())
    still = [item for item in items_open if item[0] < indent]
    return [*still, (indent, line.strip())] if _LIST_ITEM.match(line) else still


def _enclosing(items_open: list[tuple[int, str]], indent: int) -> str:
    return next((text for item_indent, text in reversed(items_open) if item_indent < indent), "")


def _structure(line: str, headings: list, tabs: list) -> tuple[list, list]:
    """The heading chain and open tabs after a non-code line."""
    if match := _HEADING.match(line):
        level = len(match.group(1))
        return [*(h for h in headings if h[0] < level), (level, _NUMBER.sub("", match.group(2)))], []
    if match := _MKDOCS_TAB.match(line):
        indent = len(match.group(1))
        return headings, [*_close_mkdocs(tabs, indent), ("mkdocs", indent, match.group(2))]
    if match := _MYST_TAB.match(line):
        return headings, [*tabs, ("myst", len(match.group(1)), match.group(2))]
    if match := _MYST_OPEN.match(line):
        return headings, [*tabs, ("myst", len(match.group(1)), "")]
    if match := _MYST_CLOSE.match(line):
        width = len(match.group(1))
        while tabs and tabs[-1][0] == "myst":
            if tabs.pop()[1] == width:
                break
        return headings, tabs
    if line.strip():
        indent = len(line) - len(line.lstrip())
        return headings, _close_mkdocs(tabs, indent)
    return headings, tabs


def _close_mkdocs(tabs: list, indent: int) -> list:
    """Tabs still open at a line of ``indent``: an mkdocs tab's content is indented past its ``===``."""
    while tabs and tabs[-1][0] == "mkdocs" and tabs[-1][1] >= indent:
        tabs = tabs[:-1]
    return tabs


def _where(headings: list, tabs: list) -> str:
    return SEPARATOR.join([headings[-1][1] if headings else "", *_names(tabs)])


def _names(tabs: list) -> tuple[str, ...]:
    return tuple(name for _, _, name in tabs if name)


def _dedent(lines: list[str], indent: int) -> list[str]:
    return [line[indent:] if line[:indent].strip() == "" else line.lstrip() for line in lines]


def settings_only(block: Block) -> tuple[dict[str, str], dict[str, tuple[str, int]]] | None:
    """(variables, exported env) of a block that only sets them (assignments, ``export``s, comments, blank lines:
    Kimi-K3.md's "Set these variables on every node" block before its per-node ``vllm serve`` blocks, 0.30.0rc2
    :139-166), else None."""
    variables: dict[str, str] = {}
    env: dict[str, tuple[str, int]] = {}
    for index, raw in enumerate(block.lines):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = ASSIGN.match(line)
        if not match:
            return None
        value = expand(shell_word(match.group(3)), variables)
        variables[match.group(2)] = value
        if match.group(1):
            env[match.group(2)] = (value, block.start + index)
    return (variables, env) if variables else None


def block_commands(block: Block, keep: tuple[str, ...] = (),
                   inherited: tuple[dict[str, str], dict[str, tuple[str, int]]] | None = None) -> list[Command]:
    """The ``vllm serve`` commands of one code block, with what the block exported before each (``inherited``:
    what an earlier block of its section that only sets variables set, ``settings_only``)."""
    found: list[Command] = []
    variables: dict[str, str] = dict(inherited[0]) if inherited else {}
    env: dict[str, tuple[str, int]] = dict(inherited[1]) if inherited else {}
    conditions: list[bool | None] = []  # the enclosing ifs: true, false or undecided (tutorial_shell.follow_if)
    index = 0
    while index < len(block.lines):
        line = block.lines[index].strip()
        number = block.start + index
        if line.startswith(("vllm serve", "exec vllm serve")):
            try:
                tokens, used = command_tokens(block.lines, index)
            except ValueError as exc:  # an open quote to the end of the block: the shell would fail too
                found.append(Command(block.where, number, "", env=dict(env), problems=[f"line {number}: {exc}"]))
                break
            found.append(_command(block, number, tokens, variables, dict(env)))
            index += used
            continue
        if follow_if(line, variables, conditions) or follow_array(line, variables, conditions):
            index += 1
            continue
        if (match := ASSIGN.match(line)) and not line.startswith("#"):
            value = own_default(match.group(2), shell_word(match.group(3)), variables)
            value = expand(value, variables)
            if match.group(2) not in keep:
                variables[match.group(2)] = value
            if match.group(1):
                env[match.group(2)] = (value, number)
        index += 1
    return found














_ARITHMETIC = re.compile(r"\$\(\(([^()]*)\)\)")
"""A shell arithmetic expansion, ``$((37000 + $4))``: one word to the shell, whose spaces shlex would split at."""
_BARE_EXPANSION = re.compile(r"(?<=[:\[,])(\s*)(\$\(\([^()]*\)\)|\$\{[^{}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\d)"
                             r"(?=\s*[,}\]])")
"""A JSON value the shell fills in, outside the JSON's quotes (``"lookup_rpc_port":'$((37000 + $4))'``,
MiniMax-M3.md in 0.30.0rc2 :1153): read as the placeholder string it stands for."""


def command_tokens(lines: list[str], start: int) -> tuple[list[str], int]:
    """The shell words of the command starting at ``lines[start]`` and how many lines it spans."""
    text = ""
    quote = ""  # the quote open at the end of the text so far ('' none): shlex is tried only where none is
    for used, raw in enumerate(lines[start:], 1):
        line = _ARITHMETIC.sub(lambda m: "$((" + re.sub(r"\s+", "", m.group(1)) + "))", raw.rstrip())
        continued = line.endswith("\\")
        piece = line[:-1] if continued else line
        text += piece + ("\n" if not continued else " ")
        quote = _open_quote(piece, quote)
        if continued or quote:  # an open quote: the value goes on over the next line
            continue
        try:
            return shlex.split(text, comments=True), used
        except ValueError:
            continue
    try:  # the block ends inside the command (a trailing `\`): the shell runs what it has at the end
        return shlex.split(text, comments=True), len(lines) - start
    except ValueError:
        raise ValueError(f"unterminated quote in command: {text[:80]!r}") from None


def _open_quote(text: str, quote: str) -> str:
    """The quote open after ``text`` given the one open before it, as POSIX shell reads quotes: nothing
    escapes inside '…', a backslash escapes inside "…" and outside, # starts a comment at a word's start."""
    index = 0
    while index < len(text):
        char = text[index]
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            index += 1
        elif quote == '"':
            quote = "" if char == '"' else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1].isspace()):
            break
        index += 1
    return quote


def _command(block: Block, number: int, tokens: list[str], variables: dict[str, str],
             env: dict[str, tuple[str, int]]) -> Command:
    tokens = _argv(tokens[tokens[0] == "exec":])
    split = [(word, token) for token in tokens for word in words_of(token, variables)]  # each word, its raw token
    words = [word for word, _ in split]
    command = Command(block.where, number, words[2] if len(words) > 2 else "", env=env)
    span = block.lines[number - block.start:]
    read = {0, 1, 2}  # vllm serve MODEL
    seen: dict[str, int] = {}  # how often each flag stood before: a flag given twice is read (and cited) at its last
    for flag, value, index in options(words):
        written = words[index].split("=", 1)[0]
        if seen.get(written) and "." not in flag:  # given again: argparse keeps this value alone, a JSON one whole
            command.options = {k: v for k, v in command.options.items() if k != flag and not k.startswith(flag + ".")}
        _add_option(command, flag, value, number + _line_of(span, written, seen.get(written, 0), split[index][1]))
        seen[written] = seen.get(written, 0) + 1
        read |= {index, index + 1} if value is not None and "=" not in words[index] else {index}
    command.problems += [_stray(split[index][1], span, number) for index in sorted(set(range(len(words))) - read)]
    return command


def _stray(word: str, span: list[str], number: int) -> str:
    """The problem of a word that is no flag and no flag's value, at the line it stands on."""
    first = (word.splitlines() or [""])[0]
    at = next((offset for offset, line in enumerate(span) if first and first in line), 0)
    shown = first[:60] + ("…" if len(word) > len(first[:60]) else "")
    if word in ("...", "…"):  # MiniMax-M3.md 0.30.0rc2 :1563: the parser flags to add to a command written elsewhere
        return (f"line {number + at}: {shown!r} stands for flags the page does not write here: a fragment of a "
                "command, not read as one")
    return (f"line {number + at}: {shown!r} is no flag and no flag's value (a shell array or a positional "
            "argument): what it passes is not read")


_CONTROL = {"&", "&&", "|", "||", ";"}
_REDIRECT = re.compile(r"^(\d*|&)(>>?|<)(&\d+)?(.*)$")
_PLACEHOLDER = re.compile(r"<[^<>]+>\S*")
"""``<port>``, ``<MODEL_PATH>/w8a8``: a value the page leaves to the reader, not an input redirection."""


def _argv(tokens: list[str]) -> list[str]:
    """The command's own arguments: up to a control operator (``&``, ``|``, ``;``), without redirections
    (``> log``, ``2>&1``), which shlex leaves as words; a ``<placeholder>`` is an argument."""
    argv: list[str] = []
    skip = False
    for token in tokens:
        if token in _CONTROL:
            break
        if skip:
            skip = False
            continue
        if (match := _REDIRECT.match(token)) and not _PLACEHOLDER.fullmatch(token):
            skip = not match.group(3) and not match.group(4)  # `> file`: the target is the next word
            continue
        argv.append(token)
    return argv


def options(words: list[str]) -> list[tuple[str, str | None, int]]:
    """The flags of a ``vllm serve`` argv: (flag with ``_`` read as ``-`` up to its first ``.``, as vLLM's
    ``FlexibleArgumentParser`` reads it: a dotted flag's keys are a JSON object's and keep theirs, its value or None,
    the index of the flag's word); the words before the first flag (``vllm serve MODEL``) are not flags."""
    found = []
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            i += 1
            continue
        flag, value, at = word, None, i
        if "=" in word:
            flag, value = word.split("=", 1)
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            value = words[i + 1]
            i += 1
        i += 1
        name, dot, keys = flag.partition(".")
        found.append((name.replace("_", "-") + dot + keys, value, at))
    return found


def _line_of(lines: list[str], flag: str, before: int = 0, token: str = "") -> int:
    """Lines after the command's first line where ``flag`` stands (0: on the first), its ``before``-th repeat
    where it stood that often already (Qwen-VL-Dense.md's 300I DUO command gives ``--dtype`` twice: argparse
    keeps the last, and so does the reader, with its line); a flag a variable passes, where ``token`` (the
    variable, ``${SERVER_ROLE_ARGS:-}``) stands."""
    for word in (flag, token) if token and token != flag else (flag,):
        found = [offset for offset, line in enumerate(lines) if re.search(rf"(^|\s){re.escape(word)}(\s|=|$)", line)]
        if found:
            return found[min(before, len(found) - 1)] if word == flag else found[0]
    return 0


def _add_option(command: Command, flag: str, value: str | None, line: int) -> None:
    try:
        entries = option_entries(flag, value)
    except json.JSONDecodeError as exc:
        command.problems.append(f"line {line}: {flag} is not JSON ({exc}); compared as its raw text")
        entries = {flag: value}
    for key, inner in entries.items():
        command.options[key] = (inner, line)


def option_entries(flag: str, value: str | None) -> dict[str, object]:
    """One flag as compared entries: a bare flag is True, ``--no-X`` is ``--X`` False, a JSON value one
    entry per leaf (``--additional-config.key.path``), any other value its string."""
    if value is None:
        negated = flag.startswith("--no-")
        return {"--" + flag[5:] if negated else flag: not negated}
    if flag in JSON_FLAGS:
        try:
            return flatten(json.loads(value), flag)
        except json.JSONDecodeError:
            quoted = _BARE_EXPANSION.sub(r'\1"\2"', value)
            if quoted == value:
                raise
            return flatten(json.loads(quoted), flag)
    return {flag: value}


def flatten(data: object, prefix: str) -> dict[str, object]:
    """A JSON object as ``prefix.key.path`` → leaf value (lists are leaves)."""
    if not isinstance(data, dict) or not data:
        return {prefix: data}
    out: dict[str, object] = {}
    for key, value in data.items():
        out.update(flatten(value, f"{prefix}.{key}"))
    return out


def bench_lengths(text: str) -> tuple[int | None, int | None]:
    """``--random-input[-len]`` / ``--random-output[-len]`` of the page's first ``vllm bench serve``."""
    for block in _blocks(text.splitlines()):
        for index, line in enumerate(block.lines):
            if line.strip().startswith("vllm bench serve"):
                words, _ = command_tokens(block.lines, index)
                return _int_option(words, "--random-input"), _int_option(words, "--random-output")
    return None, None


def _int_option(words: list[str], flag: str) -> int | None:
    for i, word in enumerate(words[:-1]):
        if word in (flag, flag + "-len"):
            return int(words[i + 1])
    return None


__all__ = ["JSON_FLAGS", "SEPARATOR", "Block", "Command", "TextLine", "bench_lengths", "block_commands",
           "command_tokens", "commands", "flatten", "option_entries", "options", "settings_only", "walk"]
