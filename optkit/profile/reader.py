"""One rank folder read into a ``RankTrace``: the text form when it is there, else the database form."""

from __future__ import annotations

import json
from pathlib import Path

from optkit.profile import ProfileError
from optkit.profile.db_reader import DB_NAME, read_db
from optkit.profile.locate import RankFolder
from optkit.profile.text_reader import read_kernel_details, read_op_statistic, read_step_trace, read_trace_view
from optkit.profile.trace import RankTrace

VERSION_KEYS = ("torch_npu_version", "cann_version", "vllm_ascend_version")


def read_rank(entry: RankFolder) -> RankTrace:
    out = entry.output
    trace = RankTrace(entry.rank, entry.folder.name, entry.started, "text", versions=_versions(entry.folder))
    kernels, view = out / "kernel_details.csv", out / "trace_view.json"
    dbs = sorted(p for p in out.iterdir() if DB_NAME.match(p.name))
    if kernels.is_file() or view.is_file():
        if not view.is_file():
            raise ProfileError(f"{out}: kernel_details.csv without trace_view.json: the host calls and steps are in "
                               "trace_view.json (capture with the default export_type text, or give the .db form)")
        trace.calls, trace.marks, device, origin = read_trace_view(view, with_device=not kernels.is_file())
        trace.ops = read_kernel_details(kernels, origin) if kernels.is_file() else device
        if (out / "op_statistic.csv").is_file():
            trace.op_statistic = read_op_statistic(out / "op_statistic.csv")
        if (out / "step_trace_time.csv").is_file():
            trace.step_trace = read_step_trace(out / "step_trace_time.csv")
    elif dbs:
        trace.form = "db"
        trace.ops, trace.calls, trace.marks = read_db(dbs[0])
    else:
        raise ProfileError(f"{out}: holds neither trace_view.json / kernel_details.csv nor an "
                           "ascend_pytorch_profiler*.db; the export is incomplete (docs/profile.md)")
    if not trace.ops:
        raise ProfileError(f"{out}: no device ops in the {trace.form} form: the capture recorded no NPU activity "
                           "(profile with activities CPU and NPU, and send requests between /start_profile and "
                           "/stop_profile)")
    if kernels.is_file() and trace.op_statistic:
        _same_counts(out, trace)
    trace.ops.sort(key=lambda o: (o.start, o.end, o.name))
    trace.calls.sort(key=lambda c: (c.start, c.end, c.name))
    return trace


def _same_counts(out: Path, trace: RankTrace) -> None:
    """kernel_details.csv and op_statistic.csv describe the same ops: a cut or mixed copy is refused."""
    read: dict[str, int] = {}
    for op in trace.ops:
        read[op.type] = read.get(op.type, 0) + 1
    differ = [(t, read.get(t, 0), trace.op_statistic.get(t, 0))
              for t in sorted(set(read) | set(trace.op_statistic)) if read.get(t, 0) != trace.op_statistic.get(t, 0)]
    if differ:
        shown = ", ".join(f"{t} {n} vs {m}" for t, n, m in differ[:5]) + (f" and {len(differ) - 5} more"
                                                                          if len(differ) > 5 else "")
        raise ProfileError(f"{out / 'kernel_details.csv'}: {len(trace.ops)} ops, but op_statistic.csv counts "
                           f"{sum(trace.op_statistic.values())}; the files disagree on {len(differ)} op "
                           f"type{'s' if len(differ) > 1 else ''} ({shown}): one of them is cut or from another "
                           "capture; copy the capture's ASCEND_PROFILER_OUTPUT/ again")


def _versions(folder: Path) -> dict[str, str]:
    """torch_npu, CANN and (when the capture records it: torch_npu's ``add_metadata``) vllm-ascend versions,
    from the profiler_info*.json / profiler_metadata.json that record them."""
    found: dict[str, str] = {}
    for path in sorted(folder.glob("profiler_info*.json")) + [folder / "profiler_metadata.json"]:
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ProfileError(f"{path}: not valid JSON; the capture's metadata is broken") from None
        if isinstance(data, dict):
            found.update({k: str(data[k]) for k in VERSION_KEYS if k in data and k not in found})
    return found
