"""The steps of a single-variable ladder: which recipes each step runs, in which order, at what cost.

Incremental (the default): step 0 is the **baseline**, the request on the release's defaults with
only what the request itself asks for (recipes ``implied_by`` it, e.g. MTP for ``--mtp``, and what
they require). Each later step adds the next recipe of the order together with what it cannot run
without: its unmet ``requires``, and the ``unless`` recipe that lifts a conflict it would otherwise
hit; those move together and the step says why. Every step is a valid selection (the resolver's
links hold), so each delta is the recipe's single-variable effect on top of the steps before. The
last step is the plan (or, with ``only``, the baseline plus those recipes).

Leave-one-out: step 0 the baseline, step 1 the whole plan, then one step per recipe: the plan
without it and without whatever cannot stay without it (recipes that require it; a recipe whose
conflict it lifted). Each delta is the recipe's contribution to the full stack.

Order: ``dependency`` (the resolver's: required recipes first, ties by id) or ``article`` (the
recipes of ``models/reference/article-waterfall.yaml`` in its order, then the rest in dependency
order). A recipe that changes nothing in the launch (``Recipe.changes_launch`` is false, e.g. the
version-upgrade precondition) is no step; the ladder lists it with the reason.

Cost (``run_cost``): server starts = steps × repeats (every concurrency and the accuracy prompts in
one start; repeats of a step back to back); tree applies = steps whose patch set differs from the
one on the tree before (a revert first when one is applied); kernel rebuilds = steps whose kernel
set differs from the one built before (before the first step: the host's pristine build).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from optkit.catalog.schema import compiled
from optkit.errors import InternalError
from optkit.measure import MeasureError

Order = Literal["dependency", "article"]
NONE = "none"
"""The patch or kernel key of a step with no patches or no kernels."""


@dataclass(frozen=True)
class Step:
    """One ladder step: the selection it runs and what distinguishes it from its reference."""

    index: int
    id: str
    kind: Literal["baseline", "add", "full", "without"]
    recipes: tuple[str, ...]
    """The selection it runs, in the plan's order."""
    changes: tuple[str, ...] = ()
    """What it adds ("add") or removes ("without"), the recipe the step is for first."""
    together: dict[str, str] = field(default_factory=dict)
    """Recipes in ``changes`` besides the first, and why they move with it."""
    reference: str | None = None
    """The step it is compared with: the one before ("add"), the whole plan ("without")."""

    @property
    def subject(self) -> str | None:
        """The recipe the step is for (None for the baseline and the whole plan)."""
        return self.changes[0] if self.changes else None


@dataclass(frozen=True)
class Ladder:
    steps: list[Step]
    mode: Literal["incremental", "leave-one-out"]
    order: Order
    inert: dict[str, str]
    """Selected recipes that are no step, and why."""


def load_article_order(root: Path) -> list[str]:
    """The recipe ids of ``models/reference/article-waterfall.yaml``, in order."""
    from optkit.catalog.yamlio import load_yaml

    data, _ = load_yaml(root / "models" / "reference" / "article-waterfall.yaml",
                        "models/reference/article-waterfall.yaml")
    return [entry["recipe"] for entry in data["order"]]


class _Links:
    """The resolver's requires/conflicts links of the plan's recipes, evaluated on the plan's facts."""

    def __init__(self, catalog, facts, selected: list[str], upstream: list[str]):
        self.catalog, self.values = catalog, facts.values
        self.selected, self.upstream = selected, set(upstream)

    def _holds(self, when) -> bool:
        return when is None or compiled(when).evaluate(self.values)

    def unmet(self, chosen: set[str]) -> list[tuple[str, str, str]]:
        """(recipe, required recipe, message) for every requirement of ``chosen`` that is not met."""
        return [(rid, link.recipe, link.msg) for rid in self._ordered(chosen) for link in self.catalog[rid].requires
                if self._holds(link.when) and link.recipe not in chosen | self.upstream]

    def clashes(self, chosen: set[str]):
        """(recipe, other, link) for every conflict between two recipes of ``chosen`` that nothing lifts."""
        present = chosen | self.upstream
        return [(rid, link.recipe, link) for rid in self._ordered(chosen) for link in self.catalog[rid].conflicts
                if link.recipe in chosen and self._holds(link.when) and not set(link.unless) & present]

    def _ordered(self, chosen: set[str]) -> list[str]:
        return [rid for rid in self.selected if rid in chosen]


def ladder_steps(plan, catalog, *, order: Order = "dependency", leave_one_out: bool = False,
                 only: list[str] | None = None, article_order: list[str] | None = None) -> Ladder:
    """The steps of ``plan`` (see the module docstring); ``only`` measures just those selected recipes."""
    selected = list(plan.selected)
    links = _Links(catalog, plan.facts, selected, plan.resolution.upstream)
    decisions = plan.resolution.decisions
    _check_only(only, selected, decisions)
    implied = {rid for rid in selected if decisions[rid].forced.startswith("implied")}
    baseline, _ = _closure(links, set(), implied)
    inert = {rid: "changes nothing in the launch (it is a condition on the release or the request), so there is "
                  "nothing to measure" for rid in selected if not catalog[rid].changes_launch and rid not in baseline}
    wanted = [rid for rid in _ordered(selected, order, article_order or [])
              if rid not in baseline and rid not in inert and (only is None or rid in only)]
    steps = [Step(0, "00-baseline", "baseline", tuple(r for r in selected if r in baseline))]
    if leave_one_out:
        steps += _leave_one_out(links, baseline, wanted, selected)
    else:
        steps += _incremental(links, baseline, wanted, selected)
    return Ladder(steps, "leave-one-out" if leave_one_out else "incremental", order, inert)


