"""The capacity sweep: per ladder step, the highest concurrency at which ``vllm bench serve`` meets the SLO.

``optkit ladder --sweep --slo TEXT`` writes the sweep's settings into ``ladder.json`` (``sweep``:
``sweep_settings``); ``run-ladder.sh`` then runs ``optkit measure sweep`` on the NPU host against
each step's running server, after the step's fixed-concurrency benchmark and its accuracy prompts
(one server start per step: the sweep reuses it). The search runs there, not in ``optkit ladder``.

The search (``Search``), over ``--max-concurrency`` of ``vllm bench serve`` with the ladder's
workload (random dataset, its input/output lengths and sampling flags):

1. **Bracketing**: probe ``low`` (default 1), then double (``low``, 2·low, 4·low, …, capped at
   ``high``, default 256) until a probe misses the SLO or ``high`` meets it.
2. **Bisection** between the highest probe that met it (``pass``) and the lowest that missed it
   (``fail``): probe ``(pass + fail) // 2`` until ``fail − pass ≤ max(1, resolution × pass)``
   (``resolution`` default 0.1: capacity to within 10%; 0: to the exact concurrency).

A probe meets the SLO when every bound holds on vLLM's result JSON (``optkit.resolve.slo.Slo``:
``p99_tpot_ms`` ≤ 20 …) and no request failed (a failed request is not served within any bound).
The capacity is ``pass`` with the bracket ``[pass, fail)``: the true capacity lies in it, so a step
is known to within its bracket. Outcomes (``status``): ``found``; ``below-lowest`` (``low`` already
misses: capacity 0, reported as such); ``at-most-high`` (``high`` meets it: capacity ≥ high, raise
``--sweep-max``); ``server-died`` (``/health`` stopped answering after a probe: the capacity is the
highest load that met the SLO before, an upper bound is the load it died at, and the report says so).
A client that fails without a result while the server is up is no measurement: the sweep stops
with an error (``client-failed`` in sweep.json) rather than call that load a miss.
The search assumes meeting the SLO is monotone in load (latency grows with load); every probe is
kept, so a report can show where measurements near the knee disagree.

Cost, in probes: at most ``1 + ⌈log2(high/low)⌉`` to bracket and ``⌈log2((fail − pass)/gap)⌉`` to
bisect (1…256 at 10%: at most 9 + 4). A probe sends ``max(prompts_per_concurrency × c,
min_prompts)`` requests after ``warmups × c`` warm-ups, so it lasts about ``prompts_per_concurrency``
request latencies (E2E) whatever its concurrency, plus the client's start.

Every probe's vLLM result is kept as ``sweep/c<C>.json`` (``--goodput`` set from the SLO, so vLLM
reports ``request_goodput``) and the search as ``sweep.json`` (``capacity``, ``upper`` and ``bracket``,
its half-open text ``[12, 13)`` as the log and the report write it, ``bracket_text``). With ``--step``
the step's scheduler slots (``optkit.measure.sweep_fit``) make a probe above them a miss: requests queue. The client: vLLM's benchmark
(``vllm.benchmarks.serve``) called in this process when this Python imports it (one import for the
whole sweep: the client's start-up is ~15 s on a small host), else the ``vllm bench serve``
command per probe; the same argv either way.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from optkit.measure import MeasureError

SWEEP_VERSION = 2
SWEEP_NAME = "sweep.json"
PROBES_DIR = "sweep"
DEFAULT_LOW, DEFAULT_HIGH, DEFAULT_RESOLUTION = 1, 256, 0.1
READY_TIMEOUT_S = 60
"""How long each probe's client waits for the endpoint (vLLM's default is 600 s, too long for a dead server)."""


@dataclass
class Probe:
    concurrency: int
    met: bool
    violations: list[str]
    file: str | None
    result: dict[str, Any] = field(default_factory=dict)

    def data(self) -> dict[str, Any]:
        keys = ("completed", "failed", "num_prompts", "output_throughput", "request_throughput", "request_goodput")
        return {"concurrency": self.concurrency, "met": self.met, "violations": self.violations, "file": self.file,
                **{k: self.result.get(k) for k in keys}}


class Search:
    """Bracketing then bisection on concurrency (see the module docstring); feed it with ``record``."""

    def __init__(self, low: int = DEFAULT_LOW, high: int = DEFAULT_HIGH, resolution: float = DEFAULT_RESOLUTION):
        if not 1 <= low <= high:
            raise MeasureError(f"sweep: the lowest probe {low} must be at least 1 and at most the highest {high}")
        if resolution < 0:
            raise MeasureError(f"sweep: resolution {resolution} must be 0 (exact) or a positive fraction")
        self.low, self.high, self.resolution = low, high, resolution
        self.probes: list[Probe] = []
        self.died_at: int | None = None

    @property
    def passed(self) -> int | None:
        met = [p.concurrency for p in self.probes if p.met]
        return max(met) if met else None

    @property
    def failed(self) -> int | None:
        missed = [p.concurrency for p in self.probes if not p.met]
        return min(missed) if missed else None

    def gap(self, passed: int) -> int:
        return max(1, math.floor(self.resolution * passed))

    def next(self) -> int | None:
        """The next concurrency to probe, or None when the search is over."""
        if self.died_at is not None:
            return None
        if not self.probes:
            return self.low
        passed, failed = self.passed, self.failed
        if passed is None:
            return None  # the lowest probe missed
        if failed is None:
            return None if passed >= self.high else min(self.high, passed * 2)
        if failed - passed <= self.gap(passed):
            return None
        return (passed + failed) // 2

    def record(self, probe: Probe) -> None:
        self.probes.append(probe)

    @property
    def status(self) -> str:
        if self.died_at is not None:
            return "server-died"
        if self.passed is None:
            return "below-lowest"
        if self.failed is None:
            return "at-most-high"
        return "found"

    def outcome(self) -> dict[str, Any]:
        passed = self.passed
        upper = self.died_at if self.died_at is not None else self.failed
        upper = upper if self.status != "below-lowest" else self.low
        return {"status": self.status, "capacity": passed or 0, "upper": upper,
                "bracket": bracket_text(passed or 0, upper)}


def bracket_text(capacity: int, upper: int | None) -> str:
    """A capacity's bracket in the one notation of the sweep log, sweep.json and the report: half-open
    ``[met, missed)``, ``[met, —)`` when no probe missed (the capacity is at least the highest probe)."""
    return f"[{capacity}, {'—' if upper is None else upper})"


def max_probes(low: int, high: int, resolution: float) -> int:
    """The most probes a search over ``low…high`` makes (bracketing, then bisection of the last doubling)."""
    doublings = math.ceil(math.log2(high / low)) if high > low else 0
    passed = max(low, high // 2)  # the widest last bracket: [high/2, high)
    bracket = max(high - passed, 1)
    gap = max(1, math.floor(resolution * passed))
    return 1 + doublings + max(0, math.ceil(math.log2(bracket / gap)))


def sweep_settings(slo, *, low: int = DEFAULT_LOW, high: int = DEFAULT_HIGH, resolution: float = DEFAULT_RESOLUTION,
                   prompts_per_concurrency: int, min_prompts: int, warmups: int, client_args: list[str]) -> dict[str, Any]:
    """ladder.json's ``sweep``: what ``optkit measure sweep`` on the host needs, the SLO already checked."""
    Search(low, high, resolution)  # the range is checked here, when the ladder is written
    percentiles = sorted({*slo.percentiles(), "50", "90", "99"}, key=float)
    return {"sweep_version": SWEEP_VERSION, "variable": "concurrency", "slo": slo.text(),
            "bounds": [{"key": b.result_key, "limit_ms": b.limit_ms, "text": b.text()} for b in slo.bounds],
            "goodput": slo.goodput_args(), "percentiles": percentiles, "low": low, "high": high,
            "resolution": resolution, "prompts_per_concurrency": prompts_per_concurrency, "min_prompts": min_prompts,
            "warmups": warmups, "client_args": client_args}


