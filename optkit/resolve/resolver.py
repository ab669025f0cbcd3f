"""Resolution: the best valid recipe set for one request, and why every recipe ends where it does.

1. *Classify* each recipe on the facts alone, in this order: not applicable to the version, its
   standing on the release (``optkit.versions.onrelease``: already upstream, superseded, broken,
   absent, no patch written for it, a knob the release lacks), not applicable to the vLLM
   version, a precondition fails, cannot be delivered (op source or patch missing), removed by
   ``--without``, no effect here, a high-severity risk that needs an explicit ``--with``, a
   regression at a requested concurrency.
   What survives is a *candidate* with a weight (``optkit.resolve.objective``).
2. *Constrain*: every ``requires``/``conflicts`` link whose ``when`` holds becomes a clause over
   the selection; forced recipes (``--with``, ``implied_by``) are pinned in, excluded ones out.
   An upstream recipe is *present*: it meets others' requirements and lifts conflicts that name
   it in ``unless``; its own links, and conflicts against it, do not bind (the upstream form has
   its own switches).
3. *Solve* exactly (``optkit.resolve.solver``): maximize measured capacity gained under the SLO (the
   throughput goal, from records), then measured µs saved, then the number of valid unquantified
   recipes, then the documented tie-break (alphabetically-first recipe).
4. *Explain*: each recipe gets one ``Decision``; an impossible request raises ``PlanImpossible``
   with numbered reasons, each with its "required because" chain, and the smallest sets of
   overrides to drop.

Each step has its module: ``classify`` (1), ``constraints`` (2), ``solver`` (3), ``impossible``
(4, for an impossible request); what they produce is in ``decision``. This module runs them and
explains a feasible result.
"""

from __future__ import annotations

from typing import Callable

from optkit.catalog.conditions import compiled, format_value
from optkit.catalog.loader import Catalog
from optkit.errors import RequestError, UnknownName
from optkit.resolve.classify import _Classifier, _holds, version_ranges
from optkit.resolve.constraints import _SOFT, _build, _Problem, _weights
from optkit.resolve.decision import Decision, Resolution, Status
from optkit.resolve.facts import Facts
from optkit.resolve.objective import Benefit, CapacityLookup
from optkit.resolve.solver import Unsatisfiable, maximize
from optkit.versions.onrelease import Verdict, declared_verdicts

# The steps live in their own modules; these names are the resolver's face.
__all__ = ["Status", "Decision", "Resolution", "resolve", "dependency_order", "describe_benefit", "version_ranges",
           "_Classifier", "_holds", "_SOFT"]


def resolve(catalog: Catalog, facts: Facts, with_ids: list[str], without_ids: list[str],
            baseline_for: Callable, unavailable: dict[str, str] | None = None,
            verdicts: dict[str, Verdict] | None = None, measured: Callable | None = None,
            capacity: CapacityLookup | None = None) -> Resolution:
    """Resolve the catalog for ``facts`` with the user's overrides; see the module docstring.

    ``unavailable`` maps recipe ids that cannot be delivered (op source or patch missing) to why;
    ``verdicts`` says where each recipe stands on the release (``optkit.versions.onrelease``;
    default: by the version's declared release entries alone, knobs unchecked);
    ``measured(recipe_id, concurrency)`` gives numbers measured on an NPU host
    (``optkit.resolve.objective.measured_lookup``), preferred over the article's; ``capacity`` the
    capacities measured under the request's SLO (``optkit.resolve.objective.capacity_lookup``, the
    throughput goal).
    """
    if verdicts is None:
        verdicts = declared_verdicts(catalog, facts["versions.vllm_ascend"])
    for rid in [*with_ids, *without_ids]:
        if rid not in catalog:
            raise UnknownName("recipe", rid, sorted(catalog.recipes))
    both = sorted(set(with_ids) & set(without_ids))
    if both:
        raise RequestError(f"{', '.join(both)}: named in both --with and --without; keep one")
    forced = {rid: "--with" for rid in with_ids}
    for recipe in catalog:
        if recipe.implied_by and recipe.id not in forced and _holds(recipe.implied_by, facts):
            names = ", ".join(f"{n} = {format_value(facts[n])}" for n in compiled(recipe.implied_by).fact_names())
            forced[recipe.id] = f"implied by {names}"
    classify = _Classifier(facts, set(without_ids), forced, baseline_for, version_ranges(catalog, facts), unavailable,
                           verdicts, measured, capacity)
    decisions = {r.id: classify(r) for r in catalog}
    problem = _build(catalog, facts, decisions)
    try:
        chosen = maximize(_weights(problem, decisions), problem.clauses, problem.fixed)
    except Unsatisfiable as exc:
        from optkit.resolve.impossible import _impossible  # only an impossible request needs its explanation

        raise _impossible(catalog, facts, decisions, problem, exc, with_ids, without_ids,
                          baseline_for, unavailable, verdicts, measured, capacity) from None
    _explain_unselected(catalog, decisions, problem, chosen)
    selected = [rid for rid in problem.ids if problem.index[rid] in chosen and decisions[rid].status is Status.selected]
    _explain_selected(catalog, decisions, selected)
    upstream = [rid for rid in problem.ids if decisions[rid].status is Status.upstream]
    return Resolution(decisions, dependency_order(catalog, selected), upstream)


