"""The shell state a tutorial code block builds before its ``vllm serve``: variables and exports (``K=value``, a
variable's own default ``X="${X:-3600}"``), bash arrays (``ARGS=()``, ``ARGS+=(…)``) and the ``if`` branches that
decide whether an append runs; and the words a command's token expands to with that state
(``tutorial_commands.block_commands`` keeps the state and reads the commands)."""

from __future__ import annotations

import re
import shlex

ASSIGN = re.compile(r"^(export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^{}$]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
"""A variable expanded: ``$X``, ``${X}``, or ``${X:-default}`` (X where it is set and not empty, else the default:
read only where the block or a wrapper sets X, GLM5.3-Flash.md's ``${SERVER_ROLE_ARGS:-}``, 0.30.0rc2 :617; an X
no one sets stays as written, since a wrapper the reader did not see may set it)."""


_ARRAY_SET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=\((.*)\)\s*$")
"""A bash array set or appended to: ``HEADLESS_ARGS=()``, ``HEADLESS_ARGS+=(--headless --data-parallel-start-rank
"$NODE_RANK")`` (DeepSeek-V4.1-Flash.md 0.30.0rc2 :674-677)."""


_ARRAY_USE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}")


_IF = re.compile(r"^if\s+\[\[?\s+(\S+)\s+(==|!=|=)\s+(\S+)\s+\]\]?\s*(;\s*then)?\s*$")
"""A condition the reader decides: two words compared (``if [[ "$NODE_RANK" != "0" ]]; then``), each a literal or
a variable the block set; any other ``if`` it leaves undecided."""


def own_default(name: str, value: str, variables: dict[str, str]) -> str:
    """``export X="${X:-3600}"``: the host's X, else 3600 — read as 3600 where the page sets no X before (a fresh
    host's value: DeepSeek-V4.1-Flash.md's ``VLLM_ENGINE_READY_TIMEOUT_S``, 0.30.0rc2 :664); any other value as is."""
    match = re.fullmatch(r"\$\{" + re.escape(name) + r":-([^{}$]*)\}", value)
    return match.group(1) if match and name not in variables else value


def follow_if(line: str, variables: dict[str, str], conditions: list[bool | None]) -> bool:
    """Follow an ``if``/``else``/``elif``/``fi`` line (True where ``line`` is one): ``conditions`` holds, innermost
    last, whether each enclosing branch runs (None: undecided)."""
    if match := _IF.match(line):
        left, right = (expand(shell_word(word), variables) for word in (match.group(1), match.group(3)))
        decided = "$" not in left + right
        conditions.append(((left == right) == (match.group(2) != "!=")) if decided else None)
    elif line.startswith("if "):
        conditions.append(None)
    elif line == "else" and conditions:
        conditions[-1] = None if conditions[-1] is None else not conditions[-1]
    elif line.startswith("elif ") and conditions:
        conditions[-1] = None
    elif line in ("fi", "fi;") and conditions:
        conditions.pop()
    else:
        return False
    return True


def follow_array(line: str, variables: dict[str, str], conditions: list[bool | None]) -> bool:
    """Follow a bash array set or appended to (``_ARRAY_SET``), held in ``variables`` as ``NAME[@]``, its words
    shell-quoted (True where ``line`` is one). A branch that does not run leaves it as it was; an undecided one
    leaves it unknown (dropped), so that a command using it is not read (a problem, not a guess)."""
    match = _ARRAY_SET.match(line)
    if not match:
        return False
    key = f"{match.group(1)}[@]"
    if False in conditions:
        return True
    if None in conditions:
        variables.pop(key, None)
        return True
    try:
        words = [expand(word, variables) for word in shlex.split(match.group(3))]
    except ValueError:
        variables.pop(key, None)
        return True
    before = shlex.split(variables[key]) if match.group(2) and key in variables else []
    if match.group(2) and key not in variables:
        return True  # appended to an array it does not know: stays unknown
    variables[key] = shlex.join([*before, *words])
    return True


def shell_word(text: str) -> str:
    """The value of ``K=value``: one shell word (quotes removed), a trailing comment dropped."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return text.strip()
    return words[0] if words else ""


def words_of(token: str, variables: dict[str, str]) -> list[str]:
    """A shell word after expansion: a word that is one variable alone (``$server_role_args``) splits at the
    spaces of its value, as the shell splits an unquoted expansion (GLM5.2.md's ``server_role_args="--api-server-count
    16"``, 0.30.0rc2 :575); any other word is one word."""
    if (array := _ARRAY_USE.fullmatch(token)) and f"{array.group(1)}[@]" in variables:
        return shlex.split(variables[f"{array.group(1)}[@]"])  # "${ARGS[@]}": its words, each one word
    expanded = expand(token, variables)
    return expanded.split() if _VAR.fullmatch(token) and expanded != token else [expanded]


def expand(text: str, variables: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        if name not in variables:
            return match.group(0)
        default = match.group(2)
        return variables[name] or (default if default is not None else "")
    return _VAR.sub(value, text)
