"""Capacity per step from the capacity sweep's probes, and per recipe the capacity its step gained.

The report does not take ``sweep.json``'s word for it: each probe's vLLM result (``sweep/c<C>.json``)
is checked against the SLO again (``optkit.measure.sweep.violations``, the ladder's bounds), and
a run's bracket is recomputed: ``pass`` = the highest probe that met the SLO below the lowest that
missed it (``fail``). Where that disagrees with what the sweep wrote, or a probe met the SLO above
one that missed it (load and latency not monotone near the knee), the report says so.

Over repeats, a step's capacity is the smallest of its runs' (``pass``) and its upper bound the
largest of their ``fail`` (the brackets' union: what every run supports). A run whose server died
gives its highest met load as the capacity and the load it died at as the upper bound; a step where
the lowest probe missed has capacity 0. A probe above the step's scheduler slots (``--max-num-seqs`` ×
DP, ladder.json ``steps[].scheduler``) is a miss: requests queue there (``optkit.measure.sweep_fit``);
a met probe whose p99 TTFT exceeds a median request's whole latency (measured queueing) is an issue.

Per recipe (as TPOT, ``optkit.measure.analysis.delta``): Δ capacity = capacity with the recipe −
without it. The uncertainty is the brackets: **gain** when the step with the recipe met the SLO at
or above the load where the one without it missed it (``after.capacity ≥ before.upper``),
**regression** when it missed it at or below the load the other met (``after.upper ≤
before.capacity``), else **no measurable effect** (the brackets overlap; a finer
``--sweep-resolution`` or more repeats may separate them). With a step whose server died during its
sweep there is no delta (unavailable, the crash said): its capacity is a lower bound, not a
measurement, and the record leaves that delta out too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import mean
from typing import Any

from optkit.measure.results import Run
from optkit.measure.sweep import violations


@dataclass
class RunCapacity:
    repeat: int
    status: str
    capacity: int
    upper: int | None
    """The lowest load that missed the SLO (or the server died at); None: none did (``at-most-high``)."""
    died_at: int | None = None
    """The load the server died at during the sweep (None: it did not)."""


@dataclass
class StepCapacity:
    step: str
    runs: list[RunCapacity] = field(default_factory=list)
    curve: list[dict[str, Any]] = field(default_factory=list)
    """Per probed concurrency (ascending): means over runs of throughput, goodput and the SLO's statistics."""

    @property
    def measured(self) -> bool:
        return bool(self.runs)

    @property
    def capacity(self) -> int | None:
        return min(r.capacity for r in self.runs) if self.runs else None

    @property
    def upper(self) -> int | None:
        uppers = [r.upper for r in self.runs]
        return None if not uppers or None in uppers else max(uppers)

    @property
    def status(self) -> str:
        statuses = {r.status for r in self.runs}
        for status in ("server-died", "below-lowest", "at-most-high"):
            if status in statuses:
                return status
        return "found" if statuses else "unmeasured"

    @property
    def died_at(self) -> int | None:
        """The lowest load a run's server died at (None: no server died during the sweep)."""
        died = [r.died_at for r in self.runs if r.died_at is not None]
        return min(died) if died else None

    def at_capacity(self) -> dict[str, Any] | None:
        return next((point for point in self.curve if point["concurrency"] == self.capacity), None)


@dataclass
class CapacityDelta:
    value: int | None = None
    verdict: str = "unavailable"
    why_unavailable: str = ""


