"""README.md and expected.json: what each selected recipe does, why, and what it is expected to gain.

The gains are the article's reported figures, split into those measured under this plan's
conditions (MTP, a requested concurrency) and the others; both files label them as estimates.
``readme_data`` is what ``templates/README.md.j2`` is given; the README's wording is there.
"""

from __future__ import annotations

import re
from typing import Any

from optkit import __version__
from optkit.bundle.launch import Launch
from optkit.bundle.lock import pending_names
from optkit.bundle.scripts import bench_slo
from optkit.catalog.enums import Verification
from optkit.catalog.recipe_records import RecipeRecord
from optkit.resolve.assumptions import assumes_note
from optkit.resolve.classify import risks_that_hold
from optkit.resolve.fit import serve_value
from optkit.resolve.plan import Plan, Workspace
from optkit.resolve.report import plan_data


def _gain_data(gain, counted: dict[int, str]) -> dict[str, Any]:
    data = gain.dump(mode="json", exclude_none=True)
    return {**data, "counted_at": {f"c{c}": basis for c, basis in counted.items()}} if counted else data


EXPECTED_BASIS = ("the article's figures, measured on its own setup (its model, card and workload: 1024 in / 512 out, "
                  "greedy, min_tokens set), and the plan's TPOT estimate built from them: estimates for this "
                  "request, not measurements of this request")
"""What expected.json is, in words (its ``basis``, and the README's and bench.sh's)."""


def _not_counted(gain, plan: Plan) -> str:
    """Why the plan's estimate leaves an article figure out, in words: the release it holds on, when that is why."""
    from optkit.catalog.specifiers import contains

    release = plan.facts["versions.vllm_ascend"]
    if gain.versions is not None and not contains(gain.versions, release):
        return f"not counted in this plan's estimate: measured on vllm-ascend {gain.versions}, not {release}"
    return "not counted in this plan's estimate"


def expected_data(plan: Plan, workspace: Workspace) -> dict[str, Any]:
    """The article's figures for this plan (per recipe: those the plan's gain counts, at which concurrency and on
    what basis, and the others) and the plan's TPOT estimate."""
    recipes = {}
    for rid in plan.selected:
        recipe = workspace.catalog[rid]
        figures = plan.figures(recipe)
        recipes[rid] = {"gains": [_gain_data(g, counted) for g, counted in figures if counted],
                        "other_reported": [{**_gain_data(g, {}), "not_counted": _not_counted(g, plan)}
                                           for g, counted in figures if not counted],
                        "verification": recipe.verification.level.value}
    return {
        "label": "ESTIMATES from the article's reported numbers, not measurements of this deployment; "
                 "gains were measured stacked and are not strictly additive",
        "basis": EXPECTED_BASIS,
        "recipes": recipes,
        "estimate": plan_data(plan)["estimate"],
        "workload": {"concurrency": list(plan.request.concurrency), "input_len": plan.request.input_len,
                     "output_len": plan.request.output_len, "dataset": "random",
                     # with a mix the lengths above are its longest; the article's figures are of 1024 in / 512 out
                     **({"length_mix": plan.request.length_mix} if plan.request.length_mix else {})},
    }


def readme_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/README.md.j2`` is given."""
    plan = launch.plan
    decisions = plan.resolution.decisions
    return {
        "version": __version__, "model_id": plan.model.id, "target_title": plan.target.title, "request": plan.request,
        "layout": plan.pd.summary if plan.pd else plan.layout.summary, "nodes": launch.nodes,
        "pd": lock["launch"].get("pd"),
        "ladder_step": lock["bundle"].get("selection_reason", "") if "selection" in lock["bundle"] else "",
        "versions": lock["versions"], "kernels": bool(launch.kernels), "k8s": lock["bundle"]["k8s"],
        "pending": pending_names(lock), "patches": lock["patches"], "estimates": plan.estimates, "choices": plan.choices,
        "assumptions": plan.assumptions, "slo": bench_slo(plan.request),
        "slo_checks": [check.text for check in plan.slo_checks], "expected_basis": EXPECTED_BASIS,
        "total_len_max": plan.facts["workload.total_len_max"], "max_model_len": max_model_len_setting(plan),
        "recipes": [_recipe_data(plan, launch.catalog[rid], lock) for rid in plan.selected],
        "excluded": [(rid, decisions[rid].status.value, _with_assumptions(plan, decisions[rid]))
                     for rid in sorted(decisions) if rid not in plan.selected],
    }


def max_model_len_setting(plan: Plan) -> dict[str, str] | None:
    """The plan's ``--max-model-len`` and where it comes from (a recipe, the request, the page's command:
    ``page:<file>:<line>``), or None when the plan leaves it to vLLM."""
    value = serve_value(plan, "--max-model-len")
    if value is None:
        return None
    found = next(s for s in [*plan.serve_args, *plan.launch_flags] if s.key == f"--max-model-len {value}")
    return {"value": value, "source": found.recipe or "the request"}


def _with_assumptions(plan: Plan, decision) -> str:
    """A decision's reason, and the workload defaults it rests on with the flag that changes each."""
    note = assumes_note(plan.assumptions, decision.assumes)
    return decision.reason + (f" ({note})" if note else "")


def on_release(text: str, knobs) -> str:
    """``text`` with each knob the release renamed or moved (``KnobVerdict``s of the recipe) spelled as
    the release reads it: ``VLLM_ASCEND_ENABLE_FUSED_MC2`` becomes ``additional_config.enable_fused_mc2``
    from 0.27.1rc1 (versions/moves.yaml)."""
    for knob in knobs:
        if knob.state in ("renamed", "moved"):
            old, (kind, new) = knob.knob.split(":", 1)[1], knob.emitted.split(":", 1)
            text = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new if kind == "env" else f"{kind}.{new}", text)
    return text


def kind_on_release(kind: str, knobs) -> str:
    """An ``env`` recipe all of whose variables the release moved into ``additional_config`` is a ``config``
    recipe there (``moe-fused-mc2-enable`` from 0.27.1rc1); any other kind is what the recipe says."""
    emitted = [knob.emitted if knob.state in ("renamed", "moved") else knob.knob for knob in knobs]
    if kind == "env" and emitted and not any(name.startswith("env:") for name in emitted):
        return "config"
    return kind


def _recipe_data(plan: Plan, recipe: RecipeRecord, lock: dict) -> dict[str, Any]:
    decision = plan.resolution.decisions[recipe.id]
    entry = lock["recipes"][recipe.id]
    knobs = plan.verdicts[recipe.id].knobs if recipe.id in plan.verdicts else ()
    return {
        "id": recipe.id, "title": on_release(recipe.title, knobs), "kind": kind_on_release(recipe.kind.value, knobs),
        "summary": on_release(recipe.summary, knobs), "release_notes": list(decision.notes),
        "reason": decision.reason, "chain": list(decision.chain),
        "assumes": assumes_note(plan.assumptions, decision.assumes),
        "gains": [(g, ", ".join(f"c{c} ({basis})" for c, basis in counted.items()))
                  for g, counted in plan.figures(recipe) if counted],
        "other_gains": [g for g, counted in plan.figures(recipe) if not counted],
        "risks": risks_that_hold(recipe, plan.facts),
        "verification": entry["verification"], "notes": recipe.verification.notes.rstrip(),
        "hardware_verified": entry["verification"] == Verification.hardware_verified.value,
        "measured": entry.get("measured", []),
        "pending": [p["file"] for p in lock["pending_patches"] if p["recipe"] == recipe.id],
    }