def probe_argv(settings: dict, concurrency: int, *, model: str, served_name: str, host: str, port: int,
               out_dir: Path) -> list[str]:
    """The ``vllm bench serve`` arguments (after ``bench serve``) of one probe."""
    prompts = max(settings["prompts_per_concurrency"] * concurrency, settings["min_prompts"])
    argv = ["--backend", "vllm", "--model", model, "--served-model-name", served_name, "--host", host,
            "--port", str(port), *settings["client_args"], "--max-concurrency", str(concurrency),
            "--num-prompts", str(prompts), "--num-warmups", str(settings["warmups"] * concurrency),
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", ",".join(settings["percentiles"]),
            "--ready-check-timeout-sec", str(READY_TIMEOUT_S), "--save-result", "--result-dir", str(out_dir),
            "--result-filename", f"c{concurrency}.json"]
    if settings["goodput"]:
        argv += ["--goodput", *settings["goodput"]]
    return argv


def violations(settings: dict, result: dict[str, Any], scheduler: dict | None = None,
               concurrency: int | None = None) -> list[str]:
    """What a probe's result misses: a load above the step's scheduler slots (``scheduler``: ladder.json's
    ``steps[].scheduler``; requests queue there, ``optkit.measure.sweep_fit``), failed requests, then
    ``Slo.violations`` of ladder.json's SLO."""
    from optkit.measure.sweep_fit import queue_violation

    queued = queue_violation(concurrency or int(result.get("max_concurrency") or 0), scheduler)
    out = [queued] if queued else []
    if result.get("failed"):
        out.append(f"{result['failed']} of {result['failed'] + result.get('completed', 0)} requests failed")
    if not result.get("completed"):
        out.append("no request completed")
    return out + _slo(settings["slo"]).violations(result)