def step_capacities(settings: dict, runs: dict[str, list[Run]],
                    schedulers: dict[str, dict] | None = None) -> tuple[dict[str, StepCapacity], list[str]]:
    """Every step's capacity from its runs' probes, and the issues found on the way; ``schedulers``: each
    step's scheduler slots (ladder.json ``steps[].scheduler``): a probe above them is a miss (requests queue)."""
    out, issues = {}, []
    for step, step_runs in runs.items():
        cap = StepCapacity(step)
        sched = (schedulers or {}).get(step)
        points: dict[int, list[dict]] = {}
        for run in step_runs:
            if run.sweep is None:
                issues.append(f"{step} r{run.repeat}: no sweep.json (the capacity sweep did not run)")
                continue
            met = {c: not violations(settings, result, sched, c) for c, result in sorted(run.probes.items())}
            issues += [f"{step} r{run.repeat}: {why}" for c, ok in met.items() if ok
                       for why in [queued_while_met(c, run.probes[c])] if why]
            missed = [c for c, ok in met.items() if not ok]
            fail = min(missed) if missed else None
            below = [c for c, ok in met.items() if ok and (fail is None or c < fail)]
            above = [c for c, ok in met.items() if ok and fail is not None and c > fail]
            if above:
                issues.append(f"{step} r{run.repeat}: the sweep met the SLO at c{above[0]} above c{fail}, where it "
                              "missed it (not monotone near the knee); the capacity is the load below the first miss")
            died = run.sweep.get("died_at")
            upper = fail if died is None else (died if fail is None else min(fail, died))
            status = ("server-died" if died is not None else "below-lowest" if not below and fail is not None
                      else "at-most-high" if fail is None else "found")
            if not below and fail is None and died is None:
                issues.append(f"{step} r{run.repeat}: the sweep has no probe results")
                continue
            rc = RunCapacity(run.repeat, status, max(below) if below else 0, upper, died)
            if (rc.status, rc.capacity) != (run.sweep.get("status"), run.sweep.get("capacity")):
                issues.append(f"{step} r{run.repeat}: sweep.json says {run.sweep.get('status')} c{run.sweep.get('capacity')}, "
                              f"its probes say {rc.status} c{rc.capacity} (the report uses the probes)")
            if died is not None:
                issues.append(f"{step} r{run.repeat}: the server died during the capacity sweep at c{died}; the capacity "
                              f"c{rc.capacity} is the highest load that met the SLO before (see its serve.log)")
            cap.runs.append(rc)
            for c, result in run.probes.items():
                points.setdefault(c, []).append(result)
        cap.curve = [_point(settings, c, results, sched) for c, results in sorted(points.items())]
        out[step] = cap
    return out, issues


def queued_while_met(c: int, result: dict) -> str | None:
    """Measured queueing at a probe that met the SLO: its p99 TTFT exceeds a median request's whole latency
    (a request waited longer than a typical one takes from start to end: a queue, which an SLO without a
    TTFT bound does not see), or None."""
    ttft, e2el = result.get("p99_ttft_ms"), result.get("median_e2el_ms")
    if not isinstance(ttft, (int, float)) or not isinstance(e2el, (int, float)) or ttft <= e2el:
        return None
    return (f"c{c} met the SLO while requests queued: its p99 TTFT {ttft:.0f} ms exceeds a median request's whole "
            f"latency {e2el:.0f} ms; the capacity above this load is the queue's, not the server's")


def _point(settings: dict, c: int, results: list[dict], sched: dict | None = None) -> dict[str, Any]:
    def avg(key: str) -> float | None:
        values = [r[key] for r in results if isinstance(r.get(key), (int, float))]
        return mean(values) if values else None

    return {"concurrency": c, "runs": len(results), "met": all(not violations(settings, r, sched, c) for r in results),
            "output_throughput": avg("output_throughput"), "request_throughput": avg("request_throughput"),
            "request_goodput": avg("request_goodput"),
            **{b["key"]: avg(b["key"]) for b in settings["bounds"]}}


def capacity_delta(after: StepCapacity | None, before: StepCapacity | None) -> CapacityDelta:
    """Capacity with − without, with its verdict from the brackets (see the module docstring)."""
    missing = [s for s, cap in (("with", after), ("without", before)) if cap is None or not cap.measured]
    if missing:
        return CapacityDelta(why_unavailable=f"the step {' and '.join(missing)} the recipe has no capacity sweep")
    died = [cap for cap in (after, before) if cap.status == "server-died"]
    if died:  # a dead server's last met load bounds its capacity; a difference with it is no measurement
        return CapacityDelta(why_unavailable="; ".join(
            f"the server of {cap.step} died during the capacity sweep (at c{cap.died_at}), so its c{cap.capacity} "
            "is only a lower bound" for cap in died))
    d = CapacityDelta(after.capacity - before.capacity)
    if before.upper is not None and after.capacity >= before.upper:
        d.verdict = "gain"
    elif after.upper is not None and after.upper <= before.capacity:
        d.verdict = "regression"
    else:
        d.verdict = "no-measurable-effect"
    return d


__all__ = ["StepCapacity", "RunCapacity", "CapacityDelta", "step_capacities", "capacity_delta", "queued_while_met"]
