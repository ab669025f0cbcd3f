"""The accuracy gate: the recipes' accuracy claims checked on the ladder's greedy outputs.

Each step's outputs (accuracy.json of its first counted repeat; every repeat of a step must give
the same tokens, or the server is not deterministic at temperature 0 and the step fails) are
compared with those of the step it is measured against, and the whole plan's with the baseline's:

- when every recipe that differs claims ``greedy-identical``, every prompt must give the same tokens;
  the failure names the step, the recipe, the first prompt that diverges and the token index where;
- otherwise, when any differing recipe declares a ``tolerance``, the exact-match accuracy (prompts
  with an answer) with the recipes may be at most the margin below the accuracy without them: the
  smallest margin of the step's tolerance recipes, and for the whole plan the largest of all (the
  stack may not lose more than any one of its changes is allowed to);
- recipes without a claim: a change in the outputs is reported, not gated.

A comparison that lacks outputs (a step not run, accuracy.json missing) is "not checked", an issue
of the report, not a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optkit.measure.accuracy import PromptSet, correct


@dataclass
class Check:
    """One comparison: ``with_`` (the outputs with the recipes) against ``without``."""

    with_: str
    without: str
    recipes: list[str]
    kind: str  # "identical", "tolerance", "no-claim"
    status: str = "not-checked"  # passed, failed, changed (no claim), not-checked
    detail: str = ""


@dataclass
class Gate:
    checks: list[Check] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    accuracy: dict[str, float] = field(default_factory=dict)
    """Exact-match accuracy (%) of each step's outputs."""

    @property
    def passed(self) -> bool:
        return not self.failures and all(c.status != "not-checked" for c in self.checks)

    @property
    def unchecked(self) -> list[str]:
        """Each comparison that could not be checked, in words (a reason it did not pass)."""
        return [f"{c.with_} against {c.without} not checked: {c.detail}" for c in self.checks if c.status == "not-checked"]


def outputs_of(runs) -> tuple[dict | None, str]:
    """The outputs of a step's first run that has them, and a failure if its repeats disagree."""
    found = [(r.repeat, r.accuracy) for r in runs if r.accuracy]
    if not found:
        return None, ""
    first_repeat, first = found[0]
    for repeat, other in found[1:]:
        where = first_divergence(other, first, (f"r{repeat}", f"r{first_repeat}"))
        if where:
            return first, (f"repeat r{repeat} gives other greedy outputs than r{first_repeat} ({where}): the server "
                           "is not deterministic at temperature 0, so its outputs cannot be compared")
    return first, ""


def first_divergence(a: dict, b: dict, names: tuple[str, str] = ("with", "without")) -> str:
    """Where the accuracy.json outputs ``a`` first differ from ``b`` (named ``names``), in words ('' when identical)."""
    theirs = {o["id"]: o for o in b["outputs"]}
    for mine in a["outputs"]:
        other = theirs.get(mine["id"])
        if other is None:
            return f"prompt {mine['id']!r} has no output in the other"
        x, y = mine.get("token_ids"), other.get("token_ids")
        if x is not None and y is not None:
            for i, (p, q) in enumerate(zip(x, y)):
                if p != q:
                    return f"prompt {mine['id']!r} diverges at token {i}: id {q} {names[1]}, {p} {names[0]}"
            if len(x) != len(y):
                return f"prompt {mine['id']!r} diverges at token {min(len(x), len(y))}: one output ends there"
        elif mine["text"] != other["text"]:
            i = next((k for k, (p, q) in enumerate(zip(mine["text"], other["text"])) if p != q),
                     min(len(mine["text"]), len(other["text"])))
            return f"prompt {mine['id']!r} diverges at character {i} (no token ids returned)"
    return ""


def exact_match(outputs: dict, prompts: PromptSet) -> float:
    """Percent of the prompts with an answer whose completion gives it."""
    texts = {o["id"]: o["text"] for o in outputs["outputs"]}
    questions = [p for p in prompts.prompts if p.answer is not None]
    return 100.0 * sum(correct(p, texts.get(p.id, "")) for p in questions) / max(len(questions), 1)


def evaluate(pairs: list[tuple[str, str, list[str], bool]], outputs: dict[str, dict | None], claims: dict,
             prompts: PromptSet, repeat_failures: dict[str, str]) -> Gate:
    """The gate over ``pairs`` (with-step, without-step, the recipes that differ, is it the whole plan)."""
    gate = Gate()
    for step, why in sorted(repeat_failures.items()):
        if why:
            gate.failures.append(f"{step}: {why}")
    gate.accuracy = {step: exact_match(out, prompts) for step, out in outputs.items() if out}
    for with_, without, recipes, whole in pairs:
        gate.checks.append(_check(with_, without, recipes, whole, outputs, claims, gate))
    return gate


def _check(with_, without, recipes, whole, outputs, claims, gate: Gate) -> Check:
    declared = [claims.get(r) for r in recipes]
    margins = [c["margin"] for c in declared if c and c["check"] == "tolerance"]
    kind = "identical" if all(c and c["check"] == "greedy-identical" for c in declared) else \
        "tolerance" if margins else "no-claim"
    check = Check(with_, without, list(recipes), kind)
    a, b = outputs.get(with_), outputs.get(without)
    if a is None or b is None:
        check.detail = "no accuracy outputs for " + " and ".join(s for s, o in ((with_, a), (without, b)) if o is None)
        return check
    what = "the whole plan" if whole else " + ".join(recipes)
    if kind == "identical":
        where = first_divergence(a, b)
        check.status, check.detail = ("failed", where) if where else ("passed", "every token identical")
        if where:
            gate.failures.append(f"{with_} ({what}, claimed greedy-identical) against {without}: {where}")
    elif kind == "tolerance":
        margin = max(margins) if whole else min(margins)
        have, base = gate.accuracy[with_], gate.accuracy[without]
        check.detail = f"exact match {have:.1f}% against {base:.1f}% (margin {margin:g} points)"
        check.status = "passed" if have >= base - margin else "failed"
        if check.status == "failed":
            gate.failures.append(f"{with_} ({what}, tolerance {margin:g} points) against {without}: exact-match "
                                 f"accuracy {have:.1f}% is more than {margin:g} points below {base:.1f}%")
    else:
        where = first_divergence(a, b)
        check.status, check.detail = ("changed", where) if where else ("passed", "every token identical")
    return check


__all__ = ["Gate", "Check", "evaluate", "first_divergence", "exact_match", "outputs_of"]
