"""``optkit report TUNE_DIR --record``: the tune's best as a tune record (``optkit.resolve.tuned``), which later
plans of the same request use over the rules."""

from __future__ import annotations

import json
from pathlib import Path

from optkit.tune import TuneError


def tune_record(tune_dir: Path) -> dict:
    """The record's content: the key of the request the tune measured, the best point, what it measured."""
    from optkit import __version__
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request
    from optkit.resolve.tuned import RECORD_KIND, RECORD_VERSION, record_key
    from optkit.tune.bundle import load_tune
    from optkit.tune.results import best, read_trials

    data = load_tune(tune_dir)
    rows = read_trials(tune_dir, data)
    top = best(rows)
    if top is None:
        raise TuneError(f"{tune_dir}: no trial met the SLO {data['sweep']['slo']}: nothing measured to record")
    base = plan(parse_request(data["request"]), load_workspace())
    point = top.effective or top.params
    return {"kind": RECORD_KIND, "record_version": RECORD_VERSION, "optkit": __version__,
            "key": record_key(base.request, base.model.id, base.target.id, str(base.facts["versions.vllm_ascend"])),
            "best": {k: point[k] for k in sorted(point)},
            "measured": {"objective": round(top.objective, 3), "capacity": top.capacity,
                         "p99_tpot_ms": top.p99_tpot_ms, "measured_on": top.measured_on, "trial": top.number,
                         "trials": len(rows), "starts": sum(1 for r in rows if r.started)}}


def write_tune_record(tune_dir: Path, root: Path) -> Path:
    """Write the record under ``root``/verified/tunes/ (its name: its digest); an existing equal record is kept."""
    from optkit.resolve.tuned import NAME_DIGITS, TUNES_DIR, record_digest

    content = tune_record(tune_dir)
    folder = Path(root) / TUNES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record_digest(content)[:NAME_DIGITS]}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(content, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


__all__ = ["tune_record", "write_tune_record"]
