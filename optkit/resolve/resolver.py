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
3. *Solve* exactly (``optkit.resolve.solver``): maximize measured µs saved, then the number of valid
   unquantified recipes, then the documented tie-break (alphabetically-first recipe).
4. *Explain*: each recipe gets one ``Decision``; an impossible request raises ``PlanImpossible``
   with numbered reasons, each with its "required because" chain, and the smallest sets of
   overrides to drop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from itertools import combinations
from typing import Callable

from optkit.catalog.conditions import compiled, format_value
from optkit.catalog.frozen import Record
from optkit.catalog.loader import Catalog
from optkit.catalog.recipe_records import RecipeRecord
from optkit.errors import PlanImpossible, Reason, RequestError, UnknownName
from optkit.resolve.facts import Facts
from optkit.resolve.objective import Benefit, benefit
from optkit.resolve.solver import Unsatisfiable, maximize
from optkit.catalog.specifiers import VersionRanges
from optkit.versions.onrelease import Verdict, declared_verdicts



class Status(str, Enum):
    selected = "selected"
    not_applicable = "not-applicable"  # version outside the recipe's range
    upstream = "upstream"  # already in this version
    superseded = "superseded"  # the code it changes was replaced upstream
    broken = "broken"  # machinery it calls is gone from this release
    absent = "absent"  # the code it changes is not in this release
    no_patch = "no-patch"  # still new on this release, but no patch set was written for it
    knob_missing = "knob-missing"  # a knob it sets is removed, rejected or ignored by this release
    excluded = "excluded"  # a precondition fails (correctness)
    unavailable = "unavailable"  # cannot be delivered here: op source or patch missing
    user_excluded = "user-excluded"  # --without
    no_effect = "no-effect"  # effective_when fails
    needs_opt_in = "needs-opt-in"  # high-severity risk
    regresses = "regresses"  # slower at a requested concurrency
    objective = "objective"  # valid, but the optimum leaves it out


_BY_VERDICT = {"upstream": Status.upstream, "superseded": Status.superseded, "broken": Status.broken,
               "absent": Status.absent, "no-patch": Status.no_patch, "knob-missing": Status.knob_missing,
               "undeclared": Status.not_applicable}


@dataclass
class Decision:
    """Where one recipe ended and why, with the rule, the facts it read and their values."""

    recipe: str
    status: Status
    reason: str
    rule: str = ""
    facts: dict[str, str] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    benefit: Benefit | None = None
    forced: str = ""  # why it was pinned in: "--with", "implied by spec.mtp = true"
    notes: list[str] = field(default_factory=list)  # what the release changed: knobs renamed or moved, probes


@dataclass
class Resolution:
    decisions: dict[str, Decision]
    selected: list[str]  # dependency order
    upstream: list[str]


SOLVER_BONUS_UNQUANTIFIED = 1


def _rule_facts(rule_text: str, facts: Facts) -> dict[str, str]:
    return {n: format_value(facts[n]) for n in compiled(rule_text).fact_names()}


def _failing(rules: list[Record], facts: Facts) -> Record | None:
    return next((r for r in rules if not compiled(r.when).evaluate(facts.values)), None)


def _holds(when: str | None, facts: Facts) -> bool:
    return when is None or compiled(when).evaluate(facts.values)


def _active_high_risk(recipe: RecipeRecord, facts: Facts):
    return next((r for r in recipe.risks if r.severity == "high" and _holds(r.when, facts)), None)


def version_ranges(catalog: Catalog, facts: Facts) -> VersionRanges:
    """The catalog's version ranges (its recipes' and their release entries'), answered at the
    request's vllm-ascend and vLLM versions."""
    specifiers = [s for r in catalog for s in (r.versions.vllm_ascend, r.versions.vllm, *(e.versions for e in r.releases))]
    return VersionRanges(specifiers, (facts["versions.vllm_ascend"], facts["versions.vllm"]))


class _Classifier:
    def __init__(self, facts: Facts, without: set[str], forced: dict[str, str], baseline_for: Callable,
                 ranges: VersionRanges, unavailable: dict[str, str] | None = None,
                 verdicts: dict[str, Verdict] | None = None, measured: Callable | None = None):
        self.facts = facts
        self.ranges = ranges
        self.without = without
        self.forced = forced
        self.baseline_for = baseline_for
        self.unavailable = unavailable or {}
        self.verdicts = verdicts or {}
        self.measured = measured

    def __call__(self, recipe: RecipeRecord) -> Decision:
        f = self.facts
        ascend = f["versions.vllm_ascend"]
        forced = self.forced.get(recipe.id, "")
        if not self.ranges.contains(recipe.versions.vllm_ascend, ascend):
            return Decision(recipe.id, Status.not_applicable,
                            f"applies to vllm-ascend {recipe.versions.vllm_ascend}, this is {ascend}",
                            facts={"versions.vllm_ascend": str(ascend)}, forced=forced)
        verdict = self.verdicts.get(recipe.id)
        notes = list(verdict.notes) if verdict else []
        if verdict is not None and verdict.status != "ok":
            return Decision(recipe.id, _BY_VERDICT[verdict.status], verdict.reason,
                            facts={"versions.vllm_ascend": str(ascend)}, forced=forced, notes=notes)
        decision = self._on_facts(recipe, forced)
        decision.notes = notes
        return decision

    def _on_facts(self, recipe: RecipeRecord, forced: str) -> Decision:
        f = self.facts
        vllm = f["versions.vllm"]
        if not self.ranges.contains(recipe.versions.vllm, vllm):
            return Decision(recipe.id, Status.not_applicable,
                            f"applies to vLLM {recipe.versions.vllm}, this is {vllm}",
                            facts={"versions.vllm": str(vllm)}, forced=forced)
        rule = _failing(recipe.preconditions, f)
        if rule:
            return Decision(recipe.id, Status.excluded, rule.msg, rule.when, _rule_facts(rule.when, f), forced=forced)
        if recipe.id in self.unavailable:
            return Decision(recipe.id, Status.unavailable, self.unavailable[recipe.id], forced=forced)
        if recipe.id in self.without:
            return Decision(recipe.id, Status.user_excluded, "left out with --without", forced=forced)
        gain = benefit(recipe, f["workload.concurrency"], f["spec.mtp"], self.baseline_for, self.measured)
        decision = Decision(recipe.id, Status.selected, "", benefit=gain, forced=forced)
        if forced:
            return decision
        rule = _failing(recipe.effective_when, f)
        if rule:
            decision.status, decision.reason, decision.rule = Status.no_effect, rule.msg, rule.when
            decision.facts = _rule_facts(rule.when, f)
        elif (risk := _active_high_risk(recipe, f)) is not None:
            decision.status = Status.needs_opt_in
            decision.reason = f"high risk, select it explicitly with --with {recipe.id}: {risk.text.strip()}"
        elif gain.regressions:
            decision.status = Status.regresses
            decision.reason = "slower at " + ", ".join(
                f"c{c} (+{ms:g} ms" + ("" if gain.basis[c] == "reported" else f", {gain.basis[c]}") + ")"
                for c, ms in sorted(gain.regressions.items()))
        return decision


