"""What a recipe is expected to gain for a request: reported numbers → ms of TPOT per concurrency.

Rules (documented in docs/resolver.md):
- a number measured on an NPU host (an accepted record in verified/, ``optkit.catalog.records``)
  comes first, where it matches the request: same target, model and vllm-ascend release, same
  workload (input/output length, MTP and k, sampling, min_tokens) and the concurrency measured;
  labelled "measured on …". Its verdict counts: a change within the noise counts as 0 ms. Among
  several matching records the one with the most repeats wins, then the first by name;
- a ``tpot`` gain in ms counts at its concurrency (or at every concurrency when it names none);
- a ``tpot`` gain in % is converted with the article's baseline TPOT for that model and
  concurrency (models/reference/article-baselines.yaml), and is skipped where none is published;
- a ``host_time`` gain in µs/step counts as that many µs of TPOT at every concurrency (one decode
  step per token without MTP; an estimate, labelled "derived");
- numbers measured in the request's mode (MTP on/off) are preferred; for an MTP request a number
  measured without MTP is used when it is the only one (the article built its MTP stage on top
  of the non-MTP work and reports those gains carrying over or growing), labelled so; a number
  measured only with MTP on is never used for a request without MTP (MTP-specific fixes);
- a concurrency the article has no number for takes the nearest lower measured concurrency's
  number, labelled "extrapolated from cN" (so a change that already regresses at c8 is not
  picked for c16 on the strength of silence);
- under the throughput goal (``objective.goal``) a gain is not extrapolated: a TPOT saving the
  article measured at c1 says nothing of tokens/s at c64, so it is "unquantified" there (the
  recipe stays a valid unquantified candidate); a regression still is (conservative);
- under the throughput goal with an SLO, a record that matches the request as above and whose
  capacity sweep ran under the request's SLO (the same canonical text) gives the recipe's measured
  capacity change (``capacity_delta``, ``capacity_verdict``, in concurrent requests): it quantifies the
  recipe (no "unquantified" label), counts before any TPOT saving when choosing, and a measured
  capacity regression makes the recipe ``regresses``; the step that served exactly the plan's
  selection gives the plan's measured capacity (``capacity_lookup``);
- a positive change (slower) at a requested concurrency is a regression;
- a gain's ``scope`` says what it may count for: ``this-change`` counts everywhere;
  ``regression-fix`` (its "before" is a misconfiguration, e.g. MTP with the default capture sizes)
  counts for selection but not for the TPOT estimate; ``whole-stack`` counts for neither.
"""

from __future__ import annotations

from pathlib import Path

from optkit.catalog.cache import cached
from optkit.catalog.recipe_records import GainRecord, RecipeRecord
from optkit.value import field, fields, valueclass

MS_PER_US = 0.001


@valueclass(frozen=True)
class Baseline:
    model: str
    target: str
    concurrency: int
    mtp: bool
    tpot_ms: float
    quote: str
    derivation: str


@valueclass
class Benefit:
    """Expected TPOT reduction (ms, positive = faster) per requested concurrency."""

    per_concurrency: dict[int, float | None] = field(default_factory=dict)
    basis: dict[int, str] = field(default_factory=dict)
    estimate_ms: dict[int, float] = field(default_factory=dict)  # the part that counts for the TPOT estimate
    capacity: MeasuredCapacity | None = None  # under the throughput goal: measured under the request's SLO
    figures: dict[int, GainRecord] = field(default_factory=dict)  # the article figure each number was taken from

    @property
    def regressions(self) -> dict[int, float]:
        return {c: -v for c, v in self.per_concurrency.items() if v is not None and v < 0}

    @property
    def quantified(self) -> bool:
        return self.capacity is not None or any(v is not None for v in self.per_concurrency.values())

    @property
    def total_ms(self) -> float:
        return sum(v for v in self.per_concurrency.values() if v is not None)

    def weight_us(self) -> int:
        """Integer objective weight: total expected saving in µs over the requested concurrencies."""
        return round(self.total_ms * 1000)


LATENCY_STEP_TOKENS_MAX = 512
"""The largest decode step the latency goal's shapes serve: vLLM's default capture list ends at 512 (vllm/config/
vllm.py:1679 in vLLM 0.23.0) and vllm-ascend caps the largest size at min(max_num_seqs × (1 + k), 512)
(vllm_ascend/platform.py:241 in 0.23.0, :1537 in 0.30.0rc2)."""


