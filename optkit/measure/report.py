"""``optkit report LADDER``: a ladder's results as a report (data first, files second).

``build_report(ladder_dir)`` reads ``ladder.json`` and ``results/`` (never the catalog: the ladder
carries the plan's estimates and the article's numbers) and returns a ``Report``: the cells
(step × concurrency, ``optkit.measure.analysis``), the per-recipe attributions with verdicts and
the plan's and the article's numbers beside them, the totals, the accuracy gate
(``optkit.measure.gate``) and every issue with the data (missing steps, failed requests, another
tree digest, host differences). ``write_report`` writes ``report.json``, ``report.md``,
``report.html`` (self-contained: the charts are embedded) and the charts ``waterfall.png`` and
``concurrency.png``. The same inputs give the same bytes.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optkit.measure import GateFailed, MeasureError
from optkit.measure.accuracy import load_prompt_set
from optkit.measure.analysis import SHOWN, Cell, Delta, cells, delta, expected_digest
from optkit.measure.gate import Gate, evaluate, outputs_of
from optkit.measure.ladder import LADDER_NAME
from optkit.measure.results import Run, read_runs

REPORT_VERSION = 1
HOST_KEYS = ("npu", "target", "driver", "cann")


@dataclass
class Attribution:
    """What one step changed, for the recipe(s) it is about."""

    step: str
    recipes: list[str]
    together: dict[str, str]
    after: str
    """The step with the recipes (the step itself, or the whole plan in a leave-one-out ladder)."""
    before: str
    """The step without them."""
    deltas: dict[int, Delta]
    estimate: dict[int, float | None]
    """The plan's expected delta (ms, negative = faster; None: unquantified) of the recipes together."""
    estimate_basis: dict[int, str]
    article: dict[int, list[str]]
    flags: list[str] = field(default_factory=list)
    capacity: Any = None
    """With a capacity sweep: the capacity the recipe's step gained (``optkit.measure.capacity.CapacityDelta``)."""

    @property
    def compared(self) -> str:
        return f"{self.after} − {self.before}"


@dataclass
class Report:
    ladder: dict[str, Any]
    runs: dict[str, list[Run]]
    cells: dict[tuple[str, int], Cell]
    attributions: list[Attribution]
    totals: dict[int, Delta]
    gate: Gate
    issues: list[str]
    digest: str | None
    host: dict[str, Any] | None
    capacity: dict[str, Any] | None = None
    """With a capacity sweep: each step's capacity (``optkit.measure.capacity.StepCapacity``) by step id."""

    @property
    def concurrencies(self) -> list[int]:
        return list(self.ladder["workload"]["concurrency"])

    @property
    def steps(self) -> list[dict]:
        return self.ladder["steps"]

    @property
    def regressions(self) -> list[tuple[Attribution, Delta]]:
        return [(a, d) for a in self.attributions for d in a.deltas.values() if d.verdict == "regression"]


def read_ladder(ladder_dir: Path) -> dict[str, Any]:
    path = Path(ladder_dir) / LADDER_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MeasureError(f"{ladder_dir} is not a ladder: it has no {LADDER_NAME} (write one with `optkit ladder`)") from None
    except ValueError as exc:
        raise MeasureError(f"{path}: not JSON: {exc}") from None
    if data.get("ladder_version") != 1:
        raise MeasureError(f"{path}: ladder_version {data.get('ladder_version')!r}; this optkit reads 1")
    return data


