"""A user's own profile in the plan: savings measured from their capture, and recipes ranked by them.

``optkit profile DIR --model … --target …`` and ``optkit plan … --profile DIR``. The profile stage
(``optkit.profile``) reads the capture and matches the catalog's signatures; here its findings
become estimates the resolver weighs (``profile_lookup``: below numbers measured on an NPU host
with the ladder, above the article's), and a ranking of the recipes that address what the
capture shows, each with the resolver's decision and reason for this request (``rank``).

How a finding becomes a TPOT saving (docs/profile.md): the recipe's signatures that apply on the
release and hold for the request (their ``when``) add up their saving per decode step; that many
microseconds count as TPOT at the profile's concurrency (one decode step per token; with MTP a step
yields more than one token, so it is an upper bound), labelled "from your profile of <date>". A
recipe whose signatures are all absent from the capture gets 0 there: what it removes is not in
this deployment. Higher concurrencies where the article would only extrapolate take the capture's
number, extrapolated (``profile_lookup``); the others keep the article's (a capture is one load).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from optkit.resolve.classify import _holds
from optkit.resolve.objective import Measured

MS_PER_US = 0.001
VALID = ("selected", "objective")


def dims_of(model) -> dict[str, int]:
    """The model profile's layer counts and dimensions a signature may name."""
    return {k: getattr(model, k) for k in ("num_layers", "gdn_layers", "full_attention_layers", "vocab_size",
                                           "hidden_size") if getattr(model, k, None) is not None}


@dataclass(frozen=True)
class ProfileSaving:
    """What the capture says one recipe saves per decode step, and how that was computed."""

    recipe: str
    saving_us: float
    present: list  # the findings (optkit.profile.signatures.Finding) that count
    not_removed: list = field(default_factory=list)  # present, but its 'when' fails for this request
    basis: str = ""


def savings(analysis, catalog, facts) -> dict[str, ProfileSaving]:
    """Per recipe with a signature on the release: its saving per decode step from the capture."""
    out = {}
    for recipe in catalog:
        findings = analysis.finding(recipe.id)
        if not findings:
            continue
        signatures = recipe.signatures
        holds = [f for f in findings if _holds(signatures[f.index].when, facts)]
        counted = [f for f in holds if f.present]
        not_removed = [f for f in findings if f.present and f not in holds]
        total = round(sum(f.saving_us for f in counted), 3)
        out[recipe.id] = ProfileSaving(recipe.id, total, counted, not_removed, _basis(analysis, counted, findings))
    return out


def _basis(analysis, counted, findings) -> str:
    head = f"from your profile of {analysis.started}"
    if not counted:
        present = [f for f in findings if f.present]
        if present:
            return (f"{head}: {', '.join(f'{f.per_step} × {f.pattern}' for f in present)} per decode step, "
                    f"which it does not remove for this request (only when {'; '.join(sorted({f.when for f in present if f.when}))})")
        return f"{head}: {', '.join(sorted({f.pattern for f in findings}))} not in the capture"
    parts = [f"{f.attributed} × {f.cost_us:g} µs {_of(f)}" + (" (up to: it shrinks them)" if f.effect == "shrinks" else "")
             for f in counted]
    return f"{head}: {round(sum(f.saving_us for f in counted), 3):g} µs per decode step ({'; '.join(parts)})"


def _of(finding) -> str:
    """What one instance's microseconds are: a blocking host call's are the device idle it causes."""
    from optkit.profile.steps import BLOCKING_COPY, SYNC_CALL

    if finding.what == "host-call" and (finding.pattern == BLOCKING_COPY or SYNC_CALL.fullmatch(finding.pattern)):
        return f"of device idle from {finding.pattern}"
    return finding.pattern


def profile_lookup(measured, table: dict[str, ProfileSaving], concurrency: int, catalog=(), mtp: bool = False,
                   carry_up: bool = True):
    """``measured(recipe_id, c)`` with the profile's savings under it: records first, then the capture
    (at ``concurrency``, the load it was taken at), then nothing (the article's numbers). Above that load,
    where the article has no number of its own at ``c`` (it would extrapolate from a load no higher than
    the capture's, or has none), the capture's saving is what is extrapolated, labelled so: one source
    per recipe, never the capture at c1 beside the article's c1 carried to c4. ``carry_up`` false (the
    throughput goal): nothing is carried up (``optkit.resolve.objective.benefit``)."""
    gains = {r.id: r.gains for r in catalog}

    def lookup(recipe_id: str, c: int):
        found = measured(recipe_id, c) if measured else None
        if found is not None or recipe_id not in table:
            return found
        entry = table[recipe_id]
        if c == concurrency:
            return Measured(entry.saving_us * MS_PER_US, entry.basis)
        if c > concurrency and carry_up and _article_extrapolates(gains.get(recipe_id, ()), c, concurrency, mtp):
            return Measured(entry.saving_us * MS_PER_US, f"extrapolated from c{concurrency}, {entry.basis}")
        return None

    return lookup


def _article_extrapolates(gains, c: int, concurrency: int, mtp: bool) -> bool:
    """The article has no number at ``c`` itself: it would carry one up from a load ≤ ``concurrency``, or has none."""
    from optkit.resolve.objective import _matching

    for metrics in ({"tpot"}, {"host_time"}):
        found, basis = _matching(list(gains), metrics, c, mtp)
        if found:
            lower = [g.concurrency for g in found if g.concurrency is not None]
            return basis.startswith("extrapolated from") and all(x <= concurrency for x in lower)
    return True