def _check_only(only, selected, decisions) -> None:
    for rid in only or []:
        if rid not in decisions:
            from optkit.errors import UnknownName

            raise UnknownName("recipe", rid, sorted(decisions))
        if rid not in selected:
            d = decisions[rid]
            raise MeasureError(f"--recipes {rid}: the plan does not select it ({d.status.value}: {d.reason}); "
                               "a ladder measures the plan's recipes (force it in with --with)")


def _ordered(selected: list[str], order: Order, article: list[str]) -> list[str]:
    if order == "dependency":
        return list(selected)
    first = [rid for rid in article if rid in selected]
    return first + [rid for rid in selected if rid not in first]


def _closure(links: _Links, chosen: set[str], adding: set[str]) -> tuple[set[str], dict[str, str]]:
    """``chosen`` ∪ ``adding`` ∪ whatever that needs to be valid, and why each extra recipe came along."""
    group, why = set(adding), {}
    while True:
        unmet = links.unmet(chosen | group)
        for rid, needed, msg in unmet:
            if needed not in links.selected:
                raise InternalError(f"ladder: {rid} requires {needed}, which the plan does not select")
            why.setdefault(needed, f"required by {rid} ({msg})")
            group.add(needed)
        clashes = links.clashes(chosen | group)
        for rid, other, link in clashes:
            lifting = [u for u in link.unless if u in links.selected]
            if not lifting:
                raise InternalError(f"ladder: {rid} conflicts with {other} and the plan selects nothing that lifts it")
            why.setdefault(lifting[0], f"lifts the conflict of {rid} with {other} ({link.msg})")
            group.add(lifting[0])
        if not unmet and not clashes:
            return chosen | group, why


def _incremental(links: _Links, baseline: set[str], wanted: list[str], selected: list[str]) -> list[Step]:
    steps, chosen = [], set(baseline)
    for rid in wanted:
        if rid in chosen:  # already came along with an earlier recipe
            continue
        grown, why = _closure(links, chosen, {rid})
        added = [rid] + [r for r in selected if r in grown - chosen - {rid}]
        index = len(steps) + 1
        steps.append(Step(index, f"{index:02d}-{rid}", "add", tuple(r for r in selected if r in grown), tuple(added),
                          {r: why[r] for r in added[1:]}, steps[-1].id if steps else "00-baseline"))
        chosen = grown
    return steps


def _leave_one_out(links: _Links, baseline: set[str], wanted: list[str], selected: list[str]) -> list[Step]:
    full = set(baseline)
    for rid in wanted:
        full, _ = _closure(links, full, {rid})
    steps = [Step(1, "01-full", "full", tuple(r for r in selected if r in full))]
    for rid in wanted:
        kept, why = _without(links, full, rid, baseline)
        removed = [rid] + [r for r in selected if r in full - kept - {rid}]
        index = len(steps) + 1
        steps.append(Step(index, f"{index:02d}-without-{rid}", "without", tuple(r for r in selected if r in kept),
                          tuple(removed), {r: why[r] for r in removed[1:]}, "01-full"))
    return steps


def _without(links: _Links, full: set[str], rid: str, baseline: set[str]) -> tuple[set[str], dict[str, str]]:
    """``full`` without ``rid`` and without what cannot stay without it, and why each of those goes."""
    kept, why = full - {rid}, {}
    while True:
        unmet = links.unmet(kept)
        for user, needed, msg in unmet:
            why.setdefault(user, f"requires {needed} ({msg})")
            kept.discard(user)
        clashes = links.clashes(kept)
        for a, b, link in clashes:
            gone = a if a not in baseline else b
            why.setdefault(gone, f"conflicts with {b if gone == a else a} without {rid} ({link.msg})")
            kept.discard(gone)
        if not unmet and not clashes:
            if baseline - kept:
                raise InternalError(f"ladder: leaving out {rid} would also remove the baseline's {sorted(baseline - kept)}")
            return kept, why


def run_cost(keys: list[tuple[str, str]], repeat: int) -> dict[str, int]:
    """Server starts, tree applies, tree reverts and kernel rebuilds of running steps with these
    (patch key, kernel key) pairs in order, each ``repeat`` times back to back."""
    applies = reverts = rebuilds = 0
    on_tree, built = NONE, NONE
    for patch_key, kernel_key in keys:
        if patch_key != on_tree:
            reverts += on_tree != NONE
            applies += patch_key != NONE
            on_tree = patch_key
        if kernel_key != built:
            rebuilds += 1
            built = kernel_key
    reverts += on_tree != NONE  # the tree is left clean at the end
    return {"steps": len(keys), "server_starts": len(keys) * repeat, "tree_applies": applies,
            "tree_reverts": reverts, "kernel_rebuilds": rebuilds}


__all__ = ["Step", "Ladder", "ladder_steps", "load_article_order", "run_cost", "NONE"]
