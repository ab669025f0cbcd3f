"""Simulated servers for ``optkit tune``: landscapes where latency depends on the knobs, each with a known optimum.

A landscape is a real request (a real model on a real target, so every point goes through the real resolver)
and a deterministic, pure-Python cost model of the server its point would start. No HTTP: the
``LandscapeExecutor`` runs the real ``optkit.measure.sweep.Search`` over concurrency, checks each synthetic
probe with the sweep's own ``violations`` (the SLO, and a probe above the scheduler slots is a miss:
``optkit.measure.sweep_fit.queue_violation``), asks the tune's ``stop_rule`` after every probe as
``run_sweep`` does, writes ``sweep.json`` and ``sweep/c<C>.json`` as ``run_sweep`` does, and reads its
``Outcome`` back with the study's own ``outcome_from_sweep``.

The model, per DP engine (``Costs`` holds each landscape's constants; all times in ms):

- a decode step reads the weights (``weight_ms / TP^0.85``), pays TP's communication
  (``comm_ms × log2 TP``, 30 % less with FlashComm1) and DP's synchronisation (``1 + dp_sync × log2 DP``),
  and ``row_ms / TP^0.9`` per decode row; the engine decodes ⌈c / DP⌉ requests × (1 + k) rows;
- **capture range**: a decode batch above the captured rows (capture-up-to × (1 + k)) runs eager:
  the step costs ``eager_factor`` × and ``eager_ms`` more;
- **MTP k**: each of the k draft tokens costs ``draft_ms``, a step yields (1 − a^(k+1)) / (1 − a) tokens
  (a = ``accept``): a best k;
- **batched tokens**: a step carries a prefill chunk of up to max-num-batched-tokens tokens
  (``prefill_ms`` per token ÷ TP), which p99 TPOT sees; TTFT waits ⌈(queued prompts × input) / chunk⌉ steps,
  so a larger chunk gives a better TTFT and a worse TPOT;
- **max-num-seqs**: above max-num-seqs × DP requests queue: the probe is a miss (the sweep's rule);
- **memory**: per device, free = ``hbm_gib`` − weights (split over TP, and over TP × DP for an MoE's experts);
  the start needs KV for max-num-seqs × (1 + k) sequences, graphs for the captured rows and activations for
  the chunk. Beyond the free memory the start fails (``failed-start``, an out-of-memory log line).

Noise: the reported throughput carries ±``noise`` (and latency a ±2 % offset per launch), seeded from what the
model reads (the knobs but the scheduler sizes, the concurrency, eager or not), not from the launch key, so the
brute force needs no resolve per point; two launches differing only in scheduler sizes that run the same
probe measure alike. Latency stays monotone in the load, so whether a probe meets the SLO is a threshold in c.

The known optimum (``optimum``), by brute force over every valid point of the space, exactly as the executor
would measure it: per categorical point (layout, speculative, flashcomm1, prefix-caching, batched tokens) the
probe tables for c = 1 … high with graphs and eager (``Tables``: the highest c meeting the SLO each way, G and E,
asserted to be thresholds); a point's SLO-threshold is then T = min(max-num-seqs × DP, max(E, min(capture × DP,
G))), the real ``Search`` run on the threshold T gives its capacity (``search_capacity``, one Search per T), and
numpy evaluates every (max-num-seqs, capture-up-to) pair of the space at once. Validity: the categorical
point is planned by ``resolve_point`` (cached); of the integer knobs the resolver refuses only batched tokens
below max-num-seqs, masked here; the optimum itself is re-resolved, and ``tests/tune/test_search_quality.py``
checks the shortcut against ``resolve_point`` on sampled points.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from optkit.measure.sweep import PROBES_DIR, Probe, Search, _write, violations
from optkit.measure.sweep_fit import scheduler
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request
from optkit.tune.candidate import Candidate, effective_params, resolve_point
from optkit.tune.space import Space, build_space, parse_layout
from optkit.tune.study import Outcome, outcome_from_sweep, stop_rule

RESOLUTION = 0.0  # exact capacity: at the default 10 %, which point the bisection lands near decides ±10 % and the optimum is luck
START_SECONDS = 300.0  # a server start, for Outcome.seconds


@dataclass(frozen=True)
class Costs:
    """One landscape's constants (module docstring)."""

    weight_ms: float = 14.0
    comm_ms: float = 1.2
    dp_sync: float = 0.04
    row_ms: float = 0.3
    eager_factor: float = 1.35
    eager_ms: float = 3.0
    accept: float = 0.7
    draft_ms: float = 0.8
    prefill_ms: float = 0.004
    input_len: int = 1024
    output_len: int = 512
    hbm_gib: float = 58.0
    weights_gib: float = 66.0
    moe: bool = True
    kv_gib_per_seq: float = 0.06
    graph_gib_per_row: float = 0.02
    act_gib_per_token: float = 0.0004
    noise: float = 0.01