@dataclass
class Ranked:
    """One recipe that addresses what the capture shows: its saving, the resolver's word, the signatures."""

    recipe: str
    saving_us: float
    status: str
    reason: str
    valid: bool
    findings: list
    not_removed: list
    basis: str


@dataclass
class ProfileReport:
    analysis: object  # optkit.profile.analysis.ProfileAnalysis
    plan: object | None  # the plan with the profile's estimates (None without a model)
    ranked: list[Ranked]
    concurrency: int


def rank(plan, table: dict[str, ProfileSaving]) -> list[Ranked]:
    """The recipes whose signatures are present: the ones the plan takes (selected, objective) first,
    those with a saving before those without, then by saving."""
    out = []
    for rid, entry in table.items():
        if not entry.present and not entry.not_removed:
            continue
        decision = plan.resolution.decisions[rid]
        status = decision.status.value
        valid = status in VALID and bool(entry.present)
        reason = decision.reason
        out.append(Ranked(rid, entry.saving_us if entry.present else 0.0, status, reason, valid, entry.present,
                          entry.not_removed, entry.basis))
    return sorted(out, key=lambda r: (r.status not in VALID, not r.valid, -r.saving_us, r.recipe))


def profile_report(request, directory: Path, workspace=None, concurrency: int = 1, display: str | None = None):
    """Analyse the capture in ``directory`` for ``request`` (its model, target and release) and rank the
    recipes by it; ``concurrency``: the load it was captured at."""
    from optkit.resolve.plan import plan

    result = plan(request, workspace, profile=Path(directory), profile_concurrency=concurrency, profile_display=display)
    return ProfileReport(result.profile, result, rank(result, result.profile_savings), concurrency)


def analyse_for(catalog, directory: Path, model, facts, display: str | None = None):
    """The capture analysed with the model's dimensions on the request's release, and its own release
    checked against that one (``release_check``)."""
    from optkit.profile.analysis import analyze

    release = str(facts["versions.vllm_ascend"])
    analysis = analyze(directory, catalog, dims_of(model), release, display)
    analysis.release_check = release_check(analysis, release)
    return analysis


def release_check(analysis, release: str) -> str:
    """The capture's vllm-ascend release against ``release`` (the plan's), in words: the release the
    capture records (profiler_metadata.json's ``vllm_ascend_version``), else the releases whose
    torch_npu pin is the capture's torch_npu, else unknown."""
    from packaging.version import InvalidVersion, Version

    from optkit.versions.releases import known_versions, load_release

    versions = analysis.slowest.versions
    recorded = versions.get("vllm_ascend_version")
    if recorded:
        try:
            same = Version(recorded) == Version(release)
        except InvalidVersion:
            same = False
        if same:
            return f"captured on vllm-ascend {recorded}, the plan's release"
        return (f"MISMATCH: captured on vllm-ascend {recorded}, but the plan is for {release}: the capture's costs are "
                f"another release's (signatures and code paths differ); capture on {release}, or plan with "
                f"--vllm-ascend-version {recorded}")
    torch_npu = versions.get("torch_npu_version")
    if not torch_npu:
        return f"the capture does not record its vllm-ascend release (unknown): its savings are assumed to hold on {release}"
    pins = {str(v): str(load_release(v).pins["torch_npu"].value) for v in known_versions()}
    pinned = [v for v, pin in pins.items() if pin == torch_npu]
    head = f"the capture does not record its vllm-ascend release (unknown); its torch_npu {torch_npu} is the pin of "
    if release in pinned:
        return head + f"{', '.join(pinned)}, {release} among them"
    return (f"MISMATCH: {head}{', '.join(pinned) or 'no release optkit knows'}, not of {release} "
            f"(torch_npu {pins.get(release, '?')}): the capture is most likely another release's")


def report_data(report: ProfileReport) -> dict:
    """The JSON form of ``optkit profile --json``: the analysis, and the ranking when a model was given."""
    from dataclasses import asdict

    from optkit.profile.analysis import as_dict

    data = {"profile": as_dict(report.analysis), "concurrency": report.concurrency}
    if report.plan is not None:
        p = report.plan
        data["request"] = {"model": p.model.id, "target": p.target.id, "vllm_ascend": str(p.facts["versions.vllm_ascend"]),
                           "mtp": bool(p.request.mtp)}
        data["ranking"] = [{"recipe": r.recipe, "saving_us_per_step": r.saving_us, "status": r.status, "valid": r.valid,
                            "reason": r.reason, "basis": r.basis, "signatures": [asdict(f) for f in r.findings],
                            "not_removed": [asdict(f) for f in r.not_removed]} for r in report.ranked]
    return data


def analysis_only(directory: Path, catalog, release: str | None, display: str | None = None) -> ProfileReport:
    """Without a model: the decomposition and the signatures present (no layer counts, no validity)."""
    from optkit.profile.analysis import analyze

    analysis = analyze(directory, catalog, None, release, display)
    if release is not None:
        analysis.release_check = release_check(analysis, release)
    return ProfileReport(analysis, None, [], 1)
