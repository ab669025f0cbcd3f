"""``plan(request)``: facts → resolution → merged launch settings → a ``Plan`` (data only).

The CLI renders a Plan; the bundle writer turns it into files. Nothing here prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optkit.catalog.loader import Catalog, load_catalog
from optkit.catalog.paths import project_root
from optkit.catalog.records import Records, load_records
from optkit.errors import InternalError, OptkitError, RequestError
from optkit.resolve.assumptions import Assumption, mark_decisions, workload_assumptions
from optkit.resolve.choices import Chosen, choose
from optkit.resolve.facts import Facts, compute_facts
from optkit.resolve.context_length import check_max_model_len
from optkit.resolve.fit import plan_fit, refusal as fit_refusal
from optkit.resolve.pipeline import check_pd_decoders
from optkit.resolve.overrides import check_set
from optkit.resolve.tuned import apply as apply_tuned
from optkit.resolve.layout import NodeLayout, layout_of
from optkit.resolve.page_rules import plan_advice
from optkit.resolve.pd import PDLayout, pd_layout
from optkit.resolve.objective import (Baseline, PlanCapacity, capacity_lookup, find_baseline, latency_goal_problem,
                                      load_baselines, measured_lookup)
from optkit.resolve.profile_catalog import find_model, find_target, load_models, load_targets
from optkit.resolve.profile_records import ModelProfileRecord, TargetRecord
from optkit.resolve.request_record import RequestRecord, as_request_record
from optkit.resolve.resolver import Resolution, Status, resolve, version_ranges
from optkit.resolve.settings import (ConflictingSettings, Derivation, Setting, carry_page_settings, collect, launch_flags, merge_into,  # noqa: F401 - re-exported
                                     substitute)
from optkit.resolve.quantization import Weights, find_checkpoint, served_weights
from optkit.resolve.role_plans import check_role_fit, pair_connector, role_plans, shaped_prefill_plan
from optkit.value import field, valueclass

_WOULD_CHANGE = frozenset({Status.objective, Status.regresses, Status.needs_opt_in})
"""Statuses of valid, effective recipes the plan leaves out: only theirs is a gain if selected."""


@valueclass
class Workspace:
    """The data a plan is made from: catalog, models, targets, baselines, measurement records."""

    root: Path
    catalog: Catalog
    models: dict[str, ModelProfileRecord]
    targets: dict[str, TargetRecord]
    baselines: list[Baseline]
    unavailable: dict[str, str] = field(default_factory=dict)
    records: Records = field(default_factory=Records)
    replay: Any = None
    """With ``--from-lock``: the inputs the lock holds (``optkit.resolve.inputs.Replay``)."""


def load_workspace(root: Path | None = None, catalogs=()) -> Workspace:
    """The shipped data under ``root``, with the recipe folders ``catalogs`` (``--catalog``) layered over it."""
    root = root or project_root()
    catalog = load_catalog(root, catalogs)
    return Workspace(root, catalog, load_models(root / "models"), load_targets(root / "targets"),
                     load_baselines(root), unavailable_recipes(catalog), load_records(root, catalog))


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


@valueclass
class Estimate:
    """The TPOT estimate at one concurrency, and in words what it counts and what it leaves out."""

    concurrency: int
    baseline_ms: float | None
    saved_ms: float
    estimate_ms: float | None
    basis: str
    left_out_ms: float = 0.0  # savings of regression fixes: they count for selection, not here
    note: str = ""


@valueclass
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
    slo_checks: list = field(default_factory=list)
    """Each bound of the request's SLO against ``estimates`` (``optkit.resolve.slo.feasibility``)."""
    release: Any = None  # optkit.versions.onrelease.ReleaseView: the release (or tree) planned for
    verdicts: dict[str, Any] = field(default_factory=dict)  # recipe → optkit.versions.onrelease.Verdict
    restricted_to: list[str] | None = None
    """Set by ``restrict``: the subset of the resolver's selection this plan keeps (a ladder step)."""
    restriction_reason: str = ""
    """Set by ``restrict``: why the rest of the selection is left out."""
    layout: NodeLayout | None = None
    """Where the TP × DP ranks run (``optkit.resolve.layout``); on a PD plan, those of each instance."""
    derivations: list[Derivation] = field(default_factory=list)
    """The launch values the selected recipes computed from the request, in selection order."""
    pd: PDLayout | None = None
    """With ``--pd``: the prefill and decode instances and where they run (``optkit.resolve.pd``)."""
    profile: Any = None
    """With ``--profile``: the capture analysed (``optkit.profile.analysis.ProfileAnalysis``)."""
    profile_savings: dict[str, Any] = field(default_factory=dict)
    """With ``--profile``: recipe → ``optkit.resolve.profiled.ProfileSaving``."""
    profile_input: dict | None = None
    """With ``--profile`` (or a lock's): the capture as the lock holds it (``optkit.resolve.inputs.profile_record``)."""
    given: RequestRecord | None = None
    """The request as given, its open fields open (what the lock keeps, so ``--from-lock`` chooses again
    from the same catalog); ``request`` is the request as filled in."""
    choices: list[Chosen] = field(default_factory=list)
    """The request fields left open (``--dp auto``, no ``--[no-]flashcomm1``) and what filled them in
    (``optkit.resolve.choices``); ``request`` holds the values."""
    launch_flags: list[Setting] = field(default_factory=list)
    """The ``vllm serve`` flags the request itself sets (TP, DP, dtype, expert parallelism, async scheduling,
    prefix caching, eager), each ``Setting(flag and value, None, 'request')``, in argv order (``launch_flags``)."""
    capacity: PlanCapacity | None = None
    """Under the throughput goal: the capacity a matching record's sweep measured, under the request's SLO,
    for a step that served exactly this selection (``optkit.resolve.objective.capacity_lookup``)."""
    page_advice: Any = None
    """What the model's tutorial page advises for the request's scenario on its hardware tab and release, each
    value with its page line (``optkit.resolve.page_rules.PageAdvice``; its ``page.*`` facts are in ``facts``)."""
    page_unread: list[str] = field(default_factory=list)
    """The page settings not carried because the plan's release does not read them where the page writes them
    (``optkit.resolve.settings._unread``), each with its page line and why; ``optkit plan`` shows them under the
    page advice."""
    kv_transfer: dict[str, Any] = field(default_factory=dict)
    """With ``--pd``: the ``--kv-transfer-config`` keys the model's own page's command for this plan's role sets beside
    the release's (its connector, ``kv_load_failure_policy``, its connector's extra keys: ``carry_page_settings``), each
    source in ``config_sources`` (``kv_transfer_config.<key>``); ``optkit.resolve.role_plans.pair_connector`` gives
    both roles one connector. Empty: the release's tutorial launch (``optkit.versions.pd``)."""
    roles: dict = field(default_factory=dict)
    """With ``--pd`` and a page that runs PD role commands of this instance shape: each role's plan (this one, with
    the page settings of the page's command for that role: ``PageAdvice.for_role``; ``optkit.bundle.pd.RoleLaunch``
    launches it). Empty when both roles carry this plan's settings."""
    role_left_out: dict[str, str] = field(default_factory=dict)
    """In one role's plan (``roles``): the recipes of the selection that role's own page command turns off, each
    with the rule its role facts fail (``optkit.resolve.role_plans.left_out_in_role``); its settings are not
    collected for that role."""
    fit: Any = None
    """Memory per device: weights, reserve and KV cache against the budget (``optkit.resolve.fit.FitReport``); a
    plan that does not fit is refused."""
    weights: Weights | None = None
    """What the plan serves (``optkit.resolve.quantization``): the weight format, the checkpoint MODEL named, a warning."""
    tuned: Any = None
    """A tune record of this request (``optkit.resolve.tuned.Tuned``): its measured values in the plan, or a note of
    the launch it measured best when the plan's differs."""
    assumptions: list[Assumption] = field(default_factory=list)
    """The workload assumed (``optkit.resolve.assumptions``): sampling, min_tokens, logprobs, penalties,
    structured output, lengths, each with whether it is the default and the flag that changes it."""

    @property
    def selected(self) -> list[str]:
        return self.resolution.selected

    def gain(self, rid: str):
        """The expected gain the plan counts for recipe ``rid`` (``optkit.resolve.objective.Benefit``): its
        benefit when selected, else None. Every view that shows a recipe's gain shows this one."""
        d = self.resolution.decisions[rid]
        return d.benefit if d.status is Status.selected else None

    def gain_if_selected(self, rid: str):
        """What a valid recipe the plan leaves out would change if it were selected (left out by the optimum, a
        regression, a high risk awaiting ``--with``), else None: a recipe without effect here, or not valid,
        changes nothing, whatever the article measured elsewhere."""
        d = self.resolution.decisions[rid]
        return d.benefit if d.status in _WOULD_CHANGE else None

    def figures(self, recipe) -> list[tuple[Any, dict[int, str]]]:
        """Each article figure of ``recipe`` (its ``gains``) with the concurrencies at which this plan's gain
        (``gain``) counts it and the basis there (``{}``: not counted here). README.md and expected.json show
        this, never a match of their own."""
        gain = self.gain(recipe.id)
        used = gain.figures if gain is not None else {}
        return [(figure, {c: gain.basis[c] for c, g in sorted(used.items()) if g is figure})
                for figure in recipe.gains]


