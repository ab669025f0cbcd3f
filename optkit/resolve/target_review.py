"""Which recipes each target can select, read from the recipes' own target rules.

A precondition that reads only ``target.*`` facts decides a recipe on a target by itself; this module
evaluates every such rule against every target of ``targets/`` (no variant), so docs/targets.md can show
the catalog's hardware reach as one generated table, each refusal with its rule's reason. A precondition
that also reads other facts is shown as depending on the request.
"""

from __future__ import annotations

from optkit.catalog.conditions import compiled
from optkit.value import valueclass


@valueclass(frozen=True)
class TargetVerdict:
    """One recipe on one target: 'yes', 'no' (a target rule refuses it) or 'depends' (a rule reads more)."""

    verdict: str
    reason: str = ""


@valueclass(frozen=True)
class RecipeReach:
    """One recipe's verdict per target id, in the order of the targets given."""

    recipe: str
    verdicts: tuple[tuple[str, TargetVerdict], ...]


def _target_rules(recipe) -> list:
    return [rule for rule in recipe.preconditions
            if any(name.startswith("target.") for name in compiled(rule.when).fact_names())]


def _verdict(rules: list, facts: dict) -> TargetVerdict:
    for rule in rules:
        condition = compiled(rule.when)
        if not all(name in facts for name in condition.fact_names()):
            return TargetVerdict("depends", f"{rule.when}: {rule.msg}")
        if not condition.evaluate(facts):
            return TargetVerdict("no", f"{rule.when}: {rule.msg}")
    return TargetVerdict("yes")


def recipe_reach(catalog, targets: dict) -> list[RecipeReach]:
    """Every recipe of ``catalog`` (sorted by id) judged on every target of ``targets`` (sorted by id)."""
    facts = {tid: targets[tid].facts() for tid in sorted(targets)}
    return [RecipeReach(recipe.id, tuple((tid, _verdict(_target_rules(recipe), f)) for tid, f in facts.items()))
            for recipe in sorted(catalog, key=lambda r: r.id)]


def reach_markdown(rows: list[RecipeReach]) -> str:
    """The table of docs/targets.md: a column per target, then the reasons of every refusal."""
    ids = [tid for tid, _ in rows[0].verdicts] if rows else []
    out = ["| recipe | " + " | ".join(ids) + " | target rule |", "|---" * (len(ids) + 2) + "|"]
    for row in rows:
        marks = [verdict.verdict for _, verdict in row.verdicts]
        reasons = sorted({verdict.reason for _, verdict in row.verdicts if verdict.reason})
        reason = " ".join(reasons).replace("|", "\\|").replace("\n", " ") or "none: selectable on every target"
        out.append(f"| {row.recipe} | " + " | ".join(marks) + f" | {reason} |")
    return "\n".join(out)
