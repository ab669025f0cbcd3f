"""How long a ladder runs: an estimate with its basis (ladder.json ``duration``).

A run's requests are served in waves of ``c`` concurrent requests, each about one request latency,
``output_len × TPOT`` (TTFT not counted): per benchmark concurrency ⌈requests / c⌉ waves plus the
warm-up waves (``warmups`` per slot: one wave each); the accuracy prompts one at a time
(``prompts × max_tokens × TPOT``); with ``--sweep``, up to ``max_probes`` probes of
⌈max(prompts_per_concurrency × c, min_prompts) / c⌉ + warmups waves each (counted at the sweep's
lowest probe, where that is the most). TPOT is the plan's baseline estimate at the lowest
concurrency that has one (ladder.json ``estimate``), else an assumed ``ASSUMED_TPOT_MS`` said so;
loaded requests decode slower, so the figure is a lower bound. Not counted, and said: server starts
(minutes each on an NPU, tens of minutes with static-kernel compiles), kernel rebuilds (tens of
minutes each), the benchmark client's start per run, TTFT.
"""

from __future__ import annotations

import math
from typing import Any

ASSUMED_TPOT_MS = 20.0
"""TPOT assumed when the plan has no estimate for any of its concurrencies (said in the basis)."""


def _tpot(data: dict) -> tuple[float, int | None, str]:
    """TPOT per token, the concurrency of the plan's estimate it is (None: assumed), and the basis as text."""
    known = [e for e in data.get("estimate", []) if e.get("baseline_tpot_ms")]
    if not known:
        return ASSUMED_TPOT_MS, None, f"an assumed {ASSUMED_TPOT_MS:g} ms per token (the plan estimates no TPOT here)"
    first = min(known, key=lambda e: e["concurrency"])
    return float(first["baseline_tpot_ms"]), first["concurrency"], (
        f"{first['baseline_tpot_ms']:g} ms per token, the plan's c{first['concurrency']} baseline estimate, at every load")


def _waves(requests: int, c: int, warmups: int) -> int:
    return math.ceil(requests / c) + warmups


def ladder_duration(data: dict) -> dict[str, Any]:
    """ladder.json's ``duration``: seconds of requests per run and in all, with the basis as text."""
    w, bench = data["workload"], data.get("bench", {})
    warmups = bench.get("warmups_per_concurrency", 1)
    tpot_ms, tpot_at, basis = _tpot(data)
    latency_s = w["output_len"] * tpot_ms / 1000.0
    bench_s = sum(_waves(n, int(c), warmups) for c, n in w["num_prompts"].items()) * latency_s
    acc = data["accuracy"]
    accuracy_s = acc["prompts_count"] * acc["max_tokens"] * tpot_ms / 1000.0
    sweep_s = 0.0
    if "sweep" in data:
        s = data["sweep"]
        per_probe = max(_waves(max(s["prompts_per_concurrency"] * c, s["min_prompts"]), c, s["warmups"])
                        for c in (s["low"], s["high"]))
        sweep_s = s["max_probes"] * per_probe * latency_s
    runs, cost = data["cost"]["server_starts"], data["cost"]
    per_run = bench_s + accuracy_s + sweep_s
    total = runs * per_run
    parts = f"benchmark {_human(bench_s)}, accuracy {_human(accuracy_s)}" + (f", sweep up to {_human(sweep_s)}" if sweep_s else "")
    text = (f"Duration: at least {_human(total)} of requests ({_count(runs, 'run')} × {_human(per_run)}: {parts}), at {basis} "
            f"({w['output_len']} tokens a request, TTFT and the slower decode under load not counted); on top: "
            f"{_count(runs, 'server start')} (minutes each on an NPU, tens of minutes with static-kernel compiles)"
            + (f", {_count(cost['kernel_rebuilds'], 'kernel rebuild')} (tens of minutes each)" if cost["kernel_rebuilds"] else "")
            + " and the benchmark client's start per run")
    return {"request_seconds": round(total), "per_run_seconds": {"benchmark": round(bench_s), "accuracy": round(accuracy_s),
                                                                 "sweep": round(sweep_s)},
            "runs": runs, "tpot_ms": tpot_ms, "tpot_estimate_at": tpot_at, "basis": basis, "text": text,
            "short": {"total": _human(total).replace(" ", ""), "per_run": _human(per_run).replace(" ", "")}}


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _human(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"


__all__ = ["ladder_duration", "ASSUMED_TPOT_MS"]
