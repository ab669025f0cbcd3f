"""The one error hierarchy of optkit.

``OptkitError`` and its subclasses are *user* errors: a bad recipe, a bad request, an
unsatisfiable plan, a patch that does not apply. They carry structured data; ``str()`` gives
the message. Anything else that escapes is an internal bug (``InternalError`` or a plain
exception) and the CLI asks for a report.
"""

from __future__ import annotations

from optkit.value import field, valueclass


class OptkitError(Exception):
    """Base class of every user-facing error."""

    exit_code = 1


class InternalError(Exception):
    """A bug in optkit itself, never caused by user input."""


@valueclass
class Location:
    """Where in which file a problem sits: ``file:line: path``."""

    file: str
    line: int | None = None
    path: str = ""

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.path}" if self.path else where


@valueclass
class Problem:
    """One problem found in a file: where, what, and how to fix it."""

    location: Location
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.location}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


class ValidationFailed(OptkitError):
    """One or more problems in recipe, model, target or request files."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ConditionError(OptkitError):
    """A condition expression that does not parse or does not type-check."""

    def __init__(self, expression: str, message: str, column: int | None = None, hint: str = ""):
        self.expression = expression
        self.message = message
        self.column = column
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        shown = self.expression if len(self.expression) <= 200 else self.expression[:160] + " … " + self.expression[-20:]
        text = f"in condition {shown!r}: {self.message}"
        if self.column is not None:
            text += f" (at column {self.column + 1})"
        return f"{text}; {self.hint}" if self.hint else text


class RequestError(OptkitError):
    """A plan request that names an unknown model, target, recipe or bad value."""


class UnknownName(RequestError):
    """A name (model, target, recipe id, fact) that does not exist, with suggestions."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind = kind
        self.name = name
        self.known = known
        super().__init__(_unknown_message(kind, name, known))


def _unknown_message(kind: str, name: str, known: list[str]) -> str:
    near = close_matches(name, known, 3)
    text = f"unknown {kind} {name!r}"
    if near:
        return text + f"; did you mean {' or '.join(repr(n) for n in near)}?"
    shown = ", ".join(sorted(known)[:12]) + (" …" if len(known) > 12 else "")
    return text + f"; known: {shown}"


def did_you_mean(name: str, known) -> str:
    """A ``did you mean 'x'?`` hint for a near-miss, or an empty string."""
    near = close_matches(name, list(known), 1)
    return f"did you mean {near[0]!r}?" if near else ""


def close_matches(name: str, known: list[str], count: int) -> list[str]:
    """Up to ``count`` names of ``known`` close to ``name`` (difflib, cutoff 0.6), best first, compared
    case-insensitively and returned as ``known`` spells them (``qwen/qwen3-235b-a2`` is near ``Qwen/Qwen3-235B-A22B``)."""
    from difflib import get_close_matches

    spelled: dict[str, str] = {}
    for candidate in known:
        spelled.setdefault(candidate.lower(), candidate)
    return [spelled[match] for match in get_close_matches(name.lower(), list(spelled), n=count, cutoff=0.6)]


@valueclass
class Reason:
    """One numbered reason why a request is impossible, with its 'required because' chain."""

    message: str
    chain: list[str] = field(default_factory=list)
    word: str = "required because"  # "because" for chains that explain an exclusion


class PlanImpossible(OptkitError):
    """The user's overrides make every plan invalid; carries the causes (resolvelib style)."""

    def __init__(self, reasons: list[Reason], relaxations: list[list[str]]):
        self.reasons = reasons
        self.relaxations = relaxations
        super().__init__(self.render())

    def render(self) -> str:
        lines = ["no valid plan for this request, for the following reasons:"]
        for n, reason in enumerate(self.reasons, 1):
            lines.append(f"  {n}. {reason.message}")
            lines.extend(f"        {reason.word} {link}" for link in reason.chain)
        if self.relaxations:
            lines.append("smallest changes that make it feasible:")
            lines.extend(f"  - {' and '.join(fix)}" for fix in self.relaxations)
        return "\n".join(lines)


class TreeError(OptkitError):
    """A source tree that is missing, not vllm-ascend, of the wrong version, or modified."""


class PatchError(OptkitError):
    """A patch that does not apply, touches paths outside the tree, or is malformed."""


class InputChanged(OptkitError):
    """A lock's input (a model config, a profile, a tree) that is not what the lock holds: replaying it
    would give another bundle. Carries the input, what changed, and the fix; the words are made here."""

    def __init__(self, kind: str, given: str, change: str, fix: str):
        self.kind, self.given, self.change, self.fix = kind, given, change, fix
        super().__init__(f"{kind} {given} {change}; {fix}")


class BundleError(OptkitError):
    """A launch bundle that fails its checks; each problem names the recipe responsible."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))