def resolve_model(workspace: Workspace, request: RequestRecord) -> ModelProfileRecord:
    """The profile MODEL (a profile's name or one of its checkpoints) or ``--model-config`` names."""
    if request.model_config_path:
        from optkit.resolve.hf_config import profile_from_hf_config

        held = workspace.replay.model_config if workspace.replay is not None else None
        if held is not None:  # the config.json the lock holds, read as it was
            return profile_from_hf_config(Path(held["file"]), request.model_id, held["text"])
        return profile_from_hf_config(Path(request.model_config_path), request.model_id)
    if request.model_id:
        raise RequestError("--model-id names a checkpoint given with --model-config; a catalog model "
                           f"({request.model or 'MODEL'}) has its own id")
    if not request.model:
        raise OptkitError("name a model (e.g. qwen3.5-35b) or give --model-config config.json")
    named = find_checkpoint(workspace.models, request.model)
    return named[0] if named else find_model(workspace.models, request.model)


def request_weights(workspace: Workspace, request: RequestRecord, model: ModelProfileRecord) -> Weights:
    """The weights the request serves on ``model`` (``optkit.resolve.quantization``)."""
    named = find_checkpoint(workspace.models, request.model) if request.model and not request.model_config_path else None
    return served_weights(request, model, named[1] if named else None)