@dataclass(frozen=True)
class Landscape:
    name: str
    given: dict
    costs: Costs
    high: int = 256
    fix: dict = field(default_factory=dict)
    ranges: dict = field(default_factory=dict)
    choices: dict = field(default_factory=dict)

    @cached_property
    def workspace(self):
        return load_workspace()

    @cached_property
    def base(self):
        return plan(parse_request(self.given), self.workspace)

    @cached_property
    def space(self) -> Space:
        return build_space(self.base, self.given, high=self.high, fix=self.fix, ranges=self.ranges, choices=self.choices)

    @property
    def dies(self) -> int:
        return self.base.target.dies_per_card or 1

    def settings(self, budget: int, seed: int) -> dict:
        return {"space": self.space.data(), "request": self.given, "budget": budget, "seed": seed}

    @property
    def sweep(self) -> dict:
        return {"slo": self.given["slo"], "low": 1, "high": self.high, "resolution": RESOLUTION}

    # -- the model ------------------------------------------------------------------------------------------

    def oom(self, params: dict) -> str | None:
        """The out-of-memory line of a start that fails (None when it starts). ``params``: effective."""
        c = self.costs
        tp, dp = parse_layout(params["layout"])
        k = _k(params["speculative"])
        seqs, capture, tokens = int(params["max-num-seqs"]), int(params["capture-up-to"]), int(params["max-num-batched-tokens"])
        free = c.hbm_gib - c.weights_gib / (tp * dp if c.moe else tp)
        need = (seqs * (1 + k) * c.kv_gib_per_seq / tp + capture * (1 + k) * c.graph_gib_per_row
                + tokens * c.act_gib_per_token / tp)
        if need <= free:
            return None
        return (f"RuntimeError: NPU out of memory. Tried to allocate {need - max(free, 0):.2f} GiB "
                f"({max(free, 0):.2f} GiB free per device after the weights)")

    def probe(self, params: dict, c: int, eager: bool) -> dict[str, Any]:
        """vLLM bench serve's result at concurrency ``c`` (no queueing: the sweep's scheduler rule adds that)."""
        m = self.costs
        tp, dp = parse_layout(params["layout"])
        k = _k(params["speculative"])
        tokens = int(params["max-num-batched-tokens"])
        fc1 = params["flashcomm1"] == "on"
        reqs = math.ceil(c / dp)
        step = (m.weight_ms / tp ** 0.85 + m.comm_ms * math.log2(tp) * (0.7 if fc1 else 1.0)
                + m.row_ms * reqs * (1 + k) / tp ** 0.9 + k * m.draft_ms) * (1 + m.dp_sync * math.log2(dp))
        if eager:
            step = step * m.eager_factor + m.eager_ms
        per_step = (1 - m.accept ** (k + 1)) / (1 - m.accept)
        chunk = min(tokens, reqs * m.input_len)
        chunk_ms = chunk * m.prefill_ms / tp ** 0.9
        offset = 1 + 0.02 * _unit(self.name, "latency", _model_key(params))
        tpot = (step + chunk_ms) / per_step * offset
        queued = max(1.0, reqs * m.input_len / (m.input_len + m.output_len))
        ttft = math.ceil(queued * m.input_len / tokens) * (step + chunk_ms) * offset
        e2e = (ttft + tpot * m.output_len) / 1.1  # mean, from p99
        throughput = c * m.output_len / (e2e / 1000) * (1 + m.noise * _unit(self.name, _model_key(params), c, eager))
        return {"completed": 10 * c, "failed": 0, "max_concurrency": c, "p99_tpot_ms": round(tpot, 3),
                "p99_ttft_ms": round(ttft, 3), "output_throughput": throughput, "request_throughput": throughput
                / m.output_len, "seconds": e2e / 1000 * 10}

    def met(self, result: dict, params: dict, c: int) -> list[str]:
        tp, dp = parse_layout(params["layout"])
        sched = scheduler(["--max-num-seqs", str(int(params["max-num-seqs"])), "--data-parallel-size", str(dp)])
        return violations(self.sweep, result, sched, c)

    # -- the brute force -------------------------------------------------------------------------------------

    @cached_property
    def search_capacity(self) -> list[int]:
        """The real Search's capacity when the SLO holds exactly up to T (index T = 0 … high)."""
        out = []
        for t in range(self.high + 1):
            search = Search(1, self.high, RESOLUTION)
            while (c := search.next()) is not None:
                search.record(Probe(c, c <= t, [], None))
            out.append(search.passed or 0)
        return out

    def tables(self, cat: tuple) -> "Tables":
        cache = self.__dict__.setdefault("_tables", {})
        if cat not in cache:
            cache[cat] = Tables.of(self, dict(zip(CATEGORICAL, cat)))
        return cache[cat]

    def cat_valid(self, cat: tuple) -> bool:
        cache = self.__dict__.setdefault("_valid", {})
        if cat not in cache:
            start = self.space.start()
            params = {**start, **dict(zip(CATEGORICAL, cat))}
            cache[cat] = isinstance(resolve_point(self.given, params, self.workspace), Candidate)
        return cache[cat]

    def valid(self, params: dict) -> bool:
        """The shortcut for the resolver's verdict (module docstring)."""
        p = effective_params(params)
        key = (p["layout"], p["speculative"], p["flashcomm1"], p["prefix-caching"], BASE_TOKENS)
        return self.cat_valid(key) and int(p["max-num-batched-tokens"]) >= int(p["max-num-seqs"])

    def objective(self, params: dict) -> float:
        """What the executor measures for a point (0 when it fails to start or meets no load), without resolving."""
        p = effective_params(params)
        if self.oom(p):
            return 0.0
        t = self.tables(tuple(str(p[n]) for n in CATEGORICAL))
        obj = t.objective(np.array([[int(p["max-num-seqs"])]]), np.array([[int(p["capture-up-to"])]]))
        return float(obj[0, 0])

    @cached_property
    def optimum(self) -> dict:
        """The best measured objective over every valid point, its point, and how many points come within 5 %."""
        began = time.monotonic()
        dims = {d.name: d for d in self.space.dims}
        domain = {n: ([d.start] if d.fixed else list(d.choices) if d.kind == "choice" else None) for n, d in dims.items()}
        seqs_d = dims["max-num-seqs"]
        # every max-num-seqs from 1 to the top, whatever steps the space takes: the optimum is over every launch
        seqs = np.arange(1, max(seqs_d.high, self.high) + 1)[:, None] if not seqs_d.fixed else np.array([[seqs_d.start]])
        # every capture top from 1 to the highest max-num-seqs, whatever the space's capture-share reaches: the
        # optimum is over every launch, not only those the search's parametrization can name
        caps = np.arange(1, int(seqs.max()) + 1)[None, :]
        best: tuple[float, dict] = (-1.0, {})
        per_cat = []
        valid_points = 0
        for cat in itertools.product(*(domain[n] for n in CATEGORICAL)):
            cat = tuple(str(v) for v in cat)
            params = dict(zip(CATEGORICAL, cat))
            if not self.cat_valid((*cat[:4], BASE_TOKENS)):
                continue
            obj = self.tables(cat).objective(seqs, caps, oom=True)
            valid = seqs <= int(params["max-num-batched-tokens"])
            obj = np.where(valid & np.ones_like(caps, dtype=bool), obj, -1.0)
            valid_points += int((obj >= 0).sum())
            per_cat.append(obj)
            i, j = np.unravel_index(int(np.argmax(obj)), obj.shape)
            if obj[i, j] > best[0]:
                best = (float(obj[i, j]), {**params, "max-num-seqs": int(seqs[i, 0]), "capture-up-to": int(caps[0, j])})
        near = sum(int((o >= 0.95 * best[0]).sum()) for o in per_cat)
        point = {**self.space.start(), **best[1]}
        if not isinstance(resolve_point(self.given, point, self.workspace), Candidate):
            raise AssertionError(f"{self.name}: the resolver refuses the brute force's optimum {point}")
        return {"objective": best[0], "params": point, "valid_points": valid_points, "within_5pct": near,
                "seconds": round(time.monotonic() - began, 1)}


