"""Resolution, step 2: the selection as clauses (requires/conflicts links whose ``when`` holds,
exclusions, pinned recipes) and the solver's weights (``optkit.resolve.resolver``)."""

from __future__ import annotations


from optkit.catalog.loader import Catalog
from optkit.resolve.classify import _holds
from optkit.resolve.decision import Decision, Status
from optkit.resolve.facts import Facts
from optkit.value import valueclass


SOLVER_BONUS_UNQUANTIFIED = 1


@valueclass
class _Problem:
    ids: list[str]
    index: dict[str, int]
    clauses: list[tuple[int, ...]]
    clause_text: dict[tuple[int, ...], str]
    fixed: dict[int, bool]
    fixed_text: dict[int, str]
    by_var: dict[int, list[tuple[int, ...]]]


def _exclusion_text(d: Decision) -> str:
    facts = ", ".join(f"{k} = {v}" for k, v in d.facts.items())
    rule = f" (rule: {d.rule})" if d.rule else ""
    return f"{d.recipe} cannot be selected: {d.status.value}: {d.reason}{rule}" + (f" [{facts}]" if facts else "")


def _build(catalog: Catalog, facts: Facts, decisions: dict[str, Decision]) -> _Problem:
    """Clauses over the selection: exclusions are unit clauses, forced recipes are pinned."""
    ids = sorted(catalog.recipes)
    index = {rid: i for i, rid in enumerate(ids)}
    problem = _Problem(ids, index, [], {}, {}, {}, {})

    def add(clause: tuple[int, ...], text: str) -> None:
        if clause not in problem.clause_text:
            problem.clauses.append(clause)
            problem.clause_text[clause] = text
            for lit in clause:
                problem.by_var.setdefault(abs(lit) - 1, []).append(clause)

    for rid in ids:
        d, var = decisions[rid], index[rid]
        if d.status is Status.upstream:
            problem.fixed[var], problem.fixed_text[var] = True, f"{rid} is already upstream"
            continue
        if d.status is not Status.selected and not (d.forced and d.status in _SOFT):
            add((-(var + 1),), _exclusion_text(d))
        if d.forced:
            problem.fixed[var], problem.fixed_text[var] = True, f"{rid} was requested ({d.forced})"
    upstream = {rid for rid in ids if decisions[rid].status is Status.upstream}
    for recipe in catalog:
        if recipe.id in upstream:  # upstream: present, but its own links do not bind
            continue
        a = index[recipe.id] + 1
        for link in recipe.requires:
            if link.recipe in index and _holds(link.when, facts):
                add((-a, index[link.recipe] + 1), f"{recipe.id} requires {link.recipe} ({link.msg})")
        for link in recipe.conflicts:
            if link.recipe in index and link.recipe not in upstream and _holds(link.when, facts):
                lifts = tuple(index[u] + 1 for u in link.unless if u in index)
                add((-a, -(index[link.recipe] + 1)) + lifts, f"{recipe.id} conflicts with {link.recipe} ({link.msg})")
    return problem


# Statuses a forced recipe overrides (a judgement about gain or risk, not about correctness).
_SOFT = {Status.no_effect, Status.needs_opt_in, Status.regresses, Status.selected}


def _weights(problem: _Problem, decisions: dict[str, Decision]) -> list[int]:
    """Measured capacity gained (concurrent requests under the SLO, the throughput goal only), then
    measured µs saved, then the count of unquantified recipes (lexicographic)."""
    scale = len(problem.ids) + 1
    gains = [decisions[rid].benefit for rid in problem.ids]
    us = [gain.weight_us() if gain else 0 for gain in gains]
    per_request = sum(abs(u) for u in us) + 1  # one request of capacity outweighs every µs together
    weights = []
    for gain, measured in zip(gains, us):
        capacity = gain.capacity.counted if gain is not None and gain.capacity is not None else 0
        bonus = SOLVER_BONUS_UNQUANTIFIED if gain is not None and not gain.quantified else 0
        weights.append((capacity * per_request + measured) * scale + bonus)
    return weights