def filled_request(request: RequestRecord, ws: Workspace):
    """``request`` with its open fields filled in by the catalog's rules (``optkit.resolve.choices``) and its
    weight format by its checkpoint (``optkit.resolve.quantization``), what was chosen, the weights, and the model
    profile, target and release (``ReleaseView``) the plan is made for."""
    from optkit.resolve.choices import with_values
    from optkit.resolve.facts import ascend_version
    from optkit.versions.onrelease import release_view

    model = resolve_model(ws, request)
    weights = request_weights(ws, request, model)
    if request.quantization != weights.quantization and weights.quantization != "bf16":
        request = with_values(request, quantization=weights.quantization)
    target = find_target(ws.targets, request.target)
    if (dtype := target.serving_dtype(request.dtype)) != request.dtype:  # decided once: every view renders it
        request = with_values(request, dtype=dtype)
    located = ws.replay.tree_at if ws.replay is not None and ws.replay.tree_at is not None else request.tree
    release = release_view(ascend_version(request), Path(located) if request.tree else None, ws.catalog,
                           shown=request.tree)
    filled, choices = choose(request, model, target, release, ws.catalog, weights)
    return filled, choices, weights, model, target, release


def request_facts(request, workspace: Workspace) -> Facts:
    """The facts ``plan`` judges ``request`` on (its open fields filled in first), as ``optkit facts`` shows them."""
    filled, _, weights, model, target, release = filled_request(as_request_record(request), workspace)
    return compute_facts(filled, model, target, release, weights)