def build_report(ladder_dir: Path, results_dir: Path | None = None) -> Report:
    """The report of the ladder in ``ladder_dir`` (results in ``results_dir``, default ladder_dir/results)."""
    ladder_dir = Path(ladder_dir)
    ladder = read_ladder(ladder_dir)
    results = Path(results_dir) if results_dir else ladder_dir / "results"
    if not results.is_dir():
        raise MeasureError(f"{results}: no results yet; run {ladder_dir / 'run-ladder.sh'} on the NPU host first")
    steps = ladder["steps"]
    concurrencies = list(ladder["workload"]["concurrency"])
    runs, issues = read_runs(results, [s["id"] for s in steps], concurrencies, sweep="sweep" in ladder)
    digest = expected_digest(runs, steps[0]["id"])
    table = cells(runs, concurrencies, digest)
    issues += _run_issues(ladder, runs, table)
    host = next((r.host for rs in runs.values() for r in rs if r.host and r.host["tree"]["digest"] == digest), None)
    issues += _host_issues(ladder, runs, host)
    attributions = [_attribution(ladder, s, table) for s in steps if s["kind"] in ("add", "without")]
    last = next(s for s in reversed(steps) if s["kind"] in ("add", "full", "baseline"))
    totals = {c: delta(table[(last["id"], c)], table[(steps[0]["id"], c)]) for c in concurrencies}
    gate = _gate(ladder, ladder_dir, {step: [r for r in rs if not r.host or r.host["tree"]["digest"] == digest]
                                      for step, rs in runs.items()}, last)
    issues += [f"accuracy gate: {why}" for why in gate.unchecked]
    report = Report(ladder, runs, table, attributions, totals, gate, issues, digest, host)
    if "sweep" in ladder:
        _add_capacity(report)
    return report


def _add_capacity(report: Report) -> None:
    """Each step's capacity (over the runs on the ladder's tree) and each recipe's capacity delta."""
    from optkit.measure.capacity import capacity_delta, step_capacities

    counted = {step: [r for r in rs if not r.host or r.host["tree"]["digest"] == report.digest]
               for step, rs in report.runs.items()}
    schedulers = {s["id"]: s["scheduler"] for s in report.ladder["steps"] if s.get("scheduler")}
    report.capacity, issues = step_capacities(report.ladder["sweep"], counted, schedulers)
    report.issues += issues
    for a in report.attributions:
        a.capacity = capacity_delta(report.capacity.get(a.after), report.capacity.get(a.before))
        if a.capacity.value is None and "died" in a.capacity.why_unavailable:
            a.flags.append(f"{' + '.join(a.recipes)}: no capacity delta: {a.capacity.why_unavailable}")
        if a.capacity.verdict == "regression":
            a.flags.append(f"{' + '.join(a.recipes)}: capacity regression: {a.capacity.value:+d} concurrent requests "
                           f"under {report.ladder['sweep']['slo']}")


def _run_issues(ladder: dict, runs: dict[str, list[Run]], table) -> list[str]:
    issues = []
    for step in ladder["steps"]:
        found = runs[step["id"]]
        if not found:
            issues.append(f"{step['id']}: no results (not run yet, or its run failed)")
        elif len(found) < ladder["repeat"]:
            issues.append(f"{step['id']}: {len(found)} of {ladder['repeat']} repeats have results")
        for run in found:
            issues += [f"{step['id']} r{run.repeat}: {p}" for p in run.problems]
    issues += [f"{cell.step} {why}" for cell in table.values() for why in cell.excluded
               if not why.endswith(".json")]  # a missing file is already a problem of its run
    return issues


def _host_issues(ladder: dict, runs: dict[str, list[Run]], host: dict | None) -> list[str]:
    if host is None:
        return ["no host.json: the host the runs ran on is unknown"]
    issues = []
    if host.get("npu") is None:
        issues.append("the host has no Ascend NPU (npu-smi found none): these are not NPU measurements")
    elif host.get("target") != ladder["target"]:
        issues.append(f"the host's NPU {host['npu']!r} is not a {ladder['target']} (the plan's target)")
    want = ladder["versions"]["vllm_ascend"]
    if host["tree"]["vllm_ascend"] != want:
        issues.append(f"the tree is vllm-ascend {host['tree']['vllm_ascend']}, the ladder was planned for {want}")
    for step, step_runs in runs.items():
        for run in step_runs:
            if run.host is None:
                continue
            differs = [k for k in HOST_KEYS if run.host.get(k) != host.get(k)]
            differs += [f"package {k}" for k in sorted(set(run.host.get("packages", {})) | set(host.get("packages", {})))
                        if run.host.get("packages", {}).get(k) != host.get("packages", {}).get(k)]
            if differs:
                issues.append(f"{step} r{run.repeat}: another host than the other runs ({', '.join(differs)} differ)")
    return issues


