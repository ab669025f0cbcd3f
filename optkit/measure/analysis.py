"""The numbers of a ladder report: per step × concurrency over repeats, and per recipe the delta its
step made, with a noise estimate and a verdict (one algorithm each, documented here and in docs/measure.md).

Which runs count: a run whose host had another tree digest than the ladder's (the digest most runs
share; on a tie the baseline's) is left out, and so is, per concurrency, a result with failed
requests, no completed request, or another ``max_concurrency`` than the concurrency it is filed
under. Every such exclusion is an issue of the report; nothing excluded is averaged in.

Per cell (step, concurrency): each metric is the mean over the counted repeats of vLLM's value,
with its spread (min … max). The noise of a cell's mean TPOT is the larger of the between-run
standard error (standard deviation of the repeats' means / √repeats, with two or more) and the
within-run standard error (vLLM's per-request TPOT standard deviation / √(completed requests /
concurrency), averaged over repeats: requests that run together share their decode steps, so a run
at concurrency c holds about completed/c independent samples): one run alone cannot show
restart-to-restart variation, and two runs can agree by chance.

Per recipe: delta = mean TPOT with the recipe − without it (negative = faster): step − its
reference in an incremental ladder, the whole plan − the plan without it in a leave-one-out one.
Its noise is √(noise_a² + noise_b²). Verdict: **gain** when delta < −threshold, **regression** when
delta > +threshold, else **no measurable effect**; threshold = max(2 × noise, 0.5% of the
reference's mean TPOT).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from statistics import mean, stdev

from optkit.measure.results import BenchResult, Run

MIN_EFFECT = 0.005
"""The smallest change that counts as one, as a fraction of the reference TPOT."""
Z = 2.0
"""Deltas within Z × noise are no measurable effect (about 95% for a normal noise)."""
SHOWN = ("mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms",
         "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms", "output_throughput")


@dataclass
class Cell:
    """One step at one concurrency: vLLM's numbers over the counted repeats."""

    step: str
    concurrency: int
    results: list[BenchResult] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)

    @property
    def counted(self) -> bool:
        return bool(self.results)

    def values(self, key: str) -> list[float]:
        return [v for r in self.results if (v := getattr(r, key)) is not None]

    def mean(self, key: str) -> float | None:
        values = self.values(key)
        return mean(values) if values else None

    def spread(self, key: str) -> tuple[float, float] | None:
        values = self.values(key)
        return (min(values), max(values)) if values else None

    @property
    def noise(self) -> float:
        """Standard error of the mean TPOT (see the module docstring)."""
        means = self.values("mean_tpot_ms")
        within = mean((r.std_tpot_ms or 0.0) / math.sqrt(max(r.completed / self.concurrency, 1.0)) for r in self.results)
        between = stdev(means) / math.sqrt(len(means)) if len(means) >= 2 else 0.0
        return max(within, between)


@dataclass
class Delta:
    """What one step changed at one concurrency."""

    concurrency: int
    value: float | None = None
    noise: float | None = None
    verdict: str = "unavailable"
    reference_tpot: float | None = None
    why_unavailable: str = ""


def expected_digest(runs: dict[str, list[Run]], baseline: str) -> str | None:
    """The tree digest the ladder ran on: the one most runs share; on a tie the baseline's first run's."""
    digests = Counter(r.host["tree"]["digest"] for rs in runs.values() for r in rs if r.host)
    if not digests:
        return None
    top = max(digests.values())
    tied = sorted(d for d, n in digests.items() if n == top)
    first = next((r.host["tree"]["digest"] for r in runs.get(baseline, []) if r.host), None)
    return first if first in tied else tied[0]


def cells(runs: dict[str, list[Run]], concurrencies: list[int], digest: str | None) -> dict[tuple[str, int], Cell]:
    """Every (step, concurrency) cell with the results that count and why the others do not."""
    out = {}
    for step, step_runs in runs.items():
        for c in concurrencies:
            cell = Cell(step, c)
            for run in step_runs:
                why = _excluded(run, c, digest)
                if why:
                    cell.excluded.append(f"r{run.repeat} c{c}: {why}")
                else:
                    cell.results.append(run.bench[c])
                    cell.repeats.append(run.repeat)
            out[(step, c)] = cell
    return out


def _excluded(run: Run, c: int, digest: str | None) -> str:
    if run.host and digest and run.host["tree"]["digest"] != digest:
        return (f"ran on tree digest {run.host['tree']['digest'][:12]}…, the ladder on {digest[:12]}… "
                "(another vllm-ascend source)")
    result = run.bench.get(c)
    if result is None:
        return f"no c{c}.json"
    if result.failed:
        return f"{result.failed} of {result.failed + result.completed} requests failed"
    if result.completed == 0 or result.mean_tpot_ms is None:
        return "no request completed"
    if result.max_concurrency is not None and result.max_concurrency != c:
        return f"the file is for max_concurrency {result.max_concurrency}, not {c}"
    return ""


def delta(after: Cell, before: Cell) -> Delta:
    """after − before in mean TPOT, with noise and verdict (see the module docstring)."""
    d = Delta(after.concurrency)
    missing = [cell for cell in (after, before) if not cell.counted]
    if missing:
        d.why_unavailable = "; ".join(f"{cell.step} has no counted c{cell.concurrency} result" for cell in missing)
        return d
    a, b = after.mean("mean_tpot_ms"), before.mean("mean_tpot_ms")
    d.value, d.reference_tpot = a - b, b
    d.noise = math.sqrt(after.noise ** 2 + before.noise ** 2)
    threshold = max(Z * d.noise, MIN_EFFECT * b)
    d.verdict = "gain" if d.value < -threshold else "regression" if d.value > threshold else "no-measurable-effect"
    return d


__all__ = ["Cell", "Delta", "cells", "delta", "expected_digest", "SHOWN", "MIN_EFFECT", "Z"]
