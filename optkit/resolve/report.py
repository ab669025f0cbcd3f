"""Plans and decisions as plain, JSON-safe data (sorted, deterministic): ``--json`` and locks."""

from __future__ import annotations

import json
from typing import Any

from typing import TYPE_CHECKING

from optkit.catalog.conditions import format_value

if TYPE_CHECKING:  # type hints only: report stays cheap to import for every command
    from optkit.resolve.objective import Benefit
    from optkit.resolve.plan import Plan


def dump_json(data: Any) -> str:
    """The one JSON layout of optkit's output files and --json: indented, sorted keys, UTF-8, final newline."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _fact_value(value: Any) -> Any:
    if type(value).__name__ == "Version":
        return str(value)
    return value


def facts_json(facts) -> dict[str, Any]:
    """Facts as JSON-safe data (versions as strings), sorted by name."""
    return {name: _fact_value(value) for name, value in sorted(facts.values.items())}


def facts_data(plan: Plan) -> dict[str, Any]:
    return facts_json(plan.facts)


def decision_data(plan: Plan, rid: str) -> dict[str, Any]:
    """The plan's decision on recipe ``rid``; its gain only as the plan counts it (``Plan.gain``), and for a valid
    recipe left out what it would change if selected (``Plan.gain_if_selected``), never the article's number
    for a recipe that does nothing here."""
    d = plan.resolution.decisions[rid]
    data: dict[str, Any] = {"status": d.status.value, "reason": d.reason}
    if d.rule:
        data["rule"] = d.rule
    if d.facts:
        data["facts"] = dict(sorted(d.facts.items()))
    if d.chain:
        data["chain"] = list(d.chain)
    if d.forced:
        data["forced"] = d.forced
    if d.notes:
        data["notes"] = list(d.notes)
    if d.assumes:
        data["assumes"] = list(d.assumes)
    gain, would = plan.gain(rid), plan.gain_if_selected(rid)
    if gain is not None:
        data.update(benefit_data(gain))
    if would is not None:
        data["if_selected"] = benefit_data(would)
    return data


def benefit_data(gain: Benefit) -> dict[str, Any]:
    """A gain per concurrency with its basis, and a capacity measured under the request's SLO (throughput goal)."""
    data: dict[str, Any] = {
        "expected_tpot_saving_ms": {
            f"c{c}": (None if v is None else round(v, 4)) for c, v in sorted(gain.per_concurrency.items())},
        "basis": {f"c{c}": b for c, b in sorted(gain.basis.items())}}
    if gain.capacity is not None:
        c = gain.capacity
        data["measured_capacity"] = {"delta": c.delta, "verdict": c.verdict, "slo": c.slo, "text": c.text()}
    return data


def plan_data(plan: Plan) -> dict[str, Any]:
    """Everything the plan decided, as data."""
    decisions = plan.resolution.decisions
    capacity = {"measured_capacity": plan.capacity.data()} if plan.capacity is not None else {}
    choices = {"choices": [c.data() for c in plan.choices]} if plan.choices else {}
    advice = plan.page_advice
    page = {"page_advice": advice.data()} if advice is not None and advice.page else {}
    tuned = plan.tuned
    tune = {"tune_record": {"file": tuned.file, "applied": tuned.applied, "fields": list(tuned.fields),
                            "label": tuned.label, "note": tuned.note}} if tuned is not None else {}
    return {
        **capacity,
        **choices,
        **page,
        **tune,
        **weights_data(plan),
        **model_code_data(plan),
        **model_support_data(plan),
        "request": (plan.given or plan.request).dump(mode="json", by_alias=True),
        "assumptions": [a.data() for a in plan.assumptions],
        "model": plan.model.id,
        "target": plan.target.id,
        "facts": facts_data(plan),
        "selected": list(plan.selected),
        "upstream": list(plan.resolution.upstream),
        "decisions": {rid: decision_data(plan, rid) for rid in sorted(decisions)},
        "launch": {
            "flags": [{"arg": s.key, "source": s.recipe} for s in plan.launch_flags],
            "env": [{"name": s.key, "value": s.value, "recipe": s.recipe} for s in plan.env],
            "additional_config": plan.additional_config,
            "compilation_config": plan.compilation_config,
            "speculative_config": plan.speculative_config,
            "serve_args": [{"arg": s.key, "recipe": s.recipe} for s in plan.serve_args],
            "derived": [{"set": d.target, "value": d.value, "recipe": d.recipe, "how": d.how, "why": d.why,
                         "basis": d.basis} for d in plan.derivations],
            "sources": dict(sorted(plan.config_sources.items())),
        },
        "estimate": {
            "label": "ESTIMATE from the article's reported numbers; gains are not strictly additive",
            "per_concurrency": [
                {"concurrency": e.concurrency, "baseline_tpot_ms": e.baseline_ms,
                 "expected_saving_ms": round(e.saved_ms, 4),
                 "estimated_tpot_ms": None if e.estimate_ms is None else round(e.estimate_ms, 3),
                 "basis": e.basis, "regression_fixes_left_out_ms": round(e.left_out_ms, 4), "note": e.note}
                for e in plan.estimates],
        },
        "slo_checks": [check.data() for check in plan.slo_checks],
    }


def weights_data(plan: Plan) -> dict[str, Any]:
    """``{"weights": …}`` when the plan serves quantized weights or a checkpoint MODEL named (``Plan.weights``):
    the format, the checkpoint with its source, the warning; ``{}`` for the profile's own bf16 weights."""
    weights = plan.weights
    if weights is None or (weights.quantization == "bf16" and weights.checkpoint is None):
        return {}
    checkpoint = weights.checkpoint
    return {"weights": {
        "quantization": weights.quantization,
        "checkpoint": None if checkpoint is None else {"id": checkpoint.id, "quantization": checkpoint.quantization,
                                                       "source": checkpoint.source},
        "warning": weights.warning}}


def model_code_data(plan: Plan) -> dict[str, Any]:
    """``{"model_code": …}`` when the checkpoint names its own config class (``ModelProfile.config_code``): the class
    and the flag the launch passes for it (``model.remote_code``); ``{}`` otherwise."""
    named = getattr(plan.model, "config_code", None)
    return {"model_code": {"config_class": named, "flag": "--trust-remote-code"}} if named else {}


def model_support_data(plan: Plan) -> dict[str, Any]:
    """``{"model_support": …}`` where the release does not register the model's architecture natively (the fact
    ``versions.native_architecture``: ``optkit.versions.architectures``): why, and where it is; ``{}`` otherwise."""
    from optkit.versions.architectures import support

    native = plan.facts["versions.native_architecture"]
    if native != "no":
        return {}
    _, why = support(plan.model.architecture, str(plan.facts["versions.vllm"]), str(plan.facts["versions.vllm_ascend"]))
    return {"model_support": {"native": native, "why": why}}


def facts_lines(plan: Plan) -> list[str]:
    return [f"{name} = {format_value(value)}" for name, value in sorted(plan.facts.values.items())]