def plan(request: RequestRecord, workspace: Workspace | None = None, profile: Path | None = None,
         profile_concurrency: int = 1, profile_display: str | None = None, only_role: str | None = None) -> Plan:
    """Resolve ``request`` against the catalog on its release (or ``--tree``) and collect the launch
    settings of the result, each knob in the form that release reads. A validated ``Request`` model
    is frozen into its record first: the run-time holds records. ``profile``: a capture of the
    deployment (``optkit.resolve.profiled``), taken at ``profile_concurrency``. ``only_role``: the plan is for
    that PD role's instances alone (an asymmetric PD's prefill shape), so only that role's plan must fit."""
    from optkit.versions.onrelease import verdict

    given = as_request_record(request)
    check_pd_decoders(given, only_role)
    ws = workspace or load_workspace()
    filled = filled_request(given, ws)
    # a tune record of this request: its measured values over the rules (optkit.resolve.tuned)
    from optkit.resolve.facts import ascend_version

    filled, tuned = apply_tuned(given, filled, ws, filled[3].id, filled[4].id, str(ascend_version(filled[0])),
                                lambda r: filled_request(r, ws))
    request, choices, weights, model, target, release = filled
    facts = compute_facts(request, model, target, release, weights)  # the facts `optkit facts` shows: request_facts
    if problem := latency_goal_problem(facts):
        raise RequestError(problem)
    version_ranges(ws.catalog, facts)  # packaging's answers, from the cache, for the verdicts and the resolver
    verdicts = {r.id: verdict(r, release) for r in ws.catalog}
    layout = layout_of(request.tp, request.dp, facts["parallel.nodes"], facts["parallel.pcp"], facts["parallel.pp"])
    if request.pd is not None:
        from optkit.versions.pd import pd_release

        pd_release(str(facts["versions.vllm_ascend"]))  # refused before resolving: no tutorial, no PD launch

    baseline_for = _baseline_lookup(ws, model, target, layout)
    # the records name no node count, and the ladder measures one node: none applies across nodes
    measured = measured_lookup(ws.records, model.id, target.id, facts) if layout.nodes == 1 else None
    # a ladder sweeps one server: its capacity says nothing of a prefill/decode pair
    capacity = (capacity_lookup(ws.records, model.id, target.id, facts)
                if layout.nodes == 1 and request.pd is None else None)
    analysis, table, held = None, {}, None
    if profile is not None:  # only then: the profile stage is not imported on the plain plan path
        from optkit.resolve.inputs import profile_record
        from optkit.resolve.profiled import analyse_for, profile_lookup, savings

        analysis = analyse_for(ws.catalog, profile, model, facts, profile_display)
        table = savings(analysis, ws.catalog, facts)
        measured = profile_lookup(measured, table, profile_concurrency, ws.catalog, bool(request.mtp),
                                  facts["objective.goal"] == "latency")
        held = profile_record(Path(profile), profile_display or str(profile), profile_concurrency, table)
    elif ws.replay is not None and ws.replay.profile is not None:  # --from-lock: the numbers the lock holds
        from optkit.resolve.inputs import profile_table
        from optkit.resolve.profiled import profile_lookup

        held = ws.replay.profile
        table = profile_table(held)
        measured = profile_lookup(measured, table, held["concurrency"], ws.catalog, bool(request.mtp),
                                  facts["objective.goal"] == "latency")
    resolution = resolve(ws.catalog, facts, request.with_recipes, request.without_recipes, baseline_for,
                         ws.unavailable, verdicts, measured, capacity)
    result = Plan(request, model, target, facts, resolution, release=release, verdicts=verdicts, layout=layout,
                  choices=choices, given=given, weights=weights,
                  pd=pd_layout(request, target), profile=analysis, profile_savings=table, profile_input=held,
                  capacity=capacity.selection(resolution.selected) if capacity else None,
                  page_advice=plan_advice(model, target, facts["versions.vllm_ascend"], facts["objective.goal"]))
    result.tuned = tuned
    result = _assemble(result, ws, baseline_for)
    if request.asymmetric_pd:  # the prefill instances' own shape: planned for it (role_plans.shaped_prefill_plan)
        result.roles = {**result.roles, "prefill": shaped_prefill_plan(
            result, lambda r: plan(r, ws, only_role="prefill"), lambda rid: bool(ws.catalog[rid].patches))}
        pair_connector(result)
    if result.pd is not None and ({only_role} if only_role else {"prefill", "decode"}) <= set(result.roles):
        # both roles run their own plans, so the plan's own settings run nowhere: its fit is its instance's role's
        # (the decode role's; the prefill role's for an asymmetric PD's prefill-shape plan)
        result.fit = result.roles[only_role or "decode"].fit
    if not result.fit.fits:
        raise RequestError(fit_refusal(result.fit, model.id, target.id))
    check_role_fit(result, only_role)
    return result


