"""One rank's capture in the normalized form every reader produces (times in microseconds)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceOp:
    """One task on the device: a row of kernel_details.csv (or an ``Ascend Hardware`` event)."""

    name: str
    type: str
    stream: str
    start: float
    dur: float
    shapes: str = ""
    step: str = ""  # the profiler's step id, when it records one

    @property
    def end(self) -> float:
        return self.start + self.dur


@dataclass(frozen=True)
class HostCall:
    """One host API call (a ``CANN`` event of trace_view.json: ``AscendCL@…``, ``HostToDevice…``)."""

    name: str
    start: float
    dur: float
    thread: str = ""

    @property
    def end(self) -> float:
        return self.start + self.dur


@dataclass(frozen=True)
class StepMark:
    """A profiler step: ``ProfilerStep#N`` (trace_view.json) or a ``STEP_TIME`` row (the .db)."""

    id: str
    start: float
    end: float


@dataclass
class RankTrace:
    """What optkit reads of one rank: device ops, host calls, step marks, and where they came from."""

    rank: int
    folder: str  # the *_ascend_pt folder's name
    started: str  # the capture's date (YYYY-MM-DD HH:MM), from the folder name
    form: str  # "text" or "db"
    ops: list[DeviceOp] = field(default_factory=list)
    calls: list[HostCall] = field(default_factory=list)
    marks: list[StepMark] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # torch_npu / CANN, from profiler_metadata.json
    op_statistic: dict[str, int] = field(default_factory=dict)  # OP Type -> Count, to cross-check the ops read
    step_trace: dict[str, dict[str, float]] = field(default_factory=dict)  # step_trace_time.csv: Step -> Computing, Free
