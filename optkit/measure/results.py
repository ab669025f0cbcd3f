"""A ladder's results as run-ladder.sh leaves them, read and checked file by file.

Layout: ``results/<step id>/r<N>/`` holds ``c<C>.json`` per concurrency (``vllm bench serve
--save-result``: vLLM 0.23.0's own result JSON, ``result_json`` in ``vllm/benchmarks/serve.py``),
``accuracy.json`` (``optkit.measure.accuracy``), ``host.json`` (``optkit.measure.host``) and the
logs. Of vLLM's JSON only these keys are read: ``completed``, ``failed``, ``max_concurrency``,
``num_prompts``, ``duration``, ``request_throughput``, ``output_throughput`` and the
``mean_/median_/std_/p50_/p90_/p99_`` values of ``ttft``, ``tpot``, ``itl`` and ``e2el`` in ms
(vLLM writes the percentiles it was asked for: bench.sh asks for ttft,tpot,itl,e2el at 50,90,99).
Everything else in the file is vLLM's and is left alone, so unknown keys are not errors here.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

METRICS = ("ttft", "tpot", "itl", "e2el")
_RUN = re.compile(r"^r(\d+)$")


class BenchResult(BaseModel):
    """The keys of one ``vllm bench serve`` result file that the report reads."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    completed: int
    failed: int = 0
    max_concurrency: Optional[int] = None
    num_prompts: int
    duration: float
    request_throughput: float
    output_throughput: float
    mean_ttft_ms: Optional[float] = None
    median_ttft_ms: Optional[float] = None
    std_ttft_ms: Optional[float] = None
    p99_ttft_ms: Optional[float] = None
    mean_tpot_ms: Optional[float] = None
    median_tpot_ms: Optional[float] = None
    std_tpot_ms: Optional[float] = None
    p99_tpot_ms: Optional[float] = None
    mean_itl_ms: Optional[float] = None
    median_itl_ms: Optional[float] = None
    std_itl_ms: Optional[float] = None
    p99_itl_ms: Optional[float] = None
    mean_e2el_ms: Optional[float] = None
    median_e2el_ms: Optional[float] = None
    std_e2el_ms: Optional[float] = None
    p99_e2el_ms: Optional[float] = None


@dataclass
class Run:
    """One repeat of one step: its benchmark results per concurrency, accuracy outputs, host facts."""

    step: str
    repeat: int
    bench: dict[int, BenchResult] = field(default_factory=dict)
    accuracy: dict[str, Any] | None = None
    host: dict[str, Any] | None = None
    files: dict[str, str] = field(default_factory=dict)
    """Result files (relative to results/) and their sha256."""
    problems: list[str] = field(default_factory=list)
    """Files missing or unreadable, in words."""
    sweep: dict[str, Any] | None = None
    """The capacity sweep's ``sweep.json`` (ladders written with --sweep)."""
    probes: dict[int, dict[str, Any]] = field(default_factory=dict)
    """The sweep's probes: vLLM's result JSON per concurrency (``sweep/c<C>.json``)."""


def read_runs(results: Path, step_ids: list[str], concurrencies: list[int],
              sweep: bool = False) -> tuple[dict[str, list[Run]], list[str]]:
    """Every run of every step (by step id, in repeat order) and the entries of ``results`` that are
    not runs of this ladder."""
    runs: dict[str, list[Run]] = {step: [] for step in step_ids}
    strays = []
    for entry in sorted(results.iterdir()) if results.is_dir() else []:
        if entry.name == "failed" and entry.is_dir():
            strays += _unfinished(entry)
            continue
        if entry.name.startswith("."):
            continue
        if entry.name not in runs or not entry.is_dir():
            strays.append(f"results/{entry.name} is not a step of this ladder (ignored)")
            continue
        for run_dir in sorted(entry.iterdir(), key=lambda p: (len(p.name), p.name)):
            match = _RUN.match(run_dir.name)
            if match and run_dir.is_dir():
                runs[entry.name].append(read_run(results, entry.name, int(match.group(1)), concurrencies, sweep))
    return runs, strays


def _unfinished(failed: Path) -> list[str]:
    """The runs whose logs run-ladder.sh kept in results/failed/ and that have no results since."""
    return [f"results/failed/{run.name}: a run that did not finish; its logs (serve.log, bench.log) say why"
            for run in sorted(failed.iterdir()) if run.is_dir() and not _finished(failed.parent, run.name)]


def _finished(results: Path, name: str) -> bool:
    step, _, repeat = name.rpartition("-")
    return bool(step) and (results / step / repeat).is_dir()


def read_run(results: Path, step: str, repeat: int, concurrencies: list[int], sweep: bool = False) -> Run:
    run = Run(step, repeat)
    base = results / step / f"r{repeat}"
    for c in concurrencies:
        data = _read_json(run, base / f"c{c}.json", results)
        if data is None:
            continue
        try:
            run.bench[c] = BenchResult.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            run.problems.append(f"c{c}.json is not a vllm bench serve result: {'.'.join(map(str, first['loc']))}: "
                                f"{first['msg']}")
    run.accuracy = _read_json(run, base / "accuracy.json", results)
    run.host = _read_json(run, base / "host.json", results)
    if sweep:
        read_sweep(run, base, results)
    return run


def read_sweep(run: Run, base: Path, results: Path) -> None:
    """The capacity sweep of a run: sweep.json and every probe it names (``optkit.measure.sweep``)."""
    run.sweep = _read_json(run, base / "sweep.json", results)
    if not isinstance(run.sweep, dict):
        run.sweep = None
        return
    for probe in run.sweep.get("probes", []):
        if probe.get("file"):
            data = _read_json(run, base / probe["file"], results)
            if isinstance(data, dict):
                run.probes[int(probe["concurrency"])] = data


def _read_json(run: Run, path: Path, results: Path) -> Any:
    rel = path.relative_to(results).as_posix()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        run.problems.append(f"{path.name} is missing")
        return None
    run.files[rel] = hashlib.sha256(raw).hexdigest()
    try:
        return json.loads(raw)
    except ValueError as exc:
        run.problems.append(f"{path.name} is not JSON: {exc}")
        return None


__all__ = ["BenchResult", "Run", "read_runs", "METRICS"]
