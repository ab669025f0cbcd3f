"""Exact maximum-weight selection under clauses (one algorithm, documented as such).

Variables are ``0..n-1`` with integer weights; clauses are tuples of literals (``v + 1`` means
"v selected", ``-(v + 1)`` means "v not selected"); ``fixed`` pins some variables. ``maximize``
returns the selection with the highest total weight that satisfies every clause, or raises
``Unsatisfiable`` with the clause and the chain of assignments that made it fail.

Method (branch and bound with decomposition, as in #SAT/MaxSAT component solvers):
1. unit propagation of the fixed literals and unit clauses;
2. at every search node: *pure literals* are settled (a variable that appears only positively in
   the open clauses and has weight ≥ 0 is selected; one that appears only negatively, or in no
   open clause, with weight < 0 is not; a free one with weight ≥ 0 is selected) — each is safe,
   flipping it in any solution keeps it valid and does not lower the weight;
3. the open variables are split into *independent components* (no open clause joins two) and
   each is solved on its own;
4. within a component: branch on its lowest-index variable, "selected" first, propagate, and
   prune a branch when its weight plus every remaining positive weight cannot beat the best.

Tie-break: a solution replaces the best only when strictly better, so among optimal selections
the result is the one that selects the lowest-index variable where they differ (callers number
variables in recipe-id order: ties prefer the alphabetically-first recipe). Steps 2 and 3
preserve this: a pure literal set to "selected" is selected in that tie-break optimum, and the
optimum of independent parts is the union of their optima. Exact; exponential only in the size
of a component that decomposition cannot split.
"""

from __future__ import annotations

from optkit.value import field, valueclass


Clause = tuple[int, ...]


class Unsatisfiable(Exception):
    """No selection satisfies the clauses with the fixed variables."""

    def __init__(self, clause: Clause | None, trail: list[tuple[int, bool, Clause | None]],
                 pinned: int | None = None):
        self.clause = clause  # the violated clause, or the one that set ``pinned`` the other way
        self.trail = trail  # (variable, value, clause that forced it or None for fixed/decision)
        self.pinned = pinned  # a fixed variable that the clauses force to the opposite value
        super().__init__("unsatisfiable")


@valueclass
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
            raise Unsatisfiable(state.reason[var], _trail(state), pinned=var)
    bad = _propagate(state, occurs, 0)
    if bad is not None:
        raise Unsatisfiable(bad, _trail(state))
    free = [v for v in range(n) if state.value[v] is None]
    search = _Search(weights, occurs, state)
    best = search.solve_all(free)
    if best is None:
        raise Unsatisfiable(None, _trail(state))
    for var in free:
        state.value[var] = var in best[1]
    return {v for v in range(n) if state.value[v]}


def _trail(state: _State) -> list[tuple[int, bool, Clause | None]]:
    return [(v, state.value[v], state.reason[v]) for v in state.trail]


def _is_open(state: _State, clause: Clause) -> bool:
    return not any(_literal_value(state, lit) is True for lit in clause)


class _Search:
    """The recursive part: pure literals, components, branch and bound."""

    def __init__(self, weights: list[int], occurs: list[list[Clause]], state: _State):
        self.weights = weights
        self.occurs = occurs
        self.state = state

    def undo(self, mark: int) -> None:
        for var in self.state.trail[mark:]:
            self.state.value[var] = None
            self.state.reason[var] = None
        del self.state.trail[mark:]

    def solve_all(self, variables: list[int]) -> tuple[int, set[int]] | None:
        """Best (weight, selected) over the unassigned ``variables``; assignments are undone."""
        mark = len(self.state.trail)
        self.settle_pure(variables)
        settled = [v for v in self.state.trail[mark:]]
        total = sum(self.weights[v] for v in settled if self.state.value[v])
        chosen = {v for v in settled if self.state.value[v]}
        for component in self.components([v for v in variables if self.state.value[v] is None]):
            best = self.solve_component(component)
            if best is None:
                self.undo(mark)
                return None
            total += best[0]
            chosen |= best[1]
        self.undo(mark)
        return total, chosen

    def settle_pure(self, variables: list[int]) -> None:
        for var in variables:
            if self.state.value[var] is not None:
                continue
            signs = {lit > 0 for c in self.occurs[var] if _is_open(self.state, c) for lit in c if abs(lit) - 1 == var}
            weight = self.weights[var]
            if weight >= 0 and signs <= {True}:
                _assign(self.state, var, True, None)
            elif weight < 0 and signs <= {False}:
                _assign(self.state, var, False, None)

    def components(self, variables: list[int]) -> list[list[int]]:
        parent = {v: v for v in variables}

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for var in variables:
            for clause in self.occurs[var]:
                if not _is_open(self.state, clause):
                    continue
                for lit in clause:
                    other = abs(lit) - 1
                    if other in parent:
                        ra, rb = find(var), find(other)
                        if ra != rb:
                            parent[max(ra, rb)] = min(ra, rb)
        groups: dict[int, list[int]] = {}
        for var in variables:
            groups.setdefault(find(var), []).append(var)
        return [sorted(g) for _, g in sorted(groups.items())]

    def solve_component(self, component: list[int]) -> tuple[int, set[int]] | None:
        var = component[0]
        best: tuple[int, set[int]] | None = None
        for value in (True, False):
            mark = len(self.state.trail)
            _assign(self.state, var, value, None)
            if _propagate(self.state, self.occurs, mark) is None:
                forced = self.state.trail[mark:]
                gained = sum(self.weights[v] for v in forced if self.state.value[v])
                rest = [v for v in component if self.state.value[v] is None]
                bound = gained + sum(self.weights[v] for v in rest if self.weights[v] > 0)
                if best is None or bound > best[0]:
                    sub = self.solve_all(rest)
                    if sub is not None and (best is None or gained + sub[0] > best[0]):
                        best = (gained + sub[0], {v for v in forced if self.state.value[v]} | sub[1])
            self.undo(mark)
        return best
