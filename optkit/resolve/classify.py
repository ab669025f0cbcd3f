"""Resolution, step 1: classify each recipe on the facts alone (``optkit.resolve.resolver``'s
docstring gives the order); what survives is a candidate with its expected benefit."""

from __future__ import annotations

from typing import Callable

from optkit.catalog.conditions import compiled, format_value
from optkit.catalog.frozen import Record
from optkit.catalog.loader import Catalog
from optkit.catalog.recipe_records import RecipeRecord
from optkit.catalog.specifiers import VersionRanges
from optkit.resolve.decision import Decision, Status
from optkit.resolve.facts import Facts
from optkit.resolve.objective import CapacityLookup, benefit
from optkit.versions.onrelease import Verdict

_BY_VERDICT = {"upstream": Status.upstream, "superseded": Status.superseded, "broken": Status.broken,
               "absent": Status.absent, "no-patch": Status.no_patch, "knob-missing": Status.knob_missing,
               "undeclared": Status.not_applicable}


def _rule_facts(rule_text: str, facts: Facts) -> dict[str, str]:
    return {n: format_value(facts[n]) for n in compiled(rule_text).fact_names()}


def _failing(rules: list[Record], facts: Facts) -> Record | None:
    return next((r for r in rules if not compiled(r.when).evaluate(facts.values)), None)


def _holds(when: str | None, facts: Facts) -> bool:
    return when is None or compiled(when).evaluate(facts.values)


def risks_that_hold(recipe: RecipeRecord, facts: Facts) -> list:
    """The recipe's risks whose ``when`` holds for ``facts`` (what explain and the bundle's README show)."""
    return [r for r in recipe.risks if _holds(r.when, facts)]


def _active_high_risk(recipe: RecipeRecord, facts: Facts):
    return next((r for r in risks_that_hold(recipe, facts) if r.severity == "high"), None)


def version_ranges(catalog: Catalog, facts: Facts) -> VersionRanges:
    """The catalog's version ranges (its recipes' and their release entries'), answered at the
    request's vllm-ascend and vLLM versions."""
    specifiers = [s for r in catalog for s in (r.versions.vllm_ascend, r.versions.vllm, *(e.versions for e in r.releases))]
    return VersionRanges(specifiers, (facts["versions.vllm_ascend"], facts["versions.vllm"]))


class _Classifier:
    def __init__(self, facts: Facts, without: set[str], forced: dict[str, str], baseline_for: Callable,
                 ranges: VersionRanges, unavailable: dict[str, str] | None = None,
                 verdicts: dict[str, Verdict] | None = None, measured: Callable | None = None,
                 capacity: CapacityLookup | None = None):
        self.facts = facts
        self.ranges = ranges
        self.without = without
        self.forced = forced
        self.baseline_for = baseline_for
        self.unavailable = unavailable or {}
        self.verdicts = verdicts or {}
        self.measured = measured
        self.capacity = capacity

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
        gain = benefit(recipe, f["workload.concurrency"], f["spec.mtp"], self.baseline_for, self.measured,
                       carry_up=f["objective.goal"] == "latency", capacity=self.capacity,
                       release=f["versions.vllm_ascend"])
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
        elif gain.capacity is not None:  # measured under the request's SLO: the goal's own number decides
            if gain.capacity.verdict == "regression":
                decision.status, decision.reason = Status.regresses, gain.capacity.text()
        elif gain.regressions:
            decision.status = Status.regresses
            decision.reason = "slower at " + ", ".join(
                f"c{c} (+{ms:g} ms" + ("" if gain.basis[c] == "reported" else f", {gain.basis[c]}") + ")"
                for c, ms in sorted(gain.regressions.items()))
        return decision
