"""``optkit report LADDER --record``: a report's measurements as a verified-on record in ``verified/``.

Only a run that can vouch for itself is recorded: the accuracy gate passed (every comparison
checked), the host had an Ascend NPU of the plan's target, and the tree digest is known. Each
attribution with a measured delta becomes the entry of the recipe its step is for (the recipes that
moved with it are named in ``together_with``), with the sha256 of the recipe's patches then; a
recipe whose patches in the catalog are not the ones the ladder was written with is refused, since
the measurement would not be of it. The record format, its digest-derived name and the checks
applied when it is loaded are ``optkit.catalog.records``.
"""

from __future__ import annotations

from pathlib import Path

from optkit.catalog.loader import load_catalog
from optkit.catalog.records import RECORDS_DIR, Record, entry_problem, record_file
from optkit.measure import MeasureError


def record_of(report, catalog) -> Record:
    """The record of ``report``, checked against ``catalog`` (``MeasureError`` says why it cannot be made)."""
    ladder, host = report.ladder, report.host
    if report.gate.failures or not report.gate.passed:
        raise MeasureError("the accuracy gate did not pass (see the report); a record would vouch for recipes whose "
                           "outputs were not shown to be right")
    if host is None or host.get("npu") is None:
        raise MeasureError("the runs have no Ascend NPU in their host facts (host.json: npu is null): only "
                           "measurements from an NPU host can be recorded")
    if host.get("target") != ladder["target"]:
        raise MeasureError(f"the host's NPU {host['npu']!r} is not a {ladder['target']}, the plan's target")
    missing = [k for k in ("tp", "dp", "ep") if k not in ladder["workload"]]
    if missing:
        raise MeasureError(f"ladder.json's workload has no {', '.join(missing)} (written by an older optkit): the "
                           "parallel layout it ran at is unknown, so it cannot be recorded; write the ladder again")
    recipes = {}
    for a in report.attributions:
        measured = {c: d for c, d in a.deltas.items() if d.value is not None}
        if not measured:
            continue
        subject = a.recipes[0]
        entry = {"step": a.step, "together_with": a.recipes[1:], "patches": ladder["recipes"][subject]["patches"],
                 "tpot_delta_ms": {c: round(d.value, 4) for c, d in measured.items()},
                 "noise_ms": {c: round(d.noise, 4) for c, d in measured.items()},
                 "verdict": {c: d.verdict for c, d in measured.items()},
                 "reference_tpot_ms": {c: round(d.reference_tpot, 4) for c, d in measured.items()},
                 "repeats": min(len(report.cells[(s, c)].repeats) for c in measured for s in (a.after, a.before))}
        if a.capacity is not None and a.capacity.value is not None and _recordable(report, a.after, a.before):
            entry.update(capacity_delta=a.capacity.value, capacity_verdict=a.capacity.verdict)
        recipes[subject] = entry
    if not recipes:
        raise MeasureError("no recipe has a measured delta; nothing to record")
    record = Record.model_validate({
        "record_version": 1, "target": ladder["target"], "model": ladder["model"], "release": ladder["versions"],
        "tree_digest": report.digest,
        "host": {"npu": host["npu"], "target": host["target"], "driver": host.get("driver"), "cann": host.get("cann"),
                 "packages": {k: v for k, v in sorted(host.get("packages", {}).items()) if v}},
        "workload": _workload(ladder["workload"]),
        "ladder": ladder["mode"], "accuracy_gate": "passed", "recipes": recipes,
        "results": {rel: sha for runs in report.runs.values() for run in runs for rel, sha in sorted(run.files.items())
                    if rel.rsplit("/", 1)[-1].startswith("c")},
        "capacity": capacity_of(report),
    })
    for rid, measurement in record.recipes.items():
        why = entry_problem(catalog, rid, measurement)
        if why:
            raise MeasureError(f"cannot record {rid}: {why} (the ladder was written from another catalog than the "
                               "one recorded into)")
    return record


WORKLOAD_KEYS = ("concurrency", "input_len", "output_len", "mtp", "num_speculative_tokens", "tp", "dp", "ep",
                 "sampling", "min_tokens", "dataset")
"""What a record keeps of ladder.json's workload (and its shared prefix, written only when there was one)."""


def _workload(workload: dict) -> dict:
    kept = {k: workload[k] for k in WORKLOAD_KEYS}
    if "shared_prefix_len" in workload:
        kept["shared_prefix_len"] = workload["shared_prefix_len"]
    return kept


def _recordable(report, *steps: str) -> bool:
    return all(step in (capacity_of(report) or {"steps": {}})["steps"] for step in steps)


def capacity_of(report) -> dict | None:
    """The record's ``capacity``: per step with a capacity sweep whose outcome is a bracket (found, below
    the lowest probe, at least the highest); a step whose server died during the sweep is left out (its
    capacity is only a lower bound), and so are its recipes' capacity deltas. None without a sweep."""
    if report.capacity is None:
        return None
    sweep = report.ladder["sweep"]
    recipes = {s["id"]: s["recipes"] for s in report.steps}
    steps = {}
    for step, cap in report.capacity.items():
        if not cap.measured or cap.status == "server-died":
            continue
        point = cap.at_capacity() or {}
        steps[step] = {"recipes": recipes[step], "capacity": cap.capacity, "upper": cap.upper, "status": cap.status,
                       "output_throughput": _rounded(point.get("output_throughput")),
                       "request_goodput": _rounded(point.get("request_goodput")), "repeats": len(cap.runs)}
    if not steps:
        return None
    return {"slo": sweep["slo"], "variable": sweep["variable"], "low": sweep["low"], "high": sweep["high"],
            "resolution": sweep["resolution"], "prompts_per_concurrency": sweep["prompts_per_concurrency"],
            "steps": steps}


def _rounded(value):
    return None if value is None else round(value, 4)


def write_record(report, root: Path, catalog=None) -> Path:
    """Write the record of ``report`` into ``root/verified/`` and return its path. ``root`` is a catalog
    root (the shipped one, by default the catalog checked against) or a folder of one's own layered over
    it (``--catalog DIR``; pass the layered ``catalog``), whose ``verified/`` plan, show and recipes read."""
    record = record_of(report, load_catalog(root) if catalog is None else catalog)
    name, text = record_file(record)
    folder = Path(root) / RECORDS_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise MeasureError(f"cannot write the record into {folder}: {exc.strerror or exc}; record into a folder of "
                           "your own with --catalog DIR (plan, show and recipes read DIR/verified/ with --catalog DIR "
                           "or OPTKIT_CATALOG_PATH)") from None
    return folder / name


__all__ = ["record_of", "write_record"]