def restrict(full: Plan, keep: list[str], workspace: Workspace, why: str) -> Plan:
    """``full`` with only the recipes ``keep`` of its selection (in its order): the same request and
    facts, the launch settings of the kept recipes alone; each selected recipe left out is
    ``user-excluded`` with the reason ``why``. A ladder step is one."""
    from optkit.value import replace

    unknown = sorted(set(keep) - set(full.selected))
    if unknown:
        raise InternalError(f"restrict: {', '.join(unknown)} are not selected by the plan")
    decisions = {rid: d if rid in keep or rid not in full.selected else
                 replace(d, status=Status.user_excluded, reason=why, chain=[])
                 for rid, d in full.resolution.decisions.items()}
    selected = [rid for rid in full.selected if rid in keep]
    resolution = Resolution(decisions, selected, list(full.resolution.upstream))
    result = Plan(full.request, full.model, full.target, full.facts, resolution, release=full.release,
                  verdicts=full.verdicts, restricted_to=selected, restriction_reason=why, layout=full.layout,
                  pd=full.pd, choices=list(full.choices), given=full.given, page_advice=full.page_advice,
                  weights=full.weights)
    result.tuned = full.tuned
    return _assemble(result, workspace, _baseline_lookup(workspace, result.model, result.target, full.layout))


def _baseline_lookup(ws: Workspace, model, target, layout: NodeLayout):
    """The article's TPOT baseline per concurrency: it belongs to catalog profiles on one node only
    (the article measured one card)."""
    def baseline_for(c: int) -> Baseline | None:
        if model.source != "catalog" or layout.nodes > 1:
            return None
        return find_baseline(ws.baselines, model.id, target.id, c)

    return baseline_for


def _collect(result: Plan, ws: Workspace) -> None:
    """The launch settings of the request's speculative config and of each selected recipe, read with the plan's
    facts."""
    if result.request.speculative_method:
        merge_into(result.speculative_config, requested_speculative_config(result.request),
                   "request", result.config_sources, "speculative_config")
    for rid in result.selected:
        if rid not in result.role_left_out:
            collect(result, ws.catalog[rid], result.facts, result.verdicts[rid])


