"""``plan(request)``: facts → resolution → merged launch settings → a ``Plan`` (data only).

The CLI renders a Plan; the bundle writer turns it into files. Nothing here prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optkit.catalog.loader import Catalog, load_catalog
from optkit.catalog.paths import project_root
from optkit.errors import OptkitError
from optkit.resolve.facts import Facts, compute_facts
from optkit.resolve.objective import Baseline, find_baseline, load_baselines
from optkit.resolve.profile_catalog import find_model, find_target, load_models, load_targets
from optkit.resolve.profile_records import ModelProfileRecord, TargetRecord
from optkit.resolve.request_record import RequestRecord
from optkit.resolve.resolver import Resolution, Status, resolve

_TEMPLATE = re.compile(r"^\$\{([a-z_.]+)\}$")


@dataclass
class Workspace:
    """The data a plan is made from: catalog, models, targets, baselines."""

    root: Path
    catalog: Catalog
    models: dict[str, ModelProfileRecord]
    targets: dict[str, TargetRecord]
    baselines: list[Baseline]
    unavailable: dict[str, str] = field(default_factory=dict)


def load_workspace(root: Path | None = None) -> Workspace:
    root = root or project_root()
    catalog = load_catalog(root)
    return Workspace(root, catalog, load_models(root / "models"), load_targets(root / "targets"),
                     load_baselines(root), unavailable_recipes(catalog))


def unavailable_recipes(catalog: Catalog) -> dict[str, str]:
    """Recipes that cannot be delivered from this repo: a kernel whose op source is missing.

    (A patch still ``pending`` is not listed: the bundle carries it as pending and ``optkit
    apply`` refuses it unless told otherwise, so the plan can still show what it would do.)
    """
    from optkit.catalog.kernel_catalog import kernel_ready, load_kernels

    kernels = load_kernels(catalog.root)
    out = {}
    for recipe in catalog:
        reasons = []
        for kid in recipe.kernels:
            spec = kernels.specs.get(kid)
            if spec is None:
                reasons.append(f"kernel spec kernels/{kid}/kernel.yaml is missing")
                continue
            ready, why = kernel_ready(spec, catalog.root)
            reasons += [] if ready else why
        if reasons:
            out[recipe.id] = "cannot be built from this repo: " + "; ".join(reasons)
    return out


@dataclass
class Setting:
    """One launch setting and the recipe that set it."""

    key: str
    value: Any
    recipe: str


@dataclass
class Estimate:
    concurrency: int
    baseline_ms: float | None
    saved_ms: float
    estimate_ms: float | None
    basis: str


@dataclass
class Plan:
    request: RequestRecord
    model: ModelProfileRecord
    target: TargetRecord
    facts: Facts
    resolution: Resolution
    env: list[Setting] = field(default_factory=list)
    additional_config: dict[str, Any] = field(default_factory=dict)
    compilation_config: dict[str, Any] = field(default_factory=dict)
    speculative_config: dict[str, Any] = field(default_factory=dict)
    serve_args: list[Setting] = field(default_factory=list)
    config_sources: dict[str, str] = field(default_factory=dict)  # "additional_config.a.b" → recipe
    estimates: list[Estimate] = field(default_factory=list)

    @property
    def selected(self) -> list[str]:
        return self.resolution.selected


class ConflictingSettings(OptkitError):
    """Two selected recipes set the same launch setting to different values."""


def substitute(value: Any, facts: Facts) -> Any:
    """Replace values of the exact form ``${fact.name}`` by the fact's value (recursively)."""
    if isinstance(value, str):
        match = _TEMPLATE.match(value)
        if match:
            fact = facts[match.group(1)]
            return str(fact) if type(fact).__name__ == "Version" else fact
        return value
    if isinstance(value, dict):
        return {k: substitute(v, facts) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, facts) for v in value]
    return value


def merge_into(target: dict, fragment: dict, recipe: str, sources: dict[str, str], prefix: str) -> None:
    """Deep-merge ``fragment`` into ``target``; a different value for a set key is an error."""
    for key, value in fragment.items():
        path = f"{prefix}.{key}"
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_into(target[key], value, recipe, sources, path)
        elif key in target and target[key] != value:
            raise ConflictingSettings(f"{path}: {sources[path]} sets {target[key]!r} but {recipe} sets {value!r}")
        else:
            target[key] = value
            _record(value, recipe, sources, path)


def _record(value: Any, recipe: str, sources: dict[str, str], path: str) -> None:
    sources[path] = recipe
    if isinstance(value, dict):
        for key, inner in value.items():
            _record(inner, recipe, sources, f"{path}.{key}")


def resolve_model(workspace: Workspace, request: RequestRecord) -> ModelProfileRecord:
    if request.model_config_path:
        from optkit.resolve.hf_config import profile_from_hf_config

        return profile_from_hf_config(Path(request.model_config_path))
    if not request.model:
        raise OptkitError("name a model (e.g. qwen3.5-35b) or give --model-config config.json")
    return find_model(workspace.models, request.model)


def plan(request: RequestRecord, workspace: Workspace | None = None) -> Plan:
    """Resolve ``request`` against the catalog and collect the launch settings of the result."""
    ws = workspace or load_workspace()
    model = resolve_model(ws, request)
    target = find_target(ws.targets, request.target)
    facts = compute_facts(request, model, target)

    def baseline_for(c: int) -> Baseline | None:
        return find_baseline(ws.baselines, model.id, target.id, c)

    resolution = resolve(ws.catalog, facts, request.with_recipes, request.without_recipes, baseline_for,
                         ws.unavailable)
    result = Plan(request, model, target, facts, resolution)
    for rid in resolution.selected:
        _collect(result, ws.catalog[rid], facts)
    result.estimates = _estimates(result, baseline_for)
    return result


def _collect(result: Plan, recipe, facts: Facts) -> None:
    sources = result.config_sources
    for env in recipe.env:
        if not env.build_time:
            value = str(substitute(env.value, facts))
            clash = next((s for s in result.env if s.key == env.name and s.value != value), None)
            if clash:
                raise ConflictingSettings(f"env {env.name}: {clash.recipe} sets {clash.value!r} but {recipe.id} sets {value!r}")
            result.env.append(Setting(env.name, value, recipe.id))
    merge_into(result.additional_config, substitute(recipe.additional_config, facts), recipe.id, sources, "additional_config")
    merge_into(result.compilation_config, substitute(recipe.compilation_config, facts), recipe.id, sources, "compilation_config")
    merge_into(result.speculative_config, substitute(recipe.speculative_config, facts), recipe.id, sources, "speculative_config")
    result.serve_args.extend(Setting(arg, None, recipe.id) for arg in recipe.serve_args)


def _estimates(result: Plan, baseline_for) -> list[Estimate]:
    out = []
    for c in result.facts["workload.concurrency"]:
        saved = sum(result.resolution.decisions[r].benefit.estimate_ms.get(c, 0.0)
                    for r in result.selected if result.resolution.decisions[r].benefit)
        base = baseline_for(c)
        if base is None:
            out.append(Estimate(c, None, saved, None, "no published baseline for this concurrency"))
        else:
            out.append(Estimate(c, base.tpot_ms, saved, max(base.tpot_ms - saved, 0.0),
                                f"article baseline {base.tpot_ms} ms ({base.derivation})"))
    return out


def count_by_status(result: Plan) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in result.resolution.decisions.values():
        counts[d.status.value] = counts.get(d.status.value, 0) + 1
    return dict(sorted(counts.items()))


__all__ = ["Plan", "Workspace", "load_workspace", "plan", "Status"]