@lru_cache(maxsize=16)
def _slo(text: str):
    """ladder.json's canonical SLO text, parsed once per run (``sweep_settings`` wrote it from a parsed SLO)."""
    from optkit.resolve.slo import parse_slo

    return parse_slo(text, "ladder.json: sweep.slo")


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/health", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def in_process_client() -> Callable[[list[str]], None] | None:
    """vLLM's benchmark client as a function of its argv, when this Python imports it (else None)."""
    try:
        import argparse

        from vllm.benchmarks.serve import add_cli_args, main
    except Exception:  # noqa: BLE001 - any import failure means: use the command instead
        return None

    def run(argv: list[str]) -> None:
        parser = argparse.ArgumentParser(prog="vllm bench serve")
        add_cli_args(parser)
        main(parser.parse_args(argv))

    return run


def command_client(vllm: str = "vllm") -> Callable[[list[str]], None]:
    def run(argv: list[str]) -> None:
        proc = subprocess.run([vllm, "bench", "serve", *argv])
        if proc.returncode != 0:
            raise RuntimeError(f"vllm bench serve exited {proc.returncode}")

    return run


def _write(out_dir: Path, settings: dict, search: Search, client_name: str, started: float,
           status: str | None = None, scheduler: dict | None = None, stopped: str | None = None) -> dict[str, Any]:
    outcome = search.outcome()
    if status:
        outcome["status"] = status
    if stopped:
        outcome["stopped"] = stopped
    data = {"sweep_version": SWEEP_VERSION, "variable": "concurrency", "slo": settings["slo"], **outcome,
            **({"scheduler": scheduler} if scheduler else {}),
            "died_at": search.died_at, "low": search.low, "high": search.high, "resolution": search.resolution,
            "client": client_name, "seconds": round(time.monotonic() - started, 1),
            "probes": [p.data() for p in search.probes]}
    (Path(out_dir) / SWEEP_NAME).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return data


def run_sweep(settings: dict, *, model: str, served_name: str, host: str, port: int, out_dir: Path,
              client: Callable[[list[str]], None], client_name: str, scheduler: dict | None = None,
              log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
              stop: Callable[[Search], str | None] | None = None) -> dict[str, Any]:
    """Run the search against the server at host:port; write ``out_dir/sweep/c<C>.json`` and ``out_dir/sweep.json``.
    ``scheduler``: the step's scheduler slots (a probe above them is a miss: requests queue there). ``stop``: asked
    after every probe; a reason ends the search there (status ``stopped-early``, the reason in ``stopped``:
    ``optkit tune`` stops a trial that can no longer beat the best one)."""
    base_url = f"http://{host}:{port}"
    search = Search(settings["low"], settings["high"], settings["resolution"])
    _slo(settings["slo"])  # a hand-edited SLO is refused before the first probe, not at its verdict
    probes_dir = Path(out_dir) / PROBES_DIR
    probes_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    while (c := search.next()) is not None:
        if not _healthy(base_url):
            search.died_at = c
            log(f"sweep: the server does not answer /health before the c{c} probe: it died; stopping the sweep")
            break
        log(f"sweep: probe c{c}")
        path = probes_dir / f"c{c}.json"
        path.unlink(missing_ok=True)
        error = ""
        try:
            client(probe_argv(settings, c, model=model, served_name=served_name, host=host, port=port, out_dir=probes_dir))
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a client failure is a probe that did not meet the SLO
            error = f"the benchmark client failed: {exc}"
        result = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        missed = violations(settings, result, scheduler, c) if result else [error or "the client wrote no result"]
        if missed and not _healthy(base_url):
            search.died_at = c
            log(f"sweep: the server stopped answering /health during the c{c} probe: it died; stopping the sweep")
            break
        if not result:  # the server is up and the client failed: no measurement, not a load the SLO missed
            _write(out_dir, settings, search, client_name, started, status="client-failed", scheduler=scheduler)
            raise MeasureError(f"sweep: the benchmark client failed at c{c} without a result while the server was up "
                               f"({missed[0]}); its output above says why (a flag this vLLM does not take?)")
        search.record(Probe(c, not missed, missed, f"{PROBES_DIR}/c{c}.json" if result else None, result))
        log(f"sweep: c{c} " + ("meets the SLO" if not missed else "misses it: " + "; ".join(missed)))
        if stop is not None and search.next() is not None and (why := stop(search)):
            data = _write(out_dir, settings, search, client_name, started, status="stopped-early", scheduler=scheduler,
                          stopped=why)
            log(f"sweep: stopped early after {len(search.probes)} probes: {why}")
            return data
    data = _write(out_dir, settings, search, client_name, started, scheduler=scheduler)
    outcome = search.outcome()
    died = f", the server died at c{search.died_at}: the capacity is a lower bound" if search.died_at is not None else ""
    log(f"sweep: {outcome['status']}: capacity c{outcome['capacity']} (bracket {outcome['bracket']}{died}) "
        f"in {len(search.probes)} probes, {data['seconds']}s")
    return data


__all__ = ["Search", "Probe", "bracket_text", "sweep_settings", "probe_argv", "violations", "run_sweep", "in_process_client",
           "command_client", "SWEEP_NAME", "PROBES_DIR"]
