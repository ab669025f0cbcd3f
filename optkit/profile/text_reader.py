"""The text form of ``ASCEND_PROFILER_OUTPUT``: trace_view.json and the CSV files (docs/profile.md).

What is read (columns by header name, so their order may differ between releases):

- ``kernel_details.csv``: ``Name``, ``Type``, ``Start Time(us)``, ``Duration(us)`` (required),
  ``Stream ID``, ``Input Shapes``, ``Step Id`` (when present) - the device ops;
- ``trace_view.json`` (Chrome trace events, a list or ``{"traceEvents": [...]}``): ``process_name``
  metadata; complete events (``ph: X``) of the ``CANN`` process (host API calls), ``ProfilerStep#N``
  events (the steps), and the ``Ascend Hardware`` process's events as device ops when
  kernel_details.csv is absent (``tid`` is the stream, ``args["Task Type"]`` the type);
- ``op_statistic.csv``: ``OP Type``, ``Count`` (a cross-check of the ops read);
- ``step_trace_time.csv``: ``Step``, ``Computing``, ``Free`` (the profiler's own per-step summary).
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal, InvalidOperation
from pathlib import Path

from optkit.profile import ProfileError
from optkit.profile.trace import DeviceOp, HostCall, StepMark

KERNEL_COLUMNS = ("Name", "Type", "Start Time(us)", "Duration(us)")
HOST_PROCESS = "CANN"
DEVICE_PROCESS = "Ascend Hardware"
STEP_PREFIX = "ProfilerStep#"


def read_kernel_details(path: Path, origin: Decimal) -> list[DeviceOp]:
    """The ops of kernel_details.csv; start times relative to ``origin`` (absolute microseconds, as
    trace_view.json's: a float cannot hold an epoch in microseconds to the nanosecond)."""
    rows, header = _csv(path, KERNEL_COLUMNS)
    ops = []
    for line, row in rows:
        ops.append(DeviceOp(
            name=row["Name"].strip(), type=row["Type"].strip(), stream=row.get("Stream ID", "").strip(),
            start=float(_decimal(path, line, "Start Time(us)", row["Start Time(us)"]) - origin),
            dur=_number(path, line, "Duration(us)", row["Duration(us)"]),
            shapes=row.get("Input Shapes", "").strip(), step=(row.get("Step Id") or "").strip()))
    return ops


def read_op_statistic(path: Path) -> dict[str, int]:
    rows, _ = _csv(path, ("OP Type", "Count"))
    out: dict[str, int] = {}
    for line, row in rows:
        count = _number(path, line, "Count", row["Count"])
        out[row["OP Type"].strip()] = out.get(row["OP Type"].strip(), 0) + int(count)
    return out


def read_step_trace(path: Path) -> dict[str, dict[str, float]]:
    rows, header = _csv(path, ("Step", "Computing", "Free"))
    return {row["Step"].strip(): {k: _number(path, line, k, row[k]) for k in ("Computing", "Free")}
            for line, row in rows}


def read_trace_view(path: Path, with_device: bool):
    """Host calls, step marks, (``with_device``) device ops of trace_view.json, and the time origin
    (its first event's whole microsecond) every time is relative to."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); the file is "
                           "truncated or not a trace (re-export the capture)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ProfileError(f"{path}: not a Chrome trace (expected a list of events or {{\"traceEvents\": [...]}})")
    processes = {e.get("pid"): (e.get("args") or {}).get("name") for e in events
                 if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name"}
    calls, marks, ops = [], [], []
    origin = None
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        name = event.get("name")
        try:
            ts = Decimal(str(event["ts"]))
            origin = ts.to_integral_value(rounding="ROUND_FLOOR") if origin is None else origin
            start, dur = float(ts - origin), float(event.get("dur", 0))
        except (KeyError, TypeError, ValueError, InvalidOperation):
            raise ProfileError(f"{path}: event {index} ({name!r}): 'ts' and 'dur' must be numbers "
                               "(microseconds)") from None
        process = processes.get(event.get("pid"))
        if isinstance(name, str) and name.startswith(STEP_PREFIX):
            marks.append(StepMark(name[len(STEP_PREFIX):], start, start + dur))
        elif process == HOST_PROCESS:
            calls.append(HostCall(str(name), start, dur, str(event.get("tid", ""))))
        elif process == DEVICE_PROCESS and with_device:
            args = event.get("args") or {}
            ops.append(DeviceOp(str(name), str(args.get("Task Type", "")), str(event.get("tid", "")), start, dur))
    if not processes:
        raise ProfileError(f"{path}: no process_name metadata events: not an Ascend PyTorch Profiler trace "
                           "(it names the 'CANN' and 'Ascend Hardware' processes)")
    return calls, sorted(marks, key=lambda m: m.start), ops, origin or Decimal(0)


def _csv(path: Path, required: tuple[str, ...]):
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in (reader.fieldnames or [])]
            missing = [c for c in required if c not in header]
            if missing:
                raise ProfileError(f"{path}:1: no column {', '.join(repr(c) for c in missing)} in the header "
                                   f"(found: {', '.join(header) or 'nothing'}); not the profiler's {path.name}, or a "
                                   "format optkit was not checked against (docs/profile.md lists the columns)")
            reader.fieldnames = header
            rows = [(reader.line_num, row) for row in reader]
            f.seek(0)
            text = f.read()
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    if text and not text.endswith(("\n", "\r")):
        raise ProfileError(f"{path}:{rows[-1][0] if rows else 1}: the last line has no line end: the file is cut "
                           f"mid-line; copy the capture's {path.parent.name}/ again")
    for line, row in rows:
        found = sum(v is not None for k, v in row.items() if k is not None)
        if found != len(header) or None in row:
            raise ProfileError(f"{path}:{line}: this row has {found + len(row.get(None) or [])} fields where the "
                               f"header has {len(header)}: the file is cut (or corrupt) here; copy the capture's "
                               f"{path.parent.name}/ again")
    return rows, header


def _decimal(path: Path, line: int, column: str, text) -> Decimal:
    try:
        return Decimal(str(text).strip())
    except (TypeError, InvalidOperation):
        raise ProfileError(f"{path}:{line}: column {column!r} is {text!r}, not a number") from None


def _number(path: Path, line: int, column: str, text) -> float:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        raise ProfileError(f"{path}:{line}: column {column!r} is {text!r}, not a number") from None