def dependency_order(catalog: Catalog, ids: list[str]) -> list[str]:
    """Selected recipes with every required recipe first; ties in id order (Kahn's algorithm)."""
    import heapq

    chosen = set(ids)
    needs = {rid: {l.recipe for l in catalog[rid].requires if l.recipe in chosen and l.recipe != rid} for rid in ids}
    waiting = {rid: len(n) for rid, n in needs.items()}
    needed_by: dict[str, list[str]] = {}
    for rid, deps in needs.items():
        for dep in deps:
            needed_by.setdefault(dep, []).append(rid)
    ready = sorted(rid for rid, count in waiting.items() if count == 0)
    order: list[str] = []
    while len(order) < len(ids):
        if not ready:  # a cycle: lint reports it; release the smallest waiting id
            stuck = min(rid for rid, count in waiting.items() if count > 0)
            waiting[stuck] = 0
            ready = [stuck]
        rid = heapq.heappop(ready)
        order.append(rid)
        for other in needed_by.get(rid, ()):
            if waiting[other] > 0:
                waiting[other] -= 1
                if waiting[other] == 0:
                    heapq.heappush(ready, other)
    return order


def _explain_selected(catalog: Catalog, decisions: dict[str, Decision], selected: list[str]) -> None:
    chosen = set(selected)
    needed_by: dict[str, set[str]] = {}
    for rid in selected:
        for link in catalog[rid].requires:
            needed_by.setdefault(link.recipe, set()).add(rid)
    for rid in selected:
        d = decisions[rid]
        if d.forced:
            d.reason = f"requested ({d.forced})"
        elif d.benefit and d.benefit.quantified:
            d.reason = "expected gain: " + describe_benefit(d.benefit)
        elif catalog[rid].derived:
            d.reason = ("sets launch values by rule (unquantified: no measured number backs them; "
                        "optkit explain shows each value and its rule)")
        elif d.benefit and any(basis != "unquantified" for basis in d.benefit.basis.values()):
            d.reason = "valid and effective here; " + describe_benefit(d.benefit)  # e.g. a gain not carried up
        else:
            d.reason = "valid and effective here; the article gives no TPOT number for this workload"
        users = sorted(needed_by.get(rid, set()) & chosen)
        if users:
            d.chain = [f"required by {', '.join(users)}"]


def describe_benefit(gain: Benefit) -> str:
    """Per concurrency, the TPOT change and its basis; a capacity measured under the request's SLO comes
    first and replaces the concurrencies without a number (their "unquantified")."""
    parts = [gain.capacity.text()] if gain.capacity is not None else []
    for c, ms in sorted(gain.per_concurrency.items()):
        if ms is None and gain.capacity is not None:
            continue
        if ms is None:
            parts.append(f"c{c} {gain.basis.get(c, 'unquantified')}")
        else:
            note = "" if gain.basis[c] == "reported" else f" ({gain.basis[c]})"
            parts.append(f"c{c} {_signed_ms(ms)}{note}")
    return ", ".join(parts)


def _signed_ms(ms: float) -> str:
    """A TPOT change as saved (−) or added (+) milliseconds; one that rounds to nothing is said so, not '−0 ms'."""
    if f"{abs(ms):.3g}" == "0":
        return "no change"
    return f"−{ms:.3g} ms" if ms > 0 else f"+{-ms:.3g} ms"


def _explain_unselected(catalog, decisions, problem: _Problem, chosen: set[int]) -> None:
    for rid in problem.ids:
        d = decisions[rid]
        if d.status is not Status.selected or problem.index[rid] in chosen:
            continue
        d.status = Status.objective
        d.reason = _why_left_out(rid, decisions, problem, chosen)


def _why_left_out(rid: str, decisions, problem: _Problem, chosen: set[int]) -> str:
    """The first clause that adding ``rid`` to the chosen set would break, in words."""
    var = problem.index[rid] + 1
    for clause in problem.by_var.get(var - 1, ()):
        if -var not in clause:
            continue
        others = [l for l in clause if l != -var]
        if others and all((abs(l) - 1 in chosen) != (l > 0) for l in others):
            return _left_out_text(rid, clause, decisions, problem, chosen)
    return "left out by the optimum (no better-scoring valid set includes it)"


def _left_out_text(rid: str, clause, decisions, problem: _Problem, chosen: set[int]) -> str:
    text = problem.clause_text[clause]
    other = problem.ids[abs(clause[1]) - 1] if abs(clause[0]) - 1 == problem.index[rid] else problem.ids[abs(clause[0]) - 1]
    od = decisions[other]
    if problem.index[other] in chosen:
        mine = describe_benefit(decisions[rid].benefit) if decisions[rid].benefit else "—"
        theirs = describe_benefit(od.benefit) if od.benefit else "—"
        return f"{text}; {other} won (its gain: {theirs}; this one: {mine})"
    if od.status in (Status.selected, Status.objective):  # valid, and left out by the optimum as well
        return f"{text}; {other} is left out by the optimum too (no better-scoring valid set includes either)"
    return f"{text}; {other} is not selected ({od.status.value}: {od.reason})"