def _attribution(ladder: dict, step: dict, table) -> Attribution:
    if step["kind"] == "add":
        after, before = step["id"], step["reference"]
    else:  # without: the whole plan − the plan without the recipe
        after, before = step["reference"], step["id"]
    recipes = [ladder["recipes"][r] for r in step["changes"]]
    attribution = Attribution(step["id"], list(step["changes"]), dict(step["together"]), after, before, {}, {}, {}, {})
    for c in ladder["workload"]["concurrency"]:
        d = delta(table[(after, c)], table[(before, c)])
        attribution.deltas[c] = d
        savings = [r["estimate_saving_ms"].get(str(c)) for r in recipes]
        quantified = [s for s in savings if s is not None]
        attribution.estimate[c] = -sum(quantified) if quantified else None
        attribution.estimate_basis[c] = "; ".join(
            f"{rid}: {r['estimate_basis'].get(str(c), '—')}" for rid, r in zip(step["changes"], recipes))
        attribution.article[c] = [f"{rid}: {g['text']}" + (f" at c{g['concurrency']}" if g["concurrency"] else "")
                                  + ("" if g["mtp"] is None else f", MTP {'on' if g['mtp'] else 'off'}") + f" — 「{g['quote']}」"
                                  for rid, r in zip(step["changes"], recipes) for g in r["article"]
                                  if g["concurrency"] in (None, c)]
        attribution.flags += _flags(" + ".join(step["changes"]), d, attribution.estimate[c])
    return attribution


def _flags(what: str, d: Delta, estimate: float | None) -> list[str]:
    if d.verdict == "regression":
        expected = f"; the plan expected {estimate:+.3g} ms" if estimate is not None else ""
        return [f"{what}: regression at c{d.concurrency}: {d.value:+.3g} ± {d.noise:.2g} ms{expected}"]
    if d.verdict == "no-measurable-effect" and estimate is not None and estimate < -(2 * (d.noise or 0.0)):
        return [f"{what}: no measurable effect at c{d.concurrency} ({d.value:+.3g} ± {d.noise:.2g} ms) where the "
                f"plan expected {estimate:+.3g} ms"]
    return []


def _gate(ladder: dict, ladder_dir: Path, runs: dict[str, list[Run]], last: dict) -> Gate:
    """The accuracy gate over the runs on the ladder's tree (a run on another source is no evidence)."""
    steps = ladder["steps"]
    baseline = steps[0]
    pairs = []
    for s in steps:
        if s["kind"] == "add":
            pairs.append((s["id"], s["reference"], list(s["changes"]), False))
        elif s["kind"] == "without":
            pairs.append((s["reference"], s["id"], list(s["changes"]), False))
    if last["id"] != baseline["id"]:
        added = [r for r in last["recipes"] if r not in baseline["recipes"]]
        pairs.append((last["id"], baseline["id"], added, True))
    outputs, repeat_failures = {}, {}
    for s in steps:
        outputs[s["id"]], repeat_failures[s["id"]] = outputs_of(runs[s["id"]])
    claims = {rid: r["accuracy"] for rid, r in ladder["recipes"].items()}
    prompts = load_prompt_set(ladder_dir / ladder["accuracy"]["prompts"])
    return evaluate(pairs, outputs, claims, prompts, repeat_failures)


def outcome_error(report: Report, ladder_dir: Path) -> MeasureError | None:
    """Why ``optkit report`` exits 1 once the report is written: no step has results, or the accuracy
    gate did not pass (failed, or a comparison it could not check); None when neither."""
    if not any(report.runs.values()):
        return MeasureError(f"no step of the ladder in {ladder_dir} has results (none ran, or every run failed; "
                            "results/failed/ keeps an unfinished run's logs): fix the cause and run its run-ladder.sh "
                            "again, it resumes")
    if not report.gate.passed:
        return GateFailed(report.gate.failures, report.gate.unchecked)
    return None


