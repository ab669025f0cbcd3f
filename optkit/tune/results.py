"""A tune's results: every trial as a row, the best, the Pareto front, the knobs' importance, the report.

``read_trials`` reads the study (Optuna's storage in the tune directory) into ``TrialRow``s. From them:

- ``best``: the feasible trial (its capacity measured, at least the lowest probe met) with the most output
  tokens per second per card at the capacity; ties go to the earlier trial;
- ``pareto``: the feasible trials no other beats on both throughput per card (higher) and the capacity
  probe's p99 TPOT (lower);
- ``importance``: each open knob's share of the objective's variation over the feasible trials, by
  Optuna's PED-ANOVA evaluator (no scikit-learn); None, with the reason, below ``MIN_FOR_IMPORTANCE``;
- ``changes``: the knobs where the best differs from the rule-based plan (the first trial).

``write_report`` writes ``report/report.md``, ``report/results.json`` and the charts (``history.png``,
``front.png``, ``importance.png``), and the best trial's launch bundle in ``best/``, resolved again by this
optkit. ``from_tune`` gives ``optkit plan --from-tune`` the best's request and its label ("measured on …").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from optkit.tune import TuneError

MIN_FOR_IMPORTANCE = 6
"""Feasible trials below which no importance is computed (PED-ANOVA compares the top tenth with the rest)."""
FEASIBLE = ("measured", "stopped-early")


@dataclass
class TrialRow:
    number: int
    status: str  # measured, stopped-early, failed-start, below-lowest, client-failed, invalid, interrupted, running
    params: dict[str, Any] = field(default_factory=dict)
    effective: dict[str, Any] = field(default_factory=dict)
    objective: float = 0.0
    capacity: int = 0
    throughput: float = 0.0
    p99_tpot_ms: float | None = None
    p99_ttft_ms: float | None = None
    reason: str = ""
    seconds: float = 0.0
    started: bool = False
    reused: int | None = None
    rule_based: bool = False
    worker: int = 0
    measured_on: str = ""
    why: str = ""  # the move that proposed this point (optkit.tune.local), "" for the sampler's

    @property
    def feasible(self) -> bool:
        return self.status in FEASIBLE and self.capacity > 0


def read_trials(tune_dir: Path, data: dict) -> list[TrialRow]:
    """Every trial of the study in ``tune_dir``, by number."""
    from optkit.tune.study import open_study

    if not ((Path(tune_dir) / "study.db").exists() or (Path(tune_dir) / "study.journal").exists()):
        raise TuneError(f"{tune_dir}: no trials yet (no study.db or study.journal): run its run-tune.sh on the NPU host")
    storage = "journal" if (Path(tune_dir) / "study.journal").exists() else "sqlite"
    study = open_study(Path(tune_dir), data, storage, reading=True)
    rows = []
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        a = t.user_attrs
        if t.state.name == "FAIL":
            status = "interrupted"
        elif t.state.name == "RUNNING":
            status = "running"
        elif "invalid" in a:
            status = "invalid"
        else:
            status = a.get("status", "measured")
        rows.append(TrialRow(
            t.number, status, dict(a.get("params") or t.params), dict(a.get("effective") or {}),
            float(a.get("objective") or 0.0), int(a.get("capacity") or 0), float(a.get("throughput") or 0.0),
            a.get("p99_tpot_ms"), a.get("p99_ttft_ms"), a.get("invalid") or a.get("reason") or "",
            float(a.get("seconds") or 0.0), bool(a.get("started")), a.get("reused"), bool(a.get("rule_based")),
            int(a.get("worker") or 0), str(a.get("measured_on") or ""), str(a.get("why") or "")))
    return rows


def best(rows: list[TrialRow]) -> TrialRow | None:
    feasible = [r for r in rows if r.feasible]
    return max(feasible, key=lambda r: (r.objective, -r.number)) if feasible else None


def rule_row(rows: list[TrialRow]) -> TrialRow | None:
    return next((r for r in rows if r.rule_based and r.status not in ("interrupted", "running")), None)


def pareto(rows: list[TrialRow]) -> list[TrialRow]:
    points = [r for r in rows if r.feasible and r.p99_tpot_ms is not None and r.reused is None]

    def dominated(r: TrialRow) -> bool:
        return any(o.objective >= r.objective and o.p99_tpot_ms <= r.p99_tpot_ms
                   and (o.objective > r.objective or o.p99_tpot_ms < r.p99_tpot_ms) for o in points)

    return sorted((r for r in points if not dominated(r)), key=lambda r: (-r.objective, r.number))


def importance(rows: list[TrialRow], space_data: dict) -> tuple[list[tuple[str, float]] | None, str]:
    """Each open knob's importance, or None and why not."""
    from optkit.tune.space import Space
    from optkit.tune.study import distributions

    feasible = [r for r in rows if r.feasible]
    if len(feasible) < MIN_FOR_IMPORTANCE:
        return None, (f"{len(feasible)} feasible trials; the importance needs at least {MIN_FOR_IMPORTANCE} "
                      "(a longer tune: --budget)")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = distributions(Space.from_data(space_data))
    if not dists:
        return None, "every knob is fixed"
    study = optuna.create_study(direction="maximize")
    for r in feasible:
        study.add_trial(optuna.trial.create_trial(params={k: r.params[k] for k in dists}, distributions=dists,
                                                  value=r.objective))
    try:
        found = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError) as exc:
        return None, f"not computed: {exc}"
    return sorted(((k, float(v)) for k, v in found.items()), key=lambda kv: (-kv[1], kv[0])), "PED-ANOVA"


