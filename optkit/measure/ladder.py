"""A ladder bundle: every step as a complete launch bundle, one ``run-ladder.sh``, and ``ladder.json``.

``ladder_files(plan, workspace, ladder, repeat=…, k8s=…)`` renders every file (pure, like
``optkit.bundle.writer.bundle_files``, which writes each step)::

    ladder.json              the ladder as data: steps, recipes, keys, cost, workload, estimates
    run-ladder.sh            drives the steps on the NPU host (templates/ladder/run-ladder.sh.j2)
    README.md                how to run it and what each step is
    accuracy/prompts.json    the accuracy gate's fixed prompt set
    steps/<id>/…             one bundle per step (lock, env.sh, serve.sh, bench.sh, patches/, …)
    k8s/ladder-job.yaml      with --k8s: an Indexed Job, one index per step

A step's patch key is the sha256 of its patch series (names and sha256), its kernel key the sha256
of its kernel specs and the patches that touch ``csrc/``: ``run-ladder.sh`` re-patches the tree only
when the patch key changes and rebuilds the custom ops only when the kernel key changes.
``write_ladder`` writes the files all at once and refuses a directory that holds results.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optkit import __version__
from optkit.bundle.launch import served_checkpoint
from optkit.bundle.lock import catalog_sha256, profiles_sha256
from optkit.bundle.render import plain, render
from optkit.bundle.scripts import MIN_PROMPTS, PROMPTS_PER_CONCURRENCY, WARMUPS_PER_CONCURRENCY, bench_extra, num_prompts
from optkit.bundle.writer import bundle_files, check_replaceable, write_files
from optkit.measure import MeasureError
from optkit.measure.accuracy import PromptSet, load_prompt_set, prompt_set_bytes
from optkit.measure.duration import ladder_duration
from optkit.measure.steps import NONE, Ladder, Step, run_cost
from optkit.measure.sweep_fit import scheduler
from optkit.resolve.plan import Plan, Workspace, restrict
from optkit.resolve.report import dump_json
from optkit.tree.patchset import LOCK_NAME

LADDER_VERSION = 1
LADDER_NAME = "ladder.json"
PROMPTS_FILE = "accuracy/prompts.json"
HEALTH_TIMEOUT_S = 1800
"""How long run-ladder.sh waits for /health by default: static-kernel compiles take tens of minutes."""


@dataclass(frozen=True)
class StepCost:
    """What one run of a step costs, the user's to set (``optkit ladder --prompts-per-concurrency`` …);
    the defaults are bench.sh's: 10 requests per concurrent slot (at least 20), one warm-up request
    per slot, every accuracy prompt."""

    prompts_per_concurrency: int = PROMPTS_PER_CONCURRENCY
    min_prompts: int = MIN_PROMPTS
    warmups: int = WARMUPS_PER_CONCURRENCY
    accuracy_prompts: int | None = None
    """The first N prompts of the accuracy set (None: all)."""

    @property
    def default(self) -> bool:
        return self == StepCost()

    def data(self) -> dict:
        return {"prompts_per_concurrency": self.prompts_per_concurrency, "min_prompts": self.min_prompts,
                "warmups_per_concurrency": self.warmups}


def mixed_lengths_refusal(mix: str, what: str) -> str:
    """Why ``what`` does not measure a length mix, and what does."""
    return (f"--length-mix {mix}: {what} measures one input and one output length (vllm bench serve's random "
            "dataset draws every request alike), and a mix's latency is not the weighted sum of its classes' "
            "(their requests share the steps); ladder each class on its own with --input-len and --output-len, "
            "or measure the mix with your own dataset against the bundle's serve.sh")


def step_reason(step: Step) -> str:
    """Why the selected recipes outside a step are left out (the step bundle's decisions say it)."""
    return f"not in ladder step {step.id}: the single-variable ladder measures it in another step"


def ladder_files(plan: Plan, workspace: Workspace, ladder: Ladder, *, repeat: int = 1, k8s: bool = False,
                 prompts: PromptSet | None = None, profile: bool = False, cost: StepCost | None = None,
                 sweep: dict | None = None) -> dict[str, bytes]:
    """Every file of the ladder bundle, by relative path (see the module docstring); ``profile``: each
    step also captures a short profile (``optkit.measure.step_profiles``); ``cost``: what a run costs
    (bench.sh's defaults); ``sweep``: the capacity sweep's search options (``sweep_options``)."""
    if plan.pd is not None:  # run-ladder.sh starts one server per step
        raise MeasureError(f"--pd {plan.request.pd}: a ladder step is one server (run-ladder.sh starts one serve.sh); "
                           "ladder the instance's plan without --pd, or write the PD bundle with optkit plan -o")
    if plan.request.length_mix:  # vllm bench serve's random dataset draws one input and one output length
        raise MeasureError(mixed_lengths_refusal(plan.request.length_mix, "a ladder"))
    cost = cost or StepCost()
    prompts = _accuracy_subset(prompts or load_prompt_set(), cost.accuracy_prompts)
    files: dict[str, bytes] = {}
    steps = []
    for step in ladder.steps:
        bundle = bundle_files(restrict(plan, list(step.recipes), workspace, step_reason(step)), workspace)
        files.update({f"steps/{step.id}/{rel}": data for rel, data in bundle.items()})
        steps.append(_step_data(step, json.loads(bundle[LOCK_NAME])))
    data = ladder_data(plan, workspace, ladder, steps, repeat, prompts)
    if sweep is not None:
        _check_sweep_fits(steps, sweep["high"])
    if profile:
        from optkit.measure.step_profiles import profile_data

        data["profile"] = profile_data(plan, workspace)
    _add_cost_and_sweep(data, plan, cost, sweep)
    data["duration"] = ladder_duration(data)
    files[LADDER_NAME] = dump_json(data).encode("utf-8")
    files[PROMPTS_FILE] = prompt_set_bytes(prompts)
    files["run-ladder.sh"] = render("ladder/run-ladder.sh.j2", **_script_data(plan, data)).encode("utf-8")
    files["README.md"] = render("ladder/README.md.j2", **_readme_data(data)).encode("utf-8")
    if k8s:
        from optkit.measure.k8s import ladder_job_data

        files["k8s/ladder-job.yaml"] = render("ladder/ladder-job.yaml.j2", **ladder_job_data(plan, data)).encode("utf-8")
    return dict(sorted(files.items()))


def _key(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16] if parts else NONE


def _step_data(step: Step, lock: dict) -> dict[str, Any]:
    patches = [f"{p['name']}:{p['sha256']}" for p in lock["patches"]]
    csrc = [f"{p['name']}:{p['sha256']}" for p in lock["patches"] if any(t.startswith("csrc/") for t in p["targets"])]
    kernels = [k["spec"] for k in lock["kernels"]]
    return {"index": step.index, "id": step.id, "kind": step.kind, "recipes": list(step.recipes),
            "changes": list(step.changes), "together": dict(step.together), "reference": step.reference,
            "patches": [p["name"] for p in lock["patches"]], "kernels": kernels,
            "pending_patches": [f"{p['recipe']}/{p['file']}" for p in lock["pending_patches"]],
            "patch_key": _key(patches), "kernel_key": _key(kernels + csrc),
            "scheduler": scheduler(lock["launch"]["argv"])}


def ladder_data(plan: Plan, workspace: Workspace, ladder: Ladder, steps: list[dict], repeat: int,
                prompts: PromptSet) -> dict[str, Any]:
    """ladder.json: everything the report needs besides the results (it never reads the catalog)."""
    request, facts = plan.request, plan.facts
    involved = [rid for rid in plan.selected if any(rid in s["recipes"] for s in steps)]
    root = workspace.catalog.root
    return {
        "ladder_version": LADDER_VERSION,
        "optkit": {"version": __version__, "catalog_sha256": catalog_sha256(root),
                   "profiles_sha256": profiles_sha256(root)},
        "request": request.dump(mode="json", by_alias=True),
        "model": plan.model.id, "served_name": plan.model.id, "target": plan.target.id,
        "versions": {"vllm_ascend": str(facts["versions.vllm_ascend"]), "vllm": str(facts["versions.vllm"])},
        "mode": ladder.mode, "order": ladder.order, "repeat": repeat,
        "workload": {"concurrency": list(request.concurrency), "input_len": request.input_len,
                     "output_len": request.output_len, "mtp": request.mtp, "num_speculative_tokens": request.k,
                     "tp": request.tp, "dp": request.dp, "ep": facts["parallel.ep"],
                     "sampling": request.sampling, "min_tokens": request.min_tokens,
                     **({"shared_prefix_len": request.shared_prefix_len} if request.shared_prefix_len else {}),
                     "dataset": "random",
                     "num_prompts": {str(c): num_prompts(c) for c in request.concurrency}},
        "steps": steps,
        "inert": dict(ladder.inert),
        "recipes": {rid: _recipe_data(plan, workspace, rid) for rid in involved},
        "cost": run_cost([(s["patch_key"], s["kernel_key"]) for s in steps], repeat),
        "accuracy": {"prompts": PROMPTS_FILE, "sha256": hashlib.sha256(prompt_set_bytes(prompts)).hexdigest(),
                     "max_tokens": prompts.max_tokens, "min_tokens": request.min_tokens,
                     "questions": sum(p.answer is not None for p in prompts.prompts), "prompts_count": len(prompts.prompts)},
        "estimate": [{"concurrency": e.concurrency, "baseline_tpot_ms": e.baseline_ms, "saving_ms": round(e.saved_ms, 4),
                      "basis": e.basis} for e in plan.estimates],
    }


def _recipe_data(plan: Plan, workspace: Workspace, rid: str) -> dict[str, Any]:
    from optkit.catalog.records import patch_hashes

    recipe = workspace.catalog[rid]
    gain = plan.gain(rid)  # the one value every view shows: none for a recipe the plan does not select
    return {
        "title": recipe.title, "kind": recipe.kind.value,
        "accuracy": recipe.accuracy.dump(mode="json") if recipe.accuracy else None,
        "patches": patch_hashes(workspace.catalog, rid),
        "estimate_saving_ms": {str(c): (None if v is None else round(v, 4)) for c, v in
                               sorted((gain.per_concurrency if gain else {}).items())},
        "estimate_basis": {str(c): b for c, b in sorted((gain.basis if gain else {}).items())},
        "article": [_article_gain(g) for g in recipe.gains if g.metric == "tpot"],
    }


def _article_gain(gain) -> dict[str, Any]:
    values = f"{gain.before:g} → {gain.after:g} {gain.unit}" if gain.delta is None else f"{gain.delta:+g} {gain.unit}"
    return {"concurrency": gain.concurrency, "mtp": gain.mtp, "change": round(gain.change, 6), "unit": gain.unit,
            "text": values, "quote": gain.quote, "scope": gain.scope}


def _script_data(plan: Plan, data: dict) -> dict[str, Any]:
    steps = data["steps"]
    return {"version": __version__, "model_id": plan.model.id, "target_id": plan.target.id,
            "model_default": served if plain(served := served_checkpoint(plan)) else "",
            "served_name": data["served_name"], "steps": [s["id"] for s in steps],
            "patch_keys": [s["patch_key"] for s in steps], "kernel_keys": [s["kernel_key"] for s in steps],
            "pending": [s["id"] for s in steps if s["pending_patches"]],
            "repeat": data["repeat"], "cost": data["cost"], "health_timeout": HEALTH_TIMEOUT_S,
            "soc_default": plan.facts["target.soc_version"], "max_tokens": data["accuracy"]["max_tokens"],
            "min_tokens": data["accuracy"]["min_tokens"], "concurrency": data["workload"]["concurrency"],
            "bench_env": _bench_env(data), "sweep": "sweep" in data,
            "sweep_slo": data["sweep"]["slo"] if "sweep" in data else "",
            "sweep_probes": data["sweep"]["max_probes"] if "sweep" in data else 0, "duration": data["duration"],
            **_profile_script_data(data)}


def _profile_script_data(data: dict) -> dict[str, Any]:
    from optkit.measure.step_profiles import serve_args

    profile = data.get("profile")
    return {"profile_args": serve_args(profile) if profile else [], "profile_tokens": profile["tokens"] if profile else 0,
            "profile_dir": profile["dir"] if profile else ""}


def _readme_data(data: dict) -> dict[str, Any]:
    return {"version": __version__, "data": data}


def write_ladder(plan: Plan, workspace: Workspace, ladder: Ladder, out_dir: Path, *, repeat: int = 1,
                 k8s: bool = False, profile: bool = False, cost: StepCost | None = None,
                 sweep: dict | None = None) -> list[Path]:
    """Write the ladder bundle to ``out_dir`` all at once; return the files written.

    ``out_dir`` must be absent, empty, or a previous ladder without results (``results/`` holds
    finished steps, which a rewritten ladder would no longer match)."""
    files = ladder_files(plan, workspace, ladder, repeat=repeat, k8s=k8s, profile=profile, cost=cost, sweep=sweep)
    out_dir = Path(out_dir).absolute()
    _check_target(out_dir)
    return write_files(files, out_dir)


def _check_target(out_dir: Path) -> None:
    results = out_dir / "results"
    if results.is_dir() and any(results.iterdir()):
        raise MeasureError(f"{out_dir} holds the results of a ladder run ({results}); rewriting the ladder "
                           "would leave them without the ladder they were measured with: move results/ "
                           "away (or `optkit report` it first) or write the new ladder elsewhere")
    check_replaceable(out_dir, LADDER_NAME, {LADDER_NAME, "run-ladder.sh", "README.md", "accuracy", "steps", "k8s",
                                             "results", "report"}, "ladder", MeasureError)


def _check_sweep_fits(steps: list[dict], high: int) -> None:
    """Refuse a sweep whose highest probe some step's scheduler cannot hold at once (requests would queue
    and the sweep measure the queue: ``optkit.measure.sweep_fit.plan_for_sweep`` plans for the range)."""
    short = [f"{s['id']} ({s['scheduler']['text']})" for s in steps if s["scheduler"]["slots"] < high]
    if short:
        raise MeasureError(f"--sweep-max {high}: the servers of {', '.join(short)} hold fewer requests at once, so "
                           "the sweep would measure their queue; plan the ladder for the sweep's range (--concurrency "
                           f"up to {high}: optkit ladder --sweep does it under --goal throughput) or lower --sweep-max")


def _accuracy_subset(prompts: PromptSet, count: int | None) -> PromptSet:
    if count is None or count >= len(prompts.prompts):
        return prompts
    if count < 1:
        raise MeasureError(f"--accuracy-prompts {count}: the accuracy gate needs at least one prompt")
    return PromptSet(max_tokens=prompts.max_tokens, prompts=list(prompts.prompts[:count]))


def sweep_options(slo, *, low: int | None = None, high: int | None = None, resolution: float | None = None) -> dict:
    """The capacity sweep's search options (``optkit.measure.sweep``): the SLO and the concurrency range."""
    from optkit.measure import sweep

    return {"slo": slo, "low": sweep.DEFAULT_LOW if low is None else low,
            "high": sweep.DEFAULT_HIGH if high is None else high,
            "resolution": sweep.DEFAULT_RESOLUTION if resolution is None else resolution}


def _add_cost_and_sweep(data: dict, plan: Plan, cost: StepCost, sweep: dict | None) -> None:
    """ladder.json's ``bench`` (a run's cost, when not bench.sh's defaults) and ``sweep`` (with --sweep)."""
    w = data["workload"]
    if not cost.default:
        data["bench"] = cost.data()
        w["num_prompts"] = {str(c): num_prompts(c, cost.prompts_per_concurrency, cost.min_prompts)
                            for c in w["concurrency"]}
    if sweep is None:
        return
    from optkit.measure.sweep import max_probes, sweep_settings

    request = plan.request
    prefix = request.shared_prefix_len
    client = ["--dataset-name", "random", "--random-input-len", str(request.input_len - prefix),
              *(["--random-prefix-len", str(prefix)] if prefix else []), "--random-output-len",
              str(request.output_len), "--ignore-eos", *bench_extra(request)]
    data["sweep"] = sweep_settings(sweep["slo"], low=sweep["low"], high=sweep["high"], resolution=sweep["resolution"],
                                   prompts_per_concurrency=cost.prompts_per_concurrency, min_prompts=cost.min_prompts,
                                   warmups=cost.warmups, client_args=client)
    data["sweep"]["max_probes"] = max_probes(sweep["low"], sweep["high"], sweep["resolution"])


def _bench_env(data: dict) -> list[tuple[str, int]]:
    """What run-ladder.sh passes bench.sh when a run's cost is not bench.sh's default."""
    bench = data.get("bench")
    if not bench:
        return []
    return [("PROMPTS_PER_CONCURRENCY", bench["prompts_per_concurrency"]), ("MIN_PROMPTS", bench["min_prompts"]),
            ("WARMUPS_PER_CONCURRENCY", bench["warmups_per_concurrency"])]


__all__ = ["ladder_files", "write_ladder", "ladder_data", "sweep_options", "StepCost", "LADDER_NAME", "PROMPTS_FILE"]