# --------------------------------------------------------------------------- files


def report_data(report: Report) -> dict[str, Any]:
    """The report as JSON-safe data (report.json)."""
    def d(x: Delta) -> dict:
        return {"delta_ms": x.value, "noise_ms": x.noise, "verdict": x.verdict, "reference_tpot_ms": x.reference_tpot,
                "why_unavailable": x.why_unavailable or None}

    return {
        "report_version": REPORT_VERSION,
        "ladder": {k: report.ladder[k] for k in ("model", "target", "versions", "mode", "order", "repeat", "workload")},
        "host": report.host, "tree_digest": report.digest,
        "cells": [{"step": s, "concurrency": c, "repeats": cell.repeats, "excluded": cell.excluded,
                   "noise_tpot_ms": cell.noise if cell.counted else None,
                   **{k: cell.mean(k) for k in SHOWN}, "spread_mean_tpot_ms": cell.spread("mean_tpot_ms"),
                   "completed": sum(r.completed for r in cell.results), "failed": sum(r.failed for r in cell.results)}
                  for (s, c), cell in report.cells.items()],
        "attribution": [{"step": a.step, "recipes": a.recipes, "together": a.together, "compared": a.compared,
                         "per_concurrency": {str(c): {**d(x), "plan_estimate_ms": a.estimate[c],
                                                      "plan_basis": a.estimate_basis[c], "article": a.article[c]}
                                             for c, x in a.deltas.items()}, "flags": a.flags}
                        for a in report.attributions],
        "totals": {str(c): d(x) for c, x in report.totals.items()},
        "accuracy_gate": {"passed": report.gate.passed, "failures": report.gate.failures,
                          "exact_match_percent": report.gate.accuracy,
                          "checks": [{"with": c.with_, "without": c.without, "recipes": c.recipes, "kind": c.kind,
                                      "status": c.status, "detail": c.detail} for c in report.gate.checks]},
        "issues": report.issues,
        **_capacity_data(report),
    }


def _capacity_data(report: Report) -> dict[str, Any]:
    """report.json's ``capacity`` (with a capacity sweep): per step and per recipe."""
    if report.capacity is None:
        return {}
    sweep = report.ladder["sweep"]
    return {"capacity": {
        "slo": sweep["slo"], "variable": sweep["variable"], "low": sweep["low"], "high": sweep["high"],
        "resolution": sweep["resolution"],
        "steps": [{"step": step, "status": cap.status, "capacity": cap.capacity, "upper": cap.upper,
                   "runs": [{"repeat": r.repeat, "status": r.status, "capacity": r.capacity, "upper": r.upper}
                            for r in cap.runs], "curve": cap.curve}
                  for step, cap in report.capacity.items()],
        "attribution": [{"step": a.step, "recipes": a.recipes, "compared": a.compared,
                         "capacity_delta": a.capacity.value, "verdict": a.capacity.verdict,
                         "why_unavailable": a.capacity.why_unavailable or None} for a in report.attributions]}}


def charts(report: Report) -> dict[str, bytes]:
    """waterfall.png and concurrency.png (matplotlib is imported here, and only here)."""
    from optkit.measure import charts as draw

    c = report.concurrencies[0]
    model = report.ladder["model"]
    if report.ladder["mode"] == "incremental":
        first = report.cells[(report.steps[0]["id"], c)]
        rows = [(" + ".join(a.recipes), a.deltas[c].value, a.deltas[c].verdict) for a in report.attributions]
        waterfall = draw.waterfall(f"c{c} mean TPOT waterfall: {model} on {report.ladder['target']}",
                                   ("baseline", first.mean("mean_tpot_ms") or 0.0), rows, "plan")
    else:
        rows = [(" + ".join(a.recipes), a.deltas[c].value, a.deltas[c].noise, a.deltas[c].verdict)
                for a in report.attributions]
        waterfall = draw.contributions(f"c{c}: each recipe's share of the whole plan (leave-one-out): {model}", rows)
    series = {k: [((cell := report.cells[(s["id"], k)]).mean("mean_tpot_ms"), cell.noise if cell.counted else 0.0)
                  for s in report.steps] for k in report.concurrencies}
    bars = draw.per_concurrency(f"mean TPOT per step and concurrency: {model}", [s["id"] for s in report.steps], series)
    return {"waterfall.png": waterfall, "concurrency.png": bars, **_capacity_chart(report, draw)}