CATEGORICAL = ("layout", "speculative", "flashcomm1", "prefix-caching", "max-num-batched-tokens")
BASE_TOKENS = "32768"  # the categorical validity is planned at the largest chunk: batched tokens ≥ max-num-seqs


@dataclass
class Tables:
    """One categorical point's probes for c = 0 … high, with graphs and eager (index 0: no load)."""

    landscape: Landscape
    dp: int
    cards: float
    graph: int  # G: the highest c meeting the SLO with graphs
    eager: int  # E: … eager
    thr_graph: np.ndarray
    thr_eager: np.ndarray
    params: dict

    @classmethod
    def of(cls, land: Landscape, params: dict) -> "Tables":
        tp, dp = parse_layout(params["layout"])
        limits, thr = [], []
        for eager in (False, True):
            ok, row = [], [0.0]
            for c in range(1, land.high + 1):
                result = land.probe(params, c, eager)
                ok.append(not violations(land.sweep, result, None, c))
                row.append(result["output_throughput"])
            limit = sum(1 for _ in itertools.takewhile(bool, ok))
            if any(ok[limit:]):
                raise AssertionError(f"{land.name} {params}: meeting the SLO is not a threshold in c")
            limits.append(limit)
            thr.append(np.array(row))
        if limits[1] > limits[0]:
            raise AssertionError(f"{land.name} {params}: eager meets more load than graphs")
        return cls(land, dp, tp * dp / land.dies, limits[0], limits[1], thr[0], thr[1], params)

    def objective(self, seqs: np.ndarray, caps: np.ndarray, oom: bool = True) -> np.ndarray:
        """The measured objective for every (max-num-seqs, capture-up-to) pair (0: start fails or no load met)."""
        capeff = np.minimum(caps, seqs)
        t = np.minimum(seqs * self.dp, np.maximum(self.eager, np.minimum(capeff * self.dp, self.graph)))
        cap = np.asarray(self.landscape.search_capacity)[np.minimum(t, self.landscape.high)]
        eager = (cap + self.dp - 1) // self.dp > capeff
        obj = np.where(eager, self.thr_eager[cap], self.thr_graph[cap]) / self.cards
        obj = np.where(cap > 0, obj, 0.0)
        if oom:
            obj = np.where(self._fits(seqs, capeff), obj, 0.0)
        return obj

    def _fits(self, seqs: np.ndarray, capeff: np.ndarray) -> np.ndarray:
        c, p = self.landscape.costs, self.params
        tp, dp = parse_layout(p["layout"])
        k = _k(p["speculative"])
        free = c.hbm_gib - c.weights_gib / (tp * dp if c.moe else tp)
        need = (seqs * (1 + k) * c.kv_gib_per_seq / tp + capeff * (1 + k) * c.graph_gib_per_row
                + int(p["max-num-batched-tokens"]) * c.act_gib_per_token / tp)
        return need <= free


