"""An impossible request explained: numbered reasons, each with its "required because" chain, and
the smallest sets of overrides to drop (``optkit.resolve.resolver``, step 4)."""

from __future__ import annotations

from itertools import combinations

from optkit.catalog.conditions import compiled
from optkit.errors import PlanImpossible, Reason
from optkit.resolve.classify import _Classifier, version_ranges
from optkit.resolve.constraints import _build, _Problem, _weights
from optkit.resolve.solver import Unsatisfiable, maximize


def _impossible(catalog, facts, decisions, problem, exc: Unsatisfiable, with_ids, without_ids, baseline_for,
                unavailable, verdicts, measured, capacity=None):
    implied = sorted(rid for rid, d in decisions.items() if d.forced.startswith("implied"))
    overrides = [("--with", r) for r in with_ids] + [("--without", r) for r in without_ids]
    overrides += [("implied", r) for r in implied]
    relaxations = _minimal_relaxations(catalog, facts, overrides, decisions, baseline_for, unavailable, verdicts,
                                       measured, capacity)
    return PlanImpossible(_reasons(problem, exc), relaxations)


def _reasons(problem: _Problem, exc: Unsatisfiable) -> list[Reason]:
    reason_of = {var: clause for var, _, clause in exc.trail}
    value_of = {var: value for var, value, _ in exc.trail}
    if exc.pinned is not None:  # a requested recipe that a rule rules out
        var = exc.pinned
        why = problem.clause_text.get(exc.clause, "a constraint") if exc.clause else "a constraint"
        return [Reason(problem.fixed_text.get(var, problem.ids[var])),
                _explained(problem, reason_of, value_of, var, f"but {why}", skip_first=True)]
    if exc.clause is None:
        return [Reason("the constraints of the selected recipes cannot all hold together")]
    reasons = [_explained(problem, reason_of, value_of, abs(lit) - 1, None)
               for lit in exc.clause if abs(lit) - 1 in value_of]
    reasons.append(Reason(f"but {problem.clause_text.get(exc.clause, 'a constraint')}"))
    return reasons


def _explained(problem: _Problem, reason_of, value_of, var: int, message: str | None,
               skip_first: bool = False) -> Reason:
    """A reason about ``var`` with the chain of clauses that set it, down to a rule or a request."""
    clause = reason_of.get(var)
    value = value_of.get(var)
    if message is None:
        if clause is not None and len(clause) == 1:
            message = problem.clause_text[clause]
        elif clause is None and var in problem.fixed_text:
            message = problem.fixed_text[var]
        else:
            message = f"{problem.ids[var]} {'must be selected' if value else 'cannot be selected'}"
    word = "required because" if value else "because"
    chain = _chain(problem, reason_of, var, {var})
    return Reason(message, chain[1:] if skip_first else chain, word)


def _chain(problem: _Problem, reason_of, var: int, seen: set[int]) -> list[str]:
    """The clauses that set ``var``, back to a rule (exclusion) or a request (pinned recipe)."""
    links: list[str] = []
    while True:
        clause = reason_of.get(var)
        if clause is None:
            if links and var in problem.fixed_text:
                links.append(problem.fixed_text[var])
            return links
        if len(clause) == 1:
            if links:
                links.append(problem.clause_text[clause])
            return links
        links.append(problem.clause_text.get(clause, "a constraint"))
        causes = [abs(l) - 1 for l in clause if abs(l) - 1 not in seen]
        if not causes:
            return links
        var = causes[0]
        seen.add(var)


def _minimal_relaxations(catalog, facts, overrides, decisions, baseline_for, unavailable, verdicts,
                         measured, capacity=None) -> list[list[str]]:
    """Every smallest set of overrides whose removal makes the request feasible."""
    for size in range(1, len(overrides) + 1):
        found = []
        for drop in combinations(overrides, size):
            keep = [o for o in overrides if o not in drop]
            if _feasible(catalog, facts, keep, baseline_for, unavailable, verdicts, measured, capacity):
                found.append([_drop_words(kind, rid, catalog, decisions) for kind, rid in drop])
        if found:
            return found
    return []


def _drop_words(kind: str, rid: str, catalog, decisions) -> str:
    """How to drop one override: the flag itself, or for an implied recipe the request flags that
    imply it ("drop --mtp (it implies mtp-enable-k4)") when each fact it reads has one."""
    if kind != "implied":
        return f"drop {kind} {rid}"
    from optkit.catalog.factspec import FACTS

    flags = [FACTS[name].flag for name in compiled(catalog[rid].implied_by).fact_names()]
    if flags and all(flags):
        return f"drop {' and '.join(flags)} (it implies {rid})"
    return f"drop what implies {rid} ({decisions[rid].forced})"


def _feasible(catalog, facts, overrides, baseline_for, unavailable, verdicts, measured, capacity=None) -> bool:
    forced = {rid: "--with" for kind, rid in overrides if kind == "--with"}
    forced.update({rid: "implied" for kind, rid in overrides if kind == "implied"})
    without = {rid for kind, rid in overrides if kind == "--without"} - set(forced)
    classify = _Classifier(facts, without, forced, baseline_for, version_ranges(catalog, facts), unavailable, verdicts,
                           measured, capacity)
    decisions = {r.id: classify(r) for r in catalog}
    problem = _build(catalog, facts, decisions)
    try:
        maximize(_weights(problem, decisions), problem.clauses, problem.fixed)
    except Unsatisfiable:
        return False
    return True