def _binding_bound(report: Report) -> dict:
    """The SLO bound the curves show: the one closest to (or furthest past) its limit over all probes."""
    def worst(bound: dict) -> float:
        ratios = [p[bound["key"]] / bound["limit_ms"] for cap in report.capacity.values() for p in cap.curve
                  if p.get(bound["key"]) is not None]
        return max(ratios, default=0.0)

    bounds = report.ladder["sweep"]["bounds"]
    return max(bounds, key=lambda b: (worst(b), -bounds.index(b)))


def _capacity_chart(report: Report, draw) -> dict[str, bytes]:
    """capacity.png (with a capacity sweep): each step's throughput–latency curve and its capacity."""
    if report.capacity is None:
        return {}
    bound = _binding_bound(report)
    curves = [(step, [(p["concurrency"], p["output_throughput"], p[bound["key"]], p["met"]) for p in cap.curve],
               cap.capacity, cap.status) for step, cap in report.capacity.items()]
    return {"capacity.png": draw.capacity_curves(
        f"throughput–latency per step under {report.ladder['sweep']['slo']}: {report.ladder['model']}",
        bound["key"], bound["limit_ms"], curves)}


def report_files(report: Report) -> dict[str, bytes]:
    """Every file of the report, by name."""
    from optkit.bundle.render import render, render_html
    from optkit.resolve.report import dump_json

    images = charts(report)
    view = _view(report)
    embedded = {name: "data:image/png;base64," + base64.b64encode(data).decode("ascii") for name, data in images.items()}
    files = dict(images)
    files["report.json"] = dump_json(report_data(report)).encode("utf-8")
    files["report.md"] = render("report/report.md.j2", **view, images={n: n for n in images}).encode("utf-8")
    files["report.html"] = render_html("report/report.html.j2", **view, images=embedded).encode("utf-8")
    return dict(sorted(files.items()))


def write_report(report: Report, out_dir: Path) -> list[Path]:
    """Write the report files into ``out_dir`` (created; files of the same names replaced)."""
    out_dir = Path(out_dir)
    files = report_files(report)  # every file made before any is written: a failure leaves nothing behind
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in files.items():
        (out_dir / name).write_bytes(data)
        written.append(out_dir / name)
    return written