def _k(spec: str) -> int:
    return int(spec[4:]) if spec.startswith("mtp:") else 0


def _model_key(params: dict) -> str:
    return json.dumps({n: str(params[n]) for n in ("layout", "speculative", "flashcomm1", "max-num-batched-tokens")},
                      sort_keys=True)


def _unit(*parts) -> float:
    """A deterministic number in [-1, 1] from ``parts``."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 63 - 1.0


class LandscapeExecutor:
    """The ``Executor`` of ``optkit.tune.study`` over a landscape: one simulated start and capacity sweep."""

    name = "landscape"

    def __init__(self, landscape: Landscape):
        self.landscape = landscape
        self.runs: list[tuple[Candidate, Outcome]] = []  # every start, in order

    def run(self, candidate: Candidate, incumbent: float | None, trial_dir: Path) -> Outcome:
        assert isinstance(candidate, Candidate), f"an invalid point reached the executor: {candidate}"
        again = resolve_point(self.landscape.given, candidate.params, self.landscape.workspace)
        assert isinstance(again, Candidate) and again.key == candidate.key, f"not a valid launch: {candidate.params}"
        outcome = measure(self.landscape, candidate.effective, candidate.cards, Path(trial_dir),
                          stop_rule(incumbent, candidate.cards))
        self.runs.append((candidate, outcome))
        return outcome


def measure(land: Landscape, params: dict, cards: float, trial_dir: Path, stop=None) -> Outcome:
    """Start (or fail to) and sweep as ``run_sweep`` does, then the study's ``outcome_from_sweep``."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    seconds = START_SECONDS
    if (line := land.oom(params)):
        return Outcome("failed-start", reason=line, seconds=seconds)
    settings = land.sweep
    _, dp = parse_layout(params["layout"])
    capture = int(params["capture-up-to"])
    search = Search(settings["low"], settings["high"], settings["resolution"])
    probes_dir = trial_dir / PROBES_DIR
    probes_dir.mkdir(exist_ok=True)
    data = None
    while (c := search.next()) is not None:
        result = land.probe(params, c, eager=math.ceil(c / dp) > capture)
        seconds += result["seconds"]
        (probes_dir / f"c{c}.json").write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
        missed = land.met(result, params, c)
        search.record(Probe(c, not missed, missed, f"{PROBES_DIR}/c{c}.json", result))
        if stop is not None and search.next() is not None and (why := stop(search)):
            data = _write(trial_dir, settings, search, "landscape", time.monotonic(), status="stopped-early", stopped=why)
            break
    if data is None:
        data = _write(trial_dir, settings, search, "landscape", time.monotonic())
    return outcome_from_sweep(data, trial_dir, cards, seconds)


