"""The database form of ``ASCEND_PROFILER_OUTPUT``: ``ascend_pytorch_profiler[_{rank}].db`` (SQLite).

Tables and columns read (the ones msprof-analyze's own readers query; names are ``STRING_IDS`` ids):
``COMPUTE_TASK_INFO`` (``name``, ``opType``, ``inputShapes``, ``globalTaskId``) joined with ``TASK``
(``globalTaskId``, ``startNs``, ``endNs``, ``streamId``) - the device ops; ``CANN_API`` (``name``,
``startNs``, ``endNs``, ``globalTid``) - the host calls; ``STEP_TIME`` (``id``, ``startNs``,
``endNs``, when present) - the steps; ``STRING_IDS`` (``id``, ``value``).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from optkit.profile import ProfileError
from optkit.profile.trace import DeviceOp, HostCall, StepMark

DB_NAME = re.compile(r"^ascend_pytorch_profiler(?:_\d+)?\.db$")
_OPS = """
SELECT n.value, t_.value, s.value, task.startNs, task.endNs, task.streamId
FROM COMPUTE_TASK_INFO AS c
JOIN TASK AS task ON task.globalTaskId = c.globalTaskId
LEFT JOIN STRING_IDS AS n ON n.id = c.name
LEFT JOIN STRING_IDS AS t_ ON t_.id = c.opType
LEFT JOIN STRING_IDS AS s ON s.id = c.inputShapes
ORDER BY task.startNs, task.globalTaskId
"""
_CALLS = """
SELECT n.value, api.startNs, api.endNs, api.globalTid
FROM CANN_API AS api LEFT JOIN STRING_IDS AS n ON n.id = api.name
ORDER BY api.startNs
"""
_STEPS = "SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs"
REQUIRED = ("STRING_IDS", "TASK", "COMPUTE_TASK_INFO", "CANN_API")


def read_db(path: Path) -> tuple[list[DeviceOp], list[HostCall], list[StepMark]]:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            missing = [t for t in REQUIRED if t not in tables]
            if missing:
                raise ProfileError(f"{path}: no table {', '.join(missing)}: not an Ascend PyTorch Profiler database, "
                                   "or one exported without them (docs/profile.md lists what optkit reads)")
            rows = con.execute(_OPS).fetchall()
            calls = con.execute(_CALLS).fetchall()
            marks = con.execute(_STEPS).fetchall() if "STEP_TIME" in tables else []
            # integer nanoseconds since the epoch: relative to the first one before they become floats
            origin = min([r[3] for r in rows] + [r[1] for r in calls] + [r[1] for r in marks] or [0]) // 1000 * 1000
            ops = [DeviceOp(str(n or ""), str(t or ""), str(stream), (a - origin) / 1000.0, (b - a) / 1000.0, str(s or ""))
                   for n, t, s, a, b, stream in rows]
            calls = [HostCall(str(n or ""), (a - origin) / 1000.0, (b - a) / 1000.0, str(tid)) for n, a, b, tid in calls]
            marks = [StepMark(str(i), (a - origin) / 1000.0, (b - origin) / 1000.0) for i, a, b in marks]
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise ProfileError(f"{path}: cannot read the database: {exc}") from None
    return ops, calls, marks