def _ms(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _view(report: Report) -> dict[str, Any]:
    """What the report templates are given: every number already formatted."""
    ladder, gate = report.ladder, report.gate
    rows = []
    for s in report.steps:
        for c in report.concurrencies:
            cell = report.cells[(s["id"], c)]
            spread = cell.spread("mean_tpot_ms")
            rows.append({
                "step": s["id"], "c": c, "repeats": len(cell.repeats),
                "tpot": _ms(cell.mean("mean_tpot_ms")) + (f" ({spread[0]:.2f}–{spread[1]:.2f})" if spread and len(cell.repeats) > 1 else ""),
                "noise": _ms(cell.noise, 3) if cell.counted else "—",
                **{k: _ms(cell.mean(k)) for k in SHOWN if k != "mean_tpot_ms"},
                "requests": f"{sum(r.completed for r in cell.results)}/{sum(r.failed for r in cell.results)}",
            })
    attribution = []
    for a in report.attributions:
        for c, d in a.deltas.items():
            attribution.append({
                "step": a.step, "recipes": " + ".join(a.recipes), "c": c,
                "delta": "—" if d.value is None else f"{d.value:+.3f} ± {d.noise:.3f}",
                "verdict": d.verdict.replace("-", " ") if d.value is not None else f"unavailable: {d.why_unavailable}",
                "verdict_class": d.verdict, "estimate": "unquantified" if a.estimate[c] is None else f"{a.estimate[c]:+.3f}",
                "article": "; ".join(a.article[c]) or "—"})
    counts = Counter(d.verdict for a in report.attributions for d in a.deltas.values())
    return {
        "ladder": ladder, "w": ladder["workload"], "host": report.host, "digest": report.digest,
        "rows": rows, "attribution": attribution, "flags": [f for a in report.attributions for f in a.flags],
        "together": [(a.step, rid, why) for a in report.attributions for rid, why in a.together.items()],
        "totals": [{"c": c, "baseline": _ms(d.reference_tpot), "final": _ms(None if d.value is None else d.reference_tpot + d.value),
                    "delta": "—" if d.value is None else f"{d.value:+.3f} ± {d.noise:.3f}",
                    "percent": "—" if d.value is None else f"{100 * d.value / d.reference_tpot:+.1f}%",
                    "sum": _ms(sum(a.deltas[c].value for a in report.attributions if a.deltas[c].value is not None), 3)}
                   for c, d in report.totals.items()],
        "gate_passed": gate.passed, "gate_failures": gate.failures + gate.unchecked, "issues": report.issues,
        "no_results": not any(report.runs.values()),
        "packages": ", ".join(f"{name} {version or '—'}" for name, version in (report.host or {}).get("packages", {}).items())
        or "package versions unknown",
        "checks": [{"with": c.with_, "without": c.without, "recipes": " + ".join(c.recipes) if len(c.recipes) < 4
                    else f"{len(c.recipes)} recipes", "kind": c.kind, "status": c.status, "detail": c.detail}
                   for c in gate.checks],
        "exact_match": [(s["id"], f"{gate.accuracy[s['id']]:.1f}%") for s in report.steps if s["id"] in gate.accuracy],
        "counts": {k: counts.get(k, 0) for k in ("gain", "no-measurable-effect", "regression", "unavailable")},
        "waterfall_c": report.concurrencies[0],
        **_capacity_view(report),
    }


def _capacity_view(report: Report) -> dict[str, Any]:
    """What the report templates show of the capacity sweep (``capacity`` is None without one)."""
    if report.capacity is None:
        return {"capacity": None}
    from optkit.measure.sweep import bracket_text

    sweep = report.ladder["sweep"]
    words = {"found": "found", "below-lowest": f"below the lowest probe (c{sweep['low']})",
             "at-most-high": f"at least the highest probe (c{sweep['high']})", "server-died": "server died",
             "unmeasured": "not measured"}
    rows = []
    for step, cap in report.capacity.items():
        point = cap.at_capacity() or {}
        rows.append({"step": step, "status": words[cap.status], "runs": len(cap.runs),
                     "capacity": "—" if cap.capacity is None else str(cap.capacity),
                     "bracket": "—" if cap.capacity is None else bracket_text(cap.capacity, cap.upper),
                     "throughput": _ms(point.get("output_throughput"), 1),
                     "goodput": _ms(point.get("request_goodput"), 3),
                     "best_goodput": _ms(max((p["request_goodput"] for p in cap.curve if p["request_goodput"] is not None),
                                             default=None), 3),
                     "probes": ", ".join(f"c{p['concurrency']}{'' if p['met'] else '✗'}" for p in cap.curve) or "—"})
    attribution = [{"step": a.step, "recipes": " + ".join(a.recipes), "compared": a.compared,
                    "delta": "—" if a.capacity.value is None else f"{a.capacity.value:+d}",
                    "verdict": a.capacity.verdict.replace("-", " ") if a.capacity.value is not None
                    else f"unavailable: {a.capacity.why_unavailable}"} for a in report.attributions]
    return {"capacity": {"slo": sweep["slo"], "low": sweep["low"], "high": sweep["high"],
                         "resolution": sweep["resolution"], "goodput": " ".join(sweep["goodput"]) or "—",
                         "rows": rows, "attribution": attribution}}


__all__ = ["Report", "Attribution", "build_report", "outcome_error", "write_report", "report_files", "report_data", "read_ladder"]