LANDSCAPES = (
    Landscape("35B MoE throughput",
              {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4, 8, 256], "goal": "throughput",
               "slo": "tpot_p99<=50ms"},
              Costs(comm_ms=3.0, accept=0.8, draft_ms=0.5)),
    Landscape("latency-tight SLO",
              {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4, 8, 256], "goal": "throughput",
               "slo": "tpot_p99<=25ms,ttft_p99<=1500ms"},
              Costs(comm_ms=0.8, accept=0.8, prefill_ms=0.006)),
    Landscape("OOM-heavy",
              {"model": "qwen3.5-27b", "target": "910b", "concurrency": [1, 8, 128], "goal": "throughput",
               "slo": "tpot_p99<=60ms"},
              Costs(weight_ms=12.0, hbm_gib=57.6, weights_gib=51.0, moe=False, kv_gib_per_seq=0.2,
                    graph_gib_per_row=0.08, act_gib_per_token=0.0008, comm_ms=1.5), high=128),
)

HELD_OUT = (
    # written after the tune's moves were, and run once as written: a check that the moves' order is no fit to
    # the three above (tests/benchmarks/tune_search.py --held-out; docs/tune.md). TP's communication is dear and
    # DP's synchronisation cheap, MTP's acceptance low: the opposite leanings of "35B MoE throughput".
    Landscape("held-out: DP-leaning dense",
              {"model": "qwen3.6-27b", "target": "910c", "concurrency": [1, 16, 64], "goal": "throughput",
               "slo": "tpot_p99<=35ms,ttft_p99<=3000ms"},
              Costs(weight_ms=10.0, comm_ms=4.0, dp_sync=0.01, row_ms=0.25, accept=0.6, draft_ms=1.0,
                    prefill_ms=0.003, weights_gib=54.0, moe=False, kv_gib_per_seq=0.12), high=128),
)


def landscape(name: str) -> Landscape:
    return next(land for land in LANDSCAPES + HELD_OUT if land.name == name)
