"""Exact maximum-weight selection under clauses (one algorithm, documented as such).

Variables are ``0..n-1`` with integer weights; clauses are tuples of literals (``v + 1`` means
"v selected", ``-(v + 1)`` means "v not selected"); ``fixed`` pins some variables. ``maximize``
returns the selection with the highest total weight that satisfies every clause, or raises
``Unsatisfiable`` with the clause and the chain of assignments that made it fail.

Method: unit propagation of the fixed literals, then the variables are split into independent
components (no clause joins two components) and each component is solved by depth-first
branch and bound: variables in index order, "selected" tried before "not selected", unit
propagation after each decision, pruning when the weight so far plus every remaining positive
weight cannot *beat* the best found. Because a later solution replaces the best only when it
is strictly better, ties go to the first one in search order: among optimal selections, the one
that selects the lowest-index variable where they differ (callers number variables in recipe-id
order, so ties prefer the alphabetically-first recipe). Exact; exponential only in the size of
one component, which is small for recipe catalogs (constraints stay within a family).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

Clause = tuple[int, ...]


class Unsatisfiable(Exception):
    """No selection satisfies the clauses with the fixed variables."""

    def __init__(self, clause: Clause | None, trail: list[tuple[int, bool, Clause | None]]):
        self.clause = clause
        self.trail = trail  # (variable, value, clause that forced it or None for fixed/decision)
        super().__init__("unsatisfiable")


@dataclass
class _State:
    value: list  # None / True / False per variable
    reason: list  # clause that forced each assignment (None: fixed or decided)
    trail: list = field(default_factory=list)


def _literal_value(state: _State, lit: int):
    v = state.value[abs(lit) - 1]
    return None if v is None else (v if lit > 0 else not v)


def _assign(state: _State, var: int, value: bool, reason: Clause | None) -> None:
    state.value[var] = value
    state.reason[var] = reason
    state.trail.append(var)


def _propagate(state: _State, occurs: list[list[Clause]], start: int) -> Clause | None:
    """Unit propagation from trail position ``start``; returns a violated clause or None."""
    head = start
    while head < len(state.trail):
        var = state.trail[head]
        head += 1
        for clause in occurs[var]:
            unassigned, satisfied = None, False
            count = 0
            for lit in clause:
                lv = _literal_value(state, lit)
                if lv is True:
                    satisfied = True
                    break
                if lv is None:
                    count += 1
                    unassigned = lit
            if satisfied:
                continue
            if count == 0:
                return clause
            if count == 1:
                _assign(state, abs(unassigned) - 1, unassigned > 0, clause)
    return None


def _components(n: int, clauses: list[Clause], free: list[int]) -> list[list[int]]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for clause in clauses:
        vars_ = [abs(l) - 1 for l in clause]
        for other in vars_[1:]:
            ra, rb = find(vars_[0]), find(other)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for var in free:
        groups.setdefault(find(var), []).append(var)
    return [sorted(g) for _, g in sorted(groups.items())]


def maximize(weights: list[int], clauses: list[Clause], fixed: dict[int, bool] | None = None) -> set[int]:
    """The optimal selection (set of variable indices); see the module docstring."""
    n = len(weights)
    occurs: list[list[Clause]] = [[] for _ in range(n)]
    for clause in clauses:
        for lit in set(clause):
            occurs[abs(lit) - 1].append(clause)
    state = _State([None] * n, [None] * n)
    for clause in clauses:  # clauses that are units from the start
        if len(clause) == 1 and _literal_value(state, clause[0]) is None:
            _assign(state, abs(clause[0]) - 1, clause[0] > 0, clause)
    for var, value in sorted((fixed or {}).items()):
        current = state.value[var]
        if current is None:
            _assign(state, var, value, None)
        elif current != value:
            raise Unsatisfiable(None, _trail(state) + [(var, value, None)])
    bad = _propagate(state, occurs, 0)
    if bad is not None:
        raise Unsatisfiable(bad, _trail(state))
    free = [v for v in range(n) if state.value[v] is None]
    for component in _components(n, clauses, free):
        best = _branch_and_bound(component, weights, occurs, state)
        if best is None:
            raise Unsatisfiable(None, _trail(state))
        for var in component:
            state.value[var] = var in best
    return {v for v in range(n) if state.value[v]}


def _trail(state: _State) -> list[tuple[int, bool, Clause | None]]:
    return [(v, state.value[v], state.reason[v]) for v in state.trail]


def _branch_and_bound(component: list[int], weights, occurs, state: _State) -> set[int] | None:
    best: list = [None, None]  # weight, selection
    order = component
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * len(order) + 200))
    try:
        _search(0, order, weights, occurs, state, best)
    finally:
        sys.setrecursionlimit(limit)
    return best[1]


def _search(i: int, order, weights, occurs, state: _State, best: list) -> None:
    while i < len(order) and state.value[order[i]] is not None:
        i += 1
    current = sum(weights[v] for v in order if state.value[v])
    if i == len(order):
        if best[0] is None or current > best[0]:
            best[0], best[1] = current, {v for v in order if state.value[v]}
        return
    optimistic = current + sum(weights[v] for v in order if state.value[v] is None and weights[v] > 0)
    if best[0] is not None and optimistic <= best[0]:
        return
    var = order[i]
    for value in (True, False):
        mark = len(state.trail)
        _assign(state, var, value, None)
        if _propagate(state, occurs, mark) is None:
            _search(i + 1, order, weights, occurs, state, best)
        for undo in state.trail[mark:]:
            state.value[undo] = None
            state.reason[undo] = None
        del state.trail[mark:]