def latency_goal_problem(facts) -> str:
    """Why the latency goal's launch shapes mean nothing for this load ('' when they do): the latency goal
    sizes no scheduler (no --max-num-seqs) and captures c × (1 + k) per concurrency, so a decode step above
    ``LATENCY_STEP_TOKENS_MAX`` would be captured at a size vLLM never reaches by default, and its TPOT
    gains would be carried up from the article's c ≤ 8 numbers."""
    if facts["objective.goal"] != "latency":
        return ""
    c, k = facts["workload.concurrency_max"], facts["spec.num_speculative_tokens"]
    if c * (1 + k) <= LATENCY_STEP_TOKENS_MAX:
        return ""
    step = f"c{c} × (1 + k = {1 + k}) = {c * (1 + k)} tokens" if k else f"c{c}: {c} tokens"
    return (f"--goal latency at concurrency {c}: a decode step of {step} is above {LATENCY_STEP_TOKENS_MAX}, the "
            "largest capture size vLLM's default list and vllm-ascend's cap reach; the latency goal sizes no "
            "scheduler (no --max-num-seqs) and carries the article's c <= 8 gains up to this load. Use --goal "
            "throughput (it sizes --max-num-seqs and the capture ladder for the load), or a concurrency of at most "
            f"{LATENCY_STEP_TOKENS_MAX // (1 + k)}")


def load_baselines(root: Path) -> list[Baseline]:
    """Read models/reference/article-baselines.yaml (absent file: no baselines), through the catalog cache."""
    folder = root / "models" / "reference"
    return cached("baselines", folder, lambda: _read_baselines(folder), code=("resolve/objective.py",))


def _read_baselines(folder: Path) -> list[Baseline]:
    from optkit.catalog.yamlio import load_yaml

    path = folder / "article-baselines.yaml"
    if not path.is_file():
        return []
    data, _ = load_yaml(path, "models/reference/article-baselines.yaml")
    return [Baseline(**{k: entry[k] for k in fields(Baseline)}) for entry in data["baselines"]]


def find_baseline(baselines: list[Baseline], model: str, target: str, concurrency: int) -> Baseline | None:
    for b in baselines:
        if b.model == model and b.target == target and b.concurrency == concurrency:
            return b
    return None


def _matching(gains: list[GainRecord], metrics: set[str], concurrency: int, mtp: bool) -> tuple[list[GainRecord], str]:
    """The gains that speak for ``concurrency``, best match first (see the module docstring)."""
    usable = [g for g in gains if g.metric in metrics and g.scope != "whole-stack"]
    modes = [(lambda g: g.mtp in (None, mtp), "")]
    if mtp:
        modes.append((lambda g: g.mtp is False, "reported with MTP off"))
    lower = sorted({g.concurrency for g in usable if g.concurrency is not None and g.concurrency < concurrency},
                   reverse=True)
    for at, where in [(concurrency, ""), *[(c, f"extrapolated from c{c}") for c in lower[:1]]]:
        for same_mode, mode_note in modes:
            found = [g for g in usable if g.concurrency in (None, at) and same_mode(g)]
            if found:
                notes = [n for n in (where, mode_note) if n]
                return found, "; ".join(notes) if notes else "reported"
    return [], "unquantified"


def _gain_ms(gain: GainRecord, baseline: Baseline | None) -> float | None:
    if gain.metric == "host_time":
        return -gain.change * MS_PER_US
    if gain.unit == "ms":
        return -gain.change
    if gain.unit == "%" and baseline is not None:
        return -gain.change / 100.0 * baseline.tpot_ms
    return None


@valueclass(frozen=True)
class Measured:
    """A recipe's TPOT saving measured on an NPU host (ms, positive = faster) and where."""

    saving_ms: float
    basis: str


def _record_matches(model_id: str, target_id: str, facts):
    """``matches(record) -> bool``: the record measured this request's target, model, release, workload and
    parallel layout (not its concurrency: each number says which concurrency it is of)."""
    workload = {"input_len": facts["workload.input_len"], "output_len": facts["workload.output_len"],
                "mtp": facts["spec.mtp"], "num_speculative_tokens": facts["spec.num_speculative_tokens"],
                "sampling": "greedy" if facts["workload.greedy"] else "sampled",
                "min_tokens": facts["workload.min_tokens"], "shared_prefix_len": facts["workload.shared_prefix_len"],
                # a saving measured at one parallel layout says little of another (other shapes per rank)
                "tp": facts["parallel.tp"], "dp": facts["parallel.dp"], "ep": facts["parallel.ep"]}
    release = str(facts["versions.vllm_ascend"])

    mixed = bool(facts["workload.length_mix"])  # a record measures one length; a length mix matches none

    def matches(record) -> bool:
        w = record.workload
        return (not mixed and record.target == target_id and record.model == model_id and record.release.vllm_ascend == release
                and all(getattr(w, key) == value for key, value in workload.items()))

    return matches