def _assemble(result: Plan, ws: Workspace, baseline_for) -> Plan:
    """Collect the launch settings of the plan's selection and its TPOT estimate. With speculative decoding the
    speculative config starts from the request (method, k, eagle3's draft model), whether or not a recipe sets it
    too."""
    if result.page_advice is not None:  # the page's command of the plan's layout: for derivations' citations too
        result.page_advice = result.page_advice.for_layout(result.request.tp, result.request.dp, result.layout.nodes,
                                                           result.request.max_model_len, result.request.weight_format,
                                                           result.facts["parallel.pcp"],
                                                           result.request.speculative_method,
                                                           result.facts["parallel.pp"])
    result.assumptions = workload_assumptions(result.request)
    mark_decisions(result.assumptions, result.resolution.decisions, ws.catalog, result.facts)
    result.launch_flags = launch_flags(result.request, result.facts)
    _collect(result, ws)
    result.roles = role_plans(result, lambda role_plan: _collect(role_plan, ws), ws.catalog)
    carry_page_settings(result)
    pair_connector(result)
    check_set(result)
    check_max_model_len(result)
    result.estimates = _estimates(result, baseline_for)
    result.fit = plan_fit(result)
    if result.facts["objective.slo"]:
        from optkit.resolve.slo import feasibility, parse_slo

        result.slo_checks = feasibility(parse_slo(result.facts["objective.slo"]),
                                        [(e.concurrency, e.estimate_ms) for e in result.estimates])
    return result


def requested_speculative_config(request: RequestRecord) -> dict[str, Any]:
    """The --speculative-config the request asks for: its method and k, and eagle3's or dflash's draft model."""
    config: dict[str, Any] = {"method": request.speculative_method, "num_speculative_tokens": request.k}
    if request.draft_model:
        config["model"] = request.draft_model
    return config


def _estimates(result: Plan, baseline_for) -> list[Estimate]:
    out = []
    for c in result.facts["workload.concurrency"]:
        benefits = {r: result.gain(r) for r in result.selected}
        saved = sum(b.estimate_ms.get(c, 0.0) for b in benefits.values() if b)
        fixes = {r: b.per_concurrency[c] - b.estimate_ms[c] for r, b in benefits.items()
                 if b and c in b.estimate_ms and b.per_concurrency.get(c) and b.per_concurrency[c] != b.estimate_ms[c]}
        note = _left_out_note(c, fixes)
        base = baseline_for(c)
        if base is None:
            out.append(Estimate(c, None, saved, None, _no_baseline(result, c), sum(fixes.values()), note))
        else:
            out.append(Estimate(c, base.tpot_ms, saved, max(base.tpot_ms - saved, 0.0),
                                f"article baseline {base.tpot_ms} ms ({base.derivation})", sum(fixes.values()), note))
    return out


def _left_out_note(c: int, fixes: dict[str, float]) -> str:
    if not fixes:
        return ""
    named = ", ".join(f"{rid} {ms:.3g} ms" for rid, ms in sorted(fixes.items()))
    return (f"c{c} leaves out {sum(fixes.values()):.3g} ms of regression fixes ({named}): their 'before' is a "
            "broken setup (e.g. MTP with vLLM's default capture sizes), so the saving is what the fix restores, "
            "not a gain over a working baseline; they count for choosing recipes, not in the estimate")


def _no_baseline(result: Plan, c: int) -> str:
    """What 'no published baseline' means for the estimate at concurrency ``c``."""
    if result.model.source == "config.json":
        whose = (f"the article publishes TPOT baselines for its own deployment only, none for {result.model.id} "
                 "(a profile derived from config.json)")
    elif result.layout.nodes > 1:
        whose = (f"the article's baselines and gains were measured on one {result.target.id} card, and this plan "
                 f"runs on {result.layout.nodes} nodes")
    else:
        whose = f"the article publishes no c{c} TPOT baseline for {result.model.id} on {result.target.id}"
    return (f"no published baseline: {whose}; gains reported in % cannot be turned into ms, so the saving above "
            "counts only gains reported in ms or µs per step, and no TPOT is estimated")


def count_by_status(result: Plan) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in result.resolution.decisions.values():
        counts[d.status.value] = counts.get(d.status.value, 0) + 1
    return dict(sorted(counts.items()))


__all__ = ["Plan", "Workspace", "load_workspace", "plan", "Status"]
