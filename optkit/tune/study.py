"""The search: optkit's moves, then Optuna's sampler, over the tune's space, one server start per measured trial.

``run_tune(tune_dir, executor, …)`` opens (or resumes) the study in ``tune_dir`` and runs trials until the
budget of server starts (``--budget``, counted over the whole study, every worker) or the time
(``--hours``, this run's) is spent:

1. the first trial is the rule-based plan (enqueued when the study is new);
2. the next point is ``optkit.tune.local``'s next move (sizing a point's scheduler, then one knob at a time
   from the best; off with ``moves`` false), else Optuna's sampler's; ``optkit.tune.candidate`` plans it.
   A point the resolver refuses is an **invalid** trial: told at once (objective 0, constraint violated, the
   reason in ``invalid``), never started, not counted against the budget;
3. a point whose launch equals one already measured (the same launch key) reuses that measurement:
   no start;
4. else the executor starts it and measures its capacity under the SLO by the sweep, which stops early
   once the trial cannot beat the best so far (``stop_rule``). A start that fails (out of memory, a refusal
   in the log, no ``/health``) is an **infeasible** trial with the log line, not a crash of the search.

The objective is output tokens per second per NPU card at the capacity (the highest concurrency that meets
the SLO): the sweep's capacity probe's ``output_throughput`` ÷ cards (TP × DP ÷ dies per card). With
``--pareto`` the study has two objectives, that throughput (maximized) and the capacity probe's p99 TPOT
(minimized). Infeasible and invalid trials carry the constraint ``valid`` = 1 (``Trial.set_constraint``, which
the samplers read), so the sampler learns where the refusals are.

Resume: trials are in Optuna's storage (``study.db``, SQLite, by default; ``study.journal`` with
``--storage journal``, for a shared volume). A run that was killed leaves its running trial RUNNING; the next
run of the same worker marks it failed and enqueues its point again, so a SIGKILL loses at most the running
trial's time. Each trial's files are in ``trials/<number>/`` (bundle, server log, sweep).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from optkit.tune import TuneError
from optkit.tune.candidate import Candidate, Invalid, params_text, resolve_point
from optkit.tune.local import Tried, next_move
from optkit.tune.space import Space

STUDY_NAME = "optkit-tune"
TRIALS_DIR = "trials"
INFEASIBLE_TPOT_MS = 1e6
"""With --pareto, the p99 TPOT told for a trial that measured none (invalid, failed start): finite, so the sampler's
model fits (its constraint marks the trial infeasible anyway); the report shows no TPOT for it."""
MAX_INVALID_IN_A_ROW = 200
"""Consecutive refused points after which the search stops: the space left is (almost) all invalid."""


@dataclass
class Outcome:
    """What one started trial measured (``status``: measured, stopped-early, failed-start, below-lowest)."""

    status: str
    objective: float = 0.0  # output tok/s per card at the capacity
    capacity: int = 0
    throughput: float = 0.0  # output tok/s of the whole server at the capacity
    p99_tpot_ms: float | None = None
    p99_ttft_ms: float | None = None
    reason: str = ""  # why it failed or stopped
    seconds: float = 0.0
    probes: int = 0

    @property
    def feasible(self) -> bool:
        return self.status in ("measured", "stopped-early") and self.capacity > 0


class Executor(Protocol):
    """Runs one candidate: start its server, measure its capacity (``incumbent``: the best objective so far, for
    stopping early), stop it. Never raises for a server that fails to start: that is an ``Outcome``."""

    name: str

    def run(self, candidate: Candidate, incumbent: float | None, trial_dir: Path) -> Outcome: ...


def stop_rule(incumbent: float | None, cards: float, resolution: float = 0.05) -> Callable[[Any], str | None]:
    """The sweep's ``stop``: after a probe, the most this trial could still reach. Throughput at a load c' above a
    met probe c is at most T(c) × c'/c (each request is served no faster under more load), and the capacity is
    below the lowest missed probe, so the bound is T(pass) × (fail − 1) / pass (× high / pass while no probe
    missed). Below the incumbent (less ``resolution``), the trial cannot win: stop."""
    def stop(search) -> str | None:
        if incumbent is None or incumbent <= 0:
            return None
        met = [p for p in search.probes if p.met]
        if not met:
            return None
        best = max(met, key=lambda p: p.concurrency)
        top = (search.failed - 1) if search.failed is not None else search.high
        rate = float(best.result.get("output_throughput") or 0.0) / cards
        bound = rate * top / best.concurrency
        if bound < incumbent * (1 - resolution):
            return (f"at most {bound:.1f} tok/s per card below c{top + 1 if search.failed else top} "
                    f"({rate:.1f} at c{best.concurrency}), below the best so far ({incumbent:.1f})")
        return None

    return stop


def open_study(tune_dir: Path, settings: dict, storage_kind: str | None = None, *, create: bool = True,
               reading: bool = False):
    """The study in ``tune_dir`` (created with the tune's sampler on first use; ``reading``: no sampler, for the
    results)."""
    try:
        import optuna
    except ImportError:
        raise TuneError(f"the tune's study needs Optuna, which this Python cannot import: "
                        f"`{sys.executable} -m pip install 'optkit[tune]'`") from None

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kind = storage_kind or settings.get("storage", "sqlite")
    if kind == "journal":
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        storage: Any = JournalStorage(JournalFileBackend(str(Path(tune_dir) / "study.journal")))
    elif kind == "sqlite":
        storage = f"sqlite:///{Path(tune_dir).resolve() / 'study.db'}"
    else:
        raise TuneError(f"--storage {kind}: give sqlite (one host) or journal (a shared volume, --k8s)")
    pareto = settings.get("objective") == "pareto"
    sampler = optuna.samplers.RandomSampler(seed=0) if reading else _sampler(optuna, settings)
    directions = ["maximize", "minimize"] if pareto else ["maximize"]
    try:
        return optuna.create_study(study_name=STUDY_NAME, storage=storage, sampler=sampler, directions=directions,
                                   load_if_exists=True)
    except Exception as exc:  # noqa: BLE001 - a storage optuna cannot open: say which file
        raise TuneError(f"{tune_dir}: the study's storage ({kind}) cannot be opened: {exc}") from None


def _sampler(optuna, settings: dict):
    kind, seed = settings.get("sampler", "gp"), settings.get("seed", 0)
    startup = settings.get("startup_trials", 3)
    if kind == "gp":
        from importlib.util import find_spec

        missing = [name for name in ("scipy", "torch") if find_spec(name) is None]  # the GP sampler's own imports
        if missing:
            raise TuneError(f"the Gaussian-process sampler needs {' and '.join(missing)}, which this Python cannot "
                            "import: install it, or write the tune with --sampler tpe")
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True,
                                      group=settings.get("group", False), constant_liar=True)


def distributions(space: Space) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution, IntDistribution

    out: dict[str, Any] = {}
    for d in space.open:
        if d.kind == "int":
            out[d.name] = (IntDistribution(d.low, d.high, step=d.step) if d.step
                           else IntDistribution(d.low, d.high, log=d.low >= 1 and d.high > d.low))
        else:
            out[d.name] = CategoricalDistribution(list(d.choices))
    return out


@dataclass
class RunSummary:
    starts: int = 0
    invalid: int = 0
    reused: int = 0
    recovered: int = 0
    stopped: str = ""
    trials: list[dict] = field(default_factory=list)


def started_trials(study) -> int:
    """Server starts the budget counts: trials started that ended (measured, failed to start) or run now (another
    worker's). An interrupted trial (FAIL: its run was killed) is not counted: its point is queued again, and the
    retry counts once, so an interruption costs time, not a trial of the budget."""
    return sum(1 for t in study.get_trials(deepcopy=False) if t.user_attrs.get("started") and t.state.name != "FAIL")


def incumbent(study) -> float | None:
    best = [t.user_attrs["objective"] for t in study.get_trials(deepcopy=False)
            if t.user_attrs.get("feasible") and t.state.name == "COMPLETE"]
    return max(best) if best else None


def _measured_by_key(study, key: str):
    for t in study.get_trials(deepcopy=False):
        if t.state.name == "COMPLETE" and t.user_attrs.get("key") == key and t.user_attrs.get("started"):
            return t
    return None


def recover(study, worker: int, log: Callable[[str], None],
            cleanup: Callable[[Path], str | None] | None = None, trials_dir: Path | None = None) -> int:
    """Trials this worker left running (the run was killed): failed, and their points enqueued again.
    ``cleanup(trial_dir)``: stop what the killed run left of each (``HostExecutor.reap``: its server)."""
    from optuna.trial import TrialState

    count = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.user_attrs.get("worker", worker) != worker:
            continue
        if cleanup is not None and trials_dir is not None and (done := cleanup(trials_dir / f"{t.number:04d}")):
            log(f"tune: trial {t.number}: {done}")
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)  # noqa: SLF001 - the storage's own API
        _requeue(study, t.number, t.params)
        log(f"tune: trial {t.number} was interrupted (its run was killed): failed, its point queued again")
        count += 1
    return count


def _requeue(study, number: int, params: dict) -> None:
    if params:
        study.enqueue_trial(params, user_attrs={"retry_of": number}, skip_if_exists=False)


def run_tune(tune_dir: Path, settings: dict, executor: Executor, workspace, *, budget: int | None = None,
             hours: float | None = None, worker: int = 0, storage: str | None = None,
             log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
             clock: Callable[[], float] = time.monotonic) -> RunSummary:
    """Run trials (module docstring) until ``budget`` starts in the whole study or ``hours`` of this run."""
    space = Space.from_data(settings["space"])
    request = settings["request"]
    budget = budget if budget is not None else settings.get("budget")
    hours = hours if hours is not None else settings.get("hours")
    if budget is None and hours is None:
        raise TuneError("give a budget: --budget N server starts or --hours H")
    study = open_study(tune_dir, settings, storage)
    trials_dir = Path(tune_dir) / TRIALS_DIR
    summary = RunSummary(recovered=recover(study, worker, log, getattr(executor, "reap", None), trials_dir))
    if not study.get_trials(deepcopy=False):
        study.enqueue_trial({d.name: d.start for d in space.open}, user_attrs={"rule_based": True})
    dists = distributions(space)
    fixed = {d.name: d.start for d in space.dims if d.fixed}
    pareto = settings.get("objective") == "pareto"
    began = clock()
    durations: list[float] = []
    invalid_row = 0
    while True:
        done = started_trials(study)
        if budget is not None and done >= budget:
            summary.stopped = f"the budget of {budget} server starts is spent"
            break
        if hours is not None and durations:
            mean = sum(durations) / len(durations)
            if clock() - began + mean > hours * 3600:
                summary.stopped = f"--hours {hours}: another trial (about {mean:.0f} s) would not end in time"
                break
        if invalid_row >= MAX_INVALID_IN_A_ROW:
            summary.stopped = (f"{invalid_row} points in a row were refused by the resolver: the space left is "
                               "(almost) all invalid; widen it (--range, --choices) or fix fewer knobs")
            break
        if settings.get("moves", True) and not study.get_trials(deepcopy=False, states=(_waiting(),)):
            move = next_move(space, history(study, space))
            if move is not None:
                point, why, attrs = move
                study.enqueue_trial(point, user_attrs={"move": attrs, "why": why})
                log(f"tune: next, {why}")
        trial = study.ask(dists)
        params = {**fixed, **trial.params}
        trial.set_user_attr("worker", worker)
        trial.set_user_attr("params", params)
        candidate = resolve_point(request, params, workspace)
        if isinstance(candidate, Invalid):
            invalid_row += 1
            summary.invalid += 1
            trial.set_user_attr("invalid", candidate.reason)
            trial.set_user_attr("constraint", 1.0)
            trial.set_constraint("valid", 1.0)
            trial.set_user_attr("feasible", False)
            trial.set_user_attr("objective", 0.0)
            study.tell(trial, [0.0, INFEASIBLE_TPOT_MS] if pareto else 0.0)
            log(f"tune: trial {trial.number} {params_text(params)} is invalid, not started: {candidate.reason}")
            continue
        invalid_row = 0
        trial.set_user_attr("key", candidate.key)
        trial.set_user_attr("effective", candidate.effective)
        trial.set_user_attr("cards", candidate.cards)
        same = _measured_by_key(study, candidate.key)
        if same is not None:
            summary.reused += 1
            for name in ("objective", "capacity", "throughput", "p99_tpot_ms", "p99_ttft_ms", "status", "feasible",
                         "constraint", "reason"):
                if name in same.user_attrs:
                    trial.set_user_attr(name, same.user_attrs[name])
            trial.set_user_attr("reused", same.number)
            trial.set_constraint("valid", float(same.user_attrs.get("constraint", 0.0)))
            study.tell(trial, same.values if pareto else same.values[0])
            log(f"tune: trial {trial.number} launches the same server as trial {same.number}: its measurement reused")
            continue
        trial_dir = trials_dir / f"{trial.number:04d}"
        trial.set_user_attr("started", True)
        trial.set_user_attr("measured_on", getattr(executor, "label", "") or executor.name)
        log(f"tune: trial {trial.number} ({done + 1}{f'/{budget}' if budget else ''} starts): {params_text(params)}")
        best = incumbent(study)
        try:
            outcome = executor.run(candidate, best, trial_dir)
        except BaseException:  # Ctrl-C, SIGTERM, a host problem: the trial measured nothing; its point waits
            from optuna.trial import TrialState

            study.tell(trial, state=TrialState.FAIL)
            _requeue(study, trial.number, trial.params)
            log(f"tune: trial {trial.number} was interrupted: failed, its point queued again")
            raise
        durations.append(outcome.seconds)
        summary.starts += 1
        _tell(study, trial, outcome, pareto)
        summary.trials.append({"number": trial.number, **asdict(outcome)})
        log(f"tune: trial {trial.number}: {describe(outcome)}")
    log(f"tune: stopped: {summary.stopped} ({summary.starts} started here, {summary.invalid} invalid never started, "
        f"{summary.reused} reused)")
    return summary


def _waiting():
    from optuna.trial import TrialState

    return TrialState.WAITING


def history(study, space: Space) -> list[Tried]:
    """The study's trials as ``optkit.tune.local`` reads them (a queued trial's point is its fixed params)."""
    from optkit.tune.space import parse_layout

    out = []
    for t in study.get_trials(deepcopy=False):
        given = t.params or t.system_attrs.get("fixed_params") or {}
        attrs = t.user_attrs
        layout = (attrs.get("effective") or {}).get("layout") or attrs.get("params", {}).get("layout") or "TP1xDP1"
        out.append(Tried(t.number, {d.name: given.get(d.name, d.start) for d in space.open}, t.state.name,
                         bool(attrs.get("started")), bool(attrs.get("feasible")), float(attrs.get("objective") or 0.0),
                         int(attrs.get("capacity") or 0), attrs.get("status", ""), attrs.get("reason", ""),
                         parse_layout(str(layout))[1], attrs.get("move") or {}))
    return out


def _tell(study, trial, outcome: Outcome, pareto: bool) -> None:
    attrs = asdict(outcome)
    for name in ("objective", "capacity", "throughput", "p99_tpot_ms", "p99_ttft_ms", "status", "reason", "seconds",
                 "probes"):
        trial.set_user_attr(name, attrs[name])
    trial.set_user_attr("feasible", outcome.feasible)
    trial.set_user_attr("constraint", 0.0 if outcome.feasible else 1.0)
    trial.set_constraint("valid", 0.0 if outcome.feasible else 1.0)
    value = outcome.objective if outcome.feasible else 0.0
    tpot = outcome.p99_tpot_ms if outcome.feasible and outcome.p99_tpot_ms is not None else INFEASIBLE_TPOT_MS
    study.tell(trial, [value, tpot] if pareto else value)


def describe(outcome: Outcome) -> str:
    if outcome.status == "failed-start":
        return f"the server did not start: {outcome.reason}"
    if outcome.status == "below-lowest":
        return f"misses the SLO at the lowest load: {outcome.reason}"
    text = f"capacity c{outcome.capacity}, {outcome.objective:.1f} tok/s per card"
    if outcome.p99_tpot_ms is not None:
        text += f", p99 TPOT {outcome.p99_tpot_ms:.1f} ms"
    if outcome.status == "stopped-early":
        text += f" (stopped early: {outcome.reason})"
    return text + f", {outcome.seconds:.0f} s"


def outcome_from_sweep(data: dict, sweep_dir: Path, cards: float, seconds: float) -> Outcome:
    """A trial's outcome from its sweep.json (``optkit.measure.sweep``) and the capacity probe's result file."""
    status = data.get("status")
    capacity = int(data.get("capacity") or 0)
    probe = next((p for p in data.get("probes", []) if p["concurrency"] == capacity and p["met"]), None)
    result: dict = {}
    if probe is not None and probe.get("file"):
        path = Path(sweep_dir) / probe["file"]
        if path.is_file():
            result = json.loads(path.read_text(encoding="utf-8"))
    throughput = float((probe or {}).get("output_throughput") or result.get("output_throughput") or 0.0)
    kind = {"found": "measured", "at-most-high": "measured", "server-died": "measured",
            "stopped-early": "stopped-early", "below-lowest": "below-lowest"}.get(status, "measured")
    reason = data.get("stopped", "")
    if status == "below-lowest":
        first = (data.get("probes") or [{}])[0]
        reason = "; ".join(first.get("violations", [])) or "the lowest probe misses the SLO"
    if status == "server-died":
        reason = f"the server died at c{data.get('died_at')}: the capacity is the load met before"
    return Outcome(kind, throughput / cards if capacity else 0.0, capacity, throughput, result.get("p99_tpot_ms"),
                   result.get("p99_ttft_ms"), reason, round(seconds, 1), len(data.get("probes", [])))


__all__ = ["Outcome", "Executor", "run_tune", "open_study", "stop_rule", "recover", "incumbent", "started_trials",
           "outcome_from_sweep", "describe", "distributions", "TRIALS_DIR"]