def measured_lookup(records, model_id: str, target_id: str, facts):
    """``measured(recipe_id, concurrency) -> Measured | None`` from the records that match the request."""
    matches = _record_matches(model_id, target_id, facts)

    def measured(recipe_id: str, concurrency: int) -> Measured | None:
        found = [e for e in records.of(recipe_id) if matches(e.record) and concurrency in e.measurement.tpot_delta_ms]
        if not found:
            return None
        entry = min(found, key=lambda e: (-e.measurement.repeats, e.name))
        m = entry.measurement
        delta, noise, verdict = m.tpot_delta_ms[concurrency], m.noise_ms[concurrency], m.verdict[concurrency]
        with_ = f", together with {', '.join(m.together_with)}" if m.together_with else ""
        if verdict == "no-measurable-effect":
            return Measured(0.0, f"{entry.label}: no measurable effect (Δ {delta:+.3g} ± {noise:.2g} ms{with_})")
        return Measured(-delta, f"{entry.label}: Δ {delta:+.3g} ± {noise:.2g} ms{with_}")

    return measured


@valueclass(frozen=True)
class MeasuredCapacity:
    """A recipe's capacity change under the request's SLO, from a ladder's sweep on an NPU host: the
    concurrent requests its step held minus those of the step it was compared with."""

    delta: int
    verdict: str  # gain / regression (the two brackets do not overlap) or no-measurable-effect
    slo: str
    basis: str  # where it was measured: the record, its step

    @property
    def counted(self) -> int:
        """What counts for choosing under the throughput goal: the delta, 0 when the brackets overlap."""
        return 0 if self.verdict == "no-measurable-effect" else self.delta

    def text(self) -> str:
        if self.verdict == "no-measurable-effect":
            return (f"measured capacity at SLO {self.slo}: no measurable effect (Δ {self.delta:+d} concurrent "
                    f"requests, the brackets overlap; {self.basis})")
        if self.verdict == "regression":
            return f"measured capacity regression at SLO {self.slo}: Δ {self.delta:+d} concurrent requests ({self.basis})"
        return f"measured capacity Δ {self.delta:+d} concurrent requests at SLO {self.slo} ({self.basis})"


@valueclass(frozen=True)
class PlanCapacity:
    """The capacity a ladder's sweep measured, under the request's SLO, for a step that served exactly
    the plan's selection: the highest concurrency that met the SLO, and the lowest that missed it."""

    capacity: int
    upper: int | None
    status: str  # found, below-lowest (capacity 0), at-most-high (the highest probe met it)
    slo: str
    record: str
    step: str
    where: str  # the record's label (host, release, record name)
    repeats: int
    output_throughput: float | None = None
    request_goodput: float | None = None

    def text(self) -> str:
        bracket = {"found": f"met at {self.capacity}, missed at {self.upper}",
                   "below-lowest": f"missed even at {self.upper}, the lowest load probed",
                   "at-most-high": f"at least {self.capacity}: the highest load probed met it"}[self.status]
        at = f", {self.output_throughput:g} output tok/s at it" if self.output_throughput is not None else ""
        runs = f"{self.repeats} run" + ("" if self.repeats == 1 else "s")
        return (f"measured capacity {self.capacity} at SLO {self.slo} ({self.where}, step {self.step}: {bracket}{at}; "
                f"{runs})")

    def data(self) -> dict:
        return {"capacity": self.capacity, "upper": self.upper, "status": self.status, "slo": self.slo,
                "record": self.record, "step": self.step, "repeats": self.repeats,
                "output_throughput": self.output_throughput, "request_goodput": self.request_goodput,
                "text": self.text()}


class CapacityLookup:
    """Capacities measured under the request's SLO by the records that match the request
    (``capacity_lookup``): per recipe (``recipe``) and for a whole selection (``selection``)."""

    def __init__(self, slo: str, found: dict[str, list[tuple[str, object]]]):
        self.slo = slo
        self.found = found  # record name → its accepted entries (recipe id, Entry)

    def recipe(self, recipe_id: str) -> MeasuredCapacity | None:
        """The recipe's measured capacity change: the record with the most repeats, then the first by name."""
        found = [e for name, entries in sorted(self.found.items()) for rid, e in entries
                 if rid == recipe_id and e.measurement.capacity_verdict is not None]
        if not found:
            return None
        entry = min(found, key=lambda e: (-e.measurement.repeats, e.name))
        m = entry.measurement
        with_ = f", together with {', '.join(m.together_with)}" if m.together_with else ""
        return MeasuredCapacity(m.capacity_delta, m.capacity_verdict, self.slo, f"{entry.label}, step {m.step}{with_}")

    def selection(self, ids: list[str]) -> PlanCapacity | None:
        """The capacity of the step that served exactly ``ids``; a step holding a recipe whose entry in its
        record was refused (its patches changed since) is not of these recipes and is not used."""
        found = []
        for name, entries in sorted(self.found.items()):
            record = entries[0][1].record
            refused = set(record.recipes) - {rid for rid, _ in entries}
            for step_id, step in sorted(record.capacity.steps.items()):
                if set(step.recipes) == set(ids) and not refused & set(step.recipes):
                    found.append((-step.repeats, name, step_id, step, entries[0][1]))
        if not found:
            return None
        _, name, step_id, step, entry = min(found, key=lambda f: f[:3])
        return PlanCapacity(step.capacity, step.upper, step.status, self.slo, name, step_id, entry.label,
                            step.repeats, step.output_throughput, step.request_goodput)