@dataclass
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
    """Measured µs saved, scaled above the count of unquantified recipes (lexicographic)."""
    scale = len(problem.ids) + 1
    weights = []
    for rid in problem.ids:
        gain = decisions[rid].benefit
        measured = gain.weight_us() if gain else 0
        bonus = SOLVER_BONUS_UNQUANTIFIED if gain is not None and not gain.quantified else 0
        weights.append(measured * scale + bonus)
    return weights


def resolve(catalog: Catalog, facts: Facts, with_ids: list[str], without_ids: list[str],
            baseline_for: Callable, unavailable: dict[str, str] | None = None,
            verdicts: dict[str, Verdict] | None = None, measured: Callable | None = None) -> Resolution:
    """Resolve the catalog for ``facts`` with the user's overrides; see the module docstring.

    ``unavailable`` maps recipe ids that cannot be delivered (op source or patch missing) to why;
    ``verdicts`` says where each recipe stands on the release (``optkit.versions.onrelease``;
    default: by the version's declared release entries alone, knobs unchecked);
    ``measured(recipe_id, concurrency)`` gives numbers measured on an NPU host
    (``optkit.resolve.objective.measured_lookup``), preferred over the article's.
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
                           verdicts, measured)
    decisions = {r.id: classify(r) for r in catalog}
    problem = _build(catalog, facts, decisions)
    try:
        chosen = maximize(_weights(problem, decisions), problem.clauses, problem.fixed)
    except Unsatisfiable as exc:
        raise _impossible(catalog, facts, decisions, problem, exc, with_ids, without_ids,
                          baseline_for, unavailable, verdicts, measured) from None
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
        else:
            d.reason = "valid and effective here; the article gives no TPOT number for this workload"
        users = sorted(needed_by.get(rid, set()) & chosen)
        if users:
            d.chain = [f"required by {', '.join(users)}"]


def describe_benefit(gain: Benefit) -> str:
    parts = []
    for c, ms in sorted(gain.per_concurrency.items()):
        if ms is None:
            parts.append(f"c{c} unquantified")
        else:
            note = "" if gain.basis[c] == "reported" else f" ({gain.basis[c]})"
            parts.append(f"c{c} −{ms:.3g} ms{note}" if ms >= 0 else f"c{c} +{-ms:.3g} ms{note}")
    return ", ".join(parts)


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


# --- impossible requests -------------------------------------------------------------------------


def _impossible(catalog, facts, decisions, problem, exc: Unsatisfiable, with_ids, without_ids, baseline_for,
                unavailable, verdicts, measured):
    implied = sorted(rid for rid, d in decisions.items() if d.forced.startswith("implied"))
    overrides = [("--with", r) for r in with_ids] + [("--without", r) for r in without_ids]
    overrides += [("implied", r) for r in implied]
    relaxations = _minimal_relaxations(catalog, facts, overrides, decisions, baseline_for, unavailable, verdicts,
                                       measured)
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
                         measured) -> list[list[str]]:
    """Every smallest set of overrides whose removal makes the request feasible."""
    for size in range(1, len(overrides) + 1):
        found = []
        for drop in combinations(overrides, size):
            keep = [o for o in overrides if o not in drop]
            if _feasible(catalog, facts, keep, baseline_for, unavailable, verdicts, measured):
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


def _feasible(catalog, facts, overrides, baseline_for, unavailable, verdicts, measured) -> bool:
    forced = {rid: "--with" for kind, rid in overrides if kind == "--with"}
    forced.update({rid: "implied" for kind, rid in overrides if kind == "implied"})
    without = {rid for kind, rid in overrides if kind == "--without"} - set(forced)
    classify = _Classifier(facts, without, forced, baseline_for, version_ranges(catalog, facts), unavailable, verdicts,
                           measured)
    decisions = {r.id: classify(r) for r in catalog}
    problem = _build(catalog, facts, decisions)
    try:
        maximize(_weights(problem, decisions), problem.clauses, problem.fixed)
    except Unsatisfiable:
        return False
    return True