def changes(rule: TrialRow | None, top: TrialRow | None) -> list[tuple[str, Any, Any]]:
    if rule is None or top is None:
        return []
    a, b = rule.effective or rule.params, top.effective or top.params
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def summary(data: dict, rows: list[TrialRow]) -> dict[str, Any]:
    """results.json: what the report and ``--from-tune`` read."""
    top, rule = best(rows), rule_row(rows)
    ranked, how = importance(rows, data["space"])
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    gain = (top.objective / rule.objective - 1) if top and rule and rule.feasible and rule.objective else None
    return {"model": data["model"], "target": data["target"], "slo": data["sweep"]["slo"],
            "objective": data["objective"], "versions": data["versions"],
            "starts": sum(1 for r in rows if r.started), "trials": len(rows), "by_status": dict(sorted(counts.items())),
            "best": asdict(top) if top else None, "rule_based": asdict(rule) if rule else None,
            "gain_over_rules": None if gain is None else round(gain, 4),
            "changes": [{"knob": k, "rules": a, "best": b} for k, a, b in changes(rule, top)],
            "pareto": [asdict(r) for r in pareto(rows)],
            "importance": None if ranked is None else [{"knob": k, "importance": round(v, 4)} for k, v in ranked],
            "importance_basis": how}


def from_tune(tune_dir: Path) -> tuple[dict[str, Any], str, dict]:
    """The best trial's request (by alias, its ``--set`` values and their label in) for ``optkit plan --from-tune``."""
    from optkit.tune.bundle import load_tune
    from optkit.tune.candidate import point_request

    data = load_tune(tune_dir)
    rows = read_trials(tune_dir, data)
    top = best(rows)
    if top is None:
        raise TuneError(f"{tune_dir}: no trial met the SLO {data['sweep']['slo']} yet ({len(rows)} trials): nothing "
                        "measured to plan from; run more trials or relax the SLO")
    label = (f"measured on {top.measured_on or 'the tune host'} by optkit tune ({Path(tune_dir).name}, trial "
             f"{top.number} of {len(rows)}): capacity c{top.capacity} under {data['sweep']['slo']}, "
             f"{top.objective:.1f} output tok/s per card")
    request = point_request(data["request"], top.effective or top.params)
    request["set_source"] = label
    return request, label, data


def write_report(tune_dir: Path, out_dir: Path | None = None, *, workspace=None) -> list[Path]:
    """report/ (report.md, results.json, charts) and best/ (the best trial's bundle)."""
    from optkit.bundle.render import render
    from optkit.bundle.writer import write_files
    from optkit.measure import charts
    from optkit.tune.bundle import load_tune

    tune_dir = Path(tune_dir)
    data = load_tune(tune_dir)
    rows = read_trials(tune_dir, data)
    out = Path(out_dir) if out_dir else tune_dir / "report"
    result = summary(data, rows)
    title = f"{data['model']} on {data['target']}, {data['sweep']['slo']}"
    started = [r for r in rows if r.started]
    rule = rule_row(rows)
    files: dict[str, bytes] = {
        "results.json": (json.dumps(result, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"),
        "history.png": charts.tune_history(title, [(r.number, r.objective if r.feasible else None, r.status)
                                                   for r in started], rule.objective if rule and rule.feasible else None)}
    front = {r.number for r in pareto(rows)}
    points = [(r.p99_tpot_ms, r.objective, r.number in front, _knobs(r)) for r in rows
              if r.feasible and r.p99_tpot_ms is not None and r.reused is None]
    if points:
        files["front.png"] = charts.tune_front(title, points)
    if result["importance"]:
        files["importance.png"] = charts.importance_bars(title, [(i["knob"], i["importance"]) for i in result["importance"]])
    files["report.md"] = render("tune/report.md.j2", data=data, result=result, rows=[asdict(r) | {"knobs": _knobs(r)}
                                                                                     for r in rows],
                                charts=sorted(k for k in files if k.endswith(".png"))).encode("utf-8")
    written = write_files(files, out)
    top = best(rows)
    if top is not None:
        from optkit.resolve.plan import load_workspace
        from optkit.tune.candidate import Candidate, resolve_point

        ws = workspace or load_workspace()
        request, label, _ = from_tune(tune_dir)
        candidate = resolve_point({**data["request"], "set_source": label}, top.effective or top.params, ws)
        if isinstance(candidate, Candidate):
            written += write_files(candidate.files, tune_dir / "best")
    return written


def _knobs(r: TrialRow) -> str:
    p = r.effective or r.params
    order = ("layout", "speculative", "flashcomm1", "prefix-caching", "max-num-seqs", "max-num-batched-tokens",
             "capture-up-to")  # effective: capture-share is in capture-up-to
    return " ".join(f"{k}={p[k]}" for k in order if k in p)


__all__ = ["TrialRow", "read_trials", "best", "pareto", "importance", "changes", "summary", "from_tune", "write_report"]