def capacity_lookup(records, model_id: str, target_id: str, facts) -> CapacityLookup | None:
    """The capacities measured for this request: only under the throughput goal with an SLO, from records
    that match it as ``measured_lookup``'s do and whose sweep's SLO is the request's in canonical text
    (``optkit.resolve.slo``). None when no record has one (nothing about the plan changes then)."""
    slo = facts["objective.slo"]
    if facts["objective.goal"] != "throughput" or not slo:
        return None
    matches = _record_matches(model_id, target_id, facts)
    found: dict[str, list[tuple[str, object]]] = {}
    for rid, entries in sorted(records.entries.items()):
        for e in entries:
            if e.record.capacity is not None and e.record.capacity.slo == slo and matches(e.record):
                found.setdefault(e.name, []).append((rid, e))
    return CapacityLookup(slo, found) if found else None


def benefit(recipe: RecipeRecord, concurrencies: list[int], mtp: bool, baseline_for, measured=None,
            carry_up: bool = True, capacity: CapacityLookup | None = None, release=None) -> Benefit:
    """Expected benefit of ``recipe`` at each concurrency; ``baseline_for(c)`` gives a Baseline or None,
    ``measured(recipe_id, c)`` a ``Measured`` or None (see ``measured_lookup``). ``carry_up`` false (the
    throughput goal): a gain measured at a lower concurrency is not carried up to this one (it is
    unquantified there); a regression still is. ``capacity`` (the throughput goal, ``capacity_lookup``):
    the recipe's capacity change measured under the request's SLO, which quantifies it. ``release``: the
    vllm-ascend version planned for; a gain whose ``versions`` leave it out does not count (``gains_on``)."""
    result = Benefit(capacity=capacity.recipe(recipe.id) if capacity else None)
    gains, elsewhere = gains_on(recipe, release)
    for c in concurrencies:
        found = measured(recipe.id, c) if measured else None
        if found is not None:
            result.per_concurrency[c] = result.estimate_ms[c] = found.saving_ms
            result.basis[c] = found.basis
            continue
        found_gains, basis = _matching(gains, {"tpot"}, c, mtp)
        values = [(v, g) for g in found_gains if (v := _gain_ms(g, baseline_for(c))) is not None]
        if not values:
            found_gains, basis = _matching(gains, {"host_time"}, c, mtp)
            values = [(v, g) for g in found_gains if (v := _gain_ms(g, None)) is not None]
            basis = "derived from host time per step" if values else basis
        if values:
            # Several numbers for one concurrency (e.g. two stages of one change): the most
            # conservative one counts, so a regression is never hidden by a better number.
            value, gain = min(values, key=lambda pair: pair[0])
            if not carry_up and value > 0 and basis.startswith("extrapolated from"):
                result.per_concurrency[c] = None
                result.basis[c] = f"unquantified under the throughput goal ({basis} only)"
                continue
            result.per_concurrency[c] = value
            result.basis[c] = basis
            result.estimate_ms[c] = 0.0 if gain.scope == "regression-fix" else value
            result.figures[c] = gain
        else:
            result.per_concurrency[c] = None
            result.basis[c] = f"unquantified on vllm-ascend {release} ({elsewhere})" if elsewhere else "unquantified"
    return result


def gains_on(recipe: RecipeRecord, release) -> tuple[list, str]:
    """The recipe's gains that hold on vllm-ascend ``release`` (all when it is None), and where the others were
    measured, in words ('' when none is left out): a number measured against code a later release replaced
    says nothing there."""
    from optkit.catalog.specifiers import contains

    if release is None:
        return list(recipe.gains), ""
    holds = [g for g in recipe.gains if g.versions is None or contains(g.versions, release)]
    others = sorted({g.versions for g in recipe.gains if g not in holds})
    return holds, ("the article's number holds on " + ", ".join(others)) if others else ""
