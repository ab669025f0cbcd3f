"""Cutting a rank's capture into steps and decomposing each one.

Steps come from the profiler's step marks (``ProfilerStep#N`` / ``STEP_TIME``; device ops by their
``Step Id`` when kernel_details.csv records one, else by start time) or, without marks (vllm-ascend's
profiler never calls the torch profiler's ``step()``, so its captures have none), from the
repetition of the model: among the op names that occur regularly (the same number of ops between
consecutive occurrences, within 10 %, for at least 80 % of them) the least frequent cuts the
timeline, and among those the one after the longest device idle (a step starts after the host's
turn: scheduling, input preparation); the ops before its first occurrence are a partial step and
dropped. A step longer than twice the median is a prefill
(or mixed) step; the others are decode steps.

Per step: wall time (window), device busy and free (free = no op on any stream), the host-side
gap before each op (the device idle from the last op's end to this op's start: the op waited for
its launch; less the time the host was blocked in a sync or a copy meanwhile), syncs (``AscendCL@aclrtSynchronize*`` calls and ``NonZero`` ops), blocking copies
(``AscendCL@aclrtMemcpy``: torch_npu's copy from pageable memory; asynchronous copies are
``aclrtMemcpyAsync``), the busy time of each stream and the time two or more streams overlap.
"""

from __future__ import annotations

import bisect
import re
import statistics
from dataclasses import dataclass, field

from optkit.profile.trace import DeviceOp, HostCall, RankTrace

SYNC_CALL = re.compile(r"AscendCL@aclrtSynchronize(Stream|Device|Event)\w*")
SYNC_OP_TYPE = re.compile(r"NonZero\w*")
BLOCKING_COPY = "AscendCL@aclrtMemcpy"
PREFILL_FACTOR = 2.0


def blocking(call: HostCall) -> bool:
    """A host call that blocks the host until the device (or the copy) is done: a sync, a pageable copy."""
    return call.name == BLOCKING_COPY or bool(SYNC_CALL.fullmatch(call.name))


@dataclass
class Step:
    """One step's window and what ran in it; ``gaps[i]`` is the host-side gap before ``ops[i]``."""

    id: str
    start: float
    end: float
    ops: list[DeviceOp] = field(default_factory=list)
    calls: list[HostCall] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    kind: str = "decode"

    @property
    def wall(self) -> float:
        return self.end - self.start

    @property
    def free(self) -> float:
        """Time no op runs on any stream (host gaps, blocked host calls, the tail after the last op)."""
        return self.wall - sum(b - a for a, b in _union([(max(o.start, self.start), min(o.end, self.end))
                                                           for o in self.ops if o.end > self.start]))

    @property
    def busy(self) -> float:
        return self.wall - self.free

    def occurrences(self) -> list[tuple[str, int]]:
        """(name, k): the k-th op of that name in the step (1-based), for every op in order."""
        seen: dict[str, int] = {}
        out = []
        for op in self.ops:
            seen[op.name] = seen.get(op.name, 0) + 1
            out.append((op.name, seen[op.name]))
        return out

    def syncs(self) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = {}
        for c in self.calls:
            if SYNC_CALL.fullmatch(c.name):
                n, us = out.get(c.name, (0, 0.0))
                out[c.name] = (n + 1, us + c.dur)
        for op, gap in zip(self.ops, self.gaps):
            if SYNC_OP_TYPE.fullmatch(op.type):
                key = f"{op.type} (op)"
                n, us = out.get(key, (0, 0.0))
                out[key] = (n + 1, us + op.dur + gap)
        return out

    def blocking_copies(self) -> tuple[int, float, float]:
        """Count, host time in them, and the device idle they cause (``stall``; a copy nothing waits for: 0)."""
        copies = [c for c in self.calls if c.name == BLOCKING_COPY]
        return len(copies), sum(c.dur for c in copies), sum((self.stall(c) or (0.0, []))[0] for c in copies)

    def stall(self, call: HostCall) -> tuple[float, list[int]] | None:
        """The device idle a blocking host call causes: the time no op runs from the call's start until
        the device runs the step's next op launched after it returns (sync ops, ``NonZero``, and the host
        syncs on them in between count as part of the stall), and the indexes of the ops whose launch
        gaps that covers; the stall ends where the next blocking copy starts. None when no op of the step follows the call: nothing on the device waits
        for it (a copy of the step's results back to the host, which itself waits for the device)."""
        after = [i for i, op in enumerate(self.ops) if op.start >= call.end]
        resume = next((i for i in after if not SYNC_OP_TYPE.fullmatch(self.ops[i].type)), None)
        if resume is None:
            return None
        # the next blocking copy's stall is its own
        end = min([self.ops[resume].start, *(c.start for c in self.calls if c.name == BLOCKING_COPY and c.start >= call.end
                                             and c is not call)])
        busy = _union([(max(o.start, call.start), min(o.end, end)) for o in self.ops if o.end > call.start and o.start < end])
        covered = [i for i in after if self.ops[i].start <= end]
        return max(0.0, end - call.start - sum(b - a for a, b in busy)), covered

    def streams(self) -> tuple[dict[str, float], float]:
        """Busy microseconds per stream, and the time two or more streams are busy at once."""
        by_stream: dict[str, list[tuple[float, float]]] = {}
        for op in self.ops:
            by_stream.setdefault(op.stream or "?", []).append((op.start, op.end))
        merged = {s: _union(iv) for s, iv in by_stream.items()}
        edges = sorted([(a, 1) for iv in merged.values() for a, _ in iv] + [(b, -1) for iv in merged.values() for _, b in iv])
        overlap, depth, last = 0.0, 0, None
        for at, delta in edges:
            if depth >= 2 and last is not None:
                overlap += at - last
            depth, last = depth + delta, at
        return {s: sum(b - a for a, b in iv) for s, iv in sorted(merged.items())}, overlap


def cut_steps(trace: RankTrace) -> tuple[list[Step], str]:
    """The steps of ``trace`` (prefill and decode marked) and how they were found, in words."""
    if trace.marks:
        steps, how = _by_marks(trace), "the profiler's step marks"
    else:
        steps, how = _by_repetition(trace)
    for step in steps:
        step.calls = [c for c in trace.calls if step.start <= c.start < step.end]
        step.gaps = _gaps(step)
    steps = [s for s in steps if s.ops]
    if steps:
        median = statistics.median(s.wall for s in steps)
        for s in steps:
            s.kind = "prefill" if s.wall > PREFILL_FACTOR * median else "decode"
    return steps, how


def _by_marks(trace: RankTrace) -> list[Step]:
    marks = trace.marks
    steps = [Step(m.id, m.start, marks[i + 1].start if i + 1 < len(marks) else m.end) for i, m in enumerate(marks)]
    by_id = {s.id: s for s in steps}
    if all(op.step for op in trace.ops) and all(op.step in by_id for op in trace.ops):
        for op in trace.ops:
            by_id[op.step].ops.append(op)
    else:
        starts = [s.start for s in steps]
        for op in trace.ops:
            at = bisect.bisect_right(starts, op.start) - 1
            if at >= 0 and op.start < steps[at].end:
                steps[at].ops.append(op)
    for s in steps:  # a step's device work may finish after the host moved on
        s.end = max([s.end, *(o.end for o in s.ops)])
    return steps


def _by_repetition(trace: RankTrace) -> tuple[list[Step], str]:
    ops = trace.ops
    positions: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        positions.setdefault(op.name, []).append(i)
    whole = Step("all", ops[0].start, max(o.end for o in ops), list(ops), list(trace.calls))
    idle = _gaps(whole)
    best, best_key = None, None
    for name, at in sorted(positions.items()):
        if len(at) < 3:
            continue
        lengths = [b - a for a, b in zip(at, at[1:])]
        median = statistics.median(lengths)
        regular = sum(abs(n - median) <= 0.1 * median for n in lengths) / len(lengths)
        # the fewest occurrences, then the longest idle before them: a step starts after the host's turn
        key = (len(at), -statistics.median(idle[i] for i in at), name)
        if median >= 2 and regular >= 0.8 and (best_key is None or key < best_key):
            best, best_key = name, key
    if best is None:
        step = Step("1", ops[0].start, max(o.end for o in ops), list(ops))
        return [step], "no step marks and no repeating op: the whole capture is one step"
    at = positions[best]
    frontier, ends = ops[0].start, []
    for op in ops:  # ends[i]: the device frees before op i (the step that op i opens starts there)
        ends.append(frontier)
        frontier = max(frontier, op.end)
    tail = max([frontier, *(c.end for c in trace.calls)])
    steps = []
    for k, (a, b) in enumerate(zip(at, at[1:] + [len(ops)])):
        start = ends[a] if a else ops[a].start
        end = ends[b] if b < len(ops) else tail
        steps.append(Step(str(k + 1), start, end, list(ops[a:b])))
    return steps, f"no step marks: cut before each {best!r}, the regular once-per-step op after the longest idle"


def _gaps(step: Step) -> list[float]:
    """The device idle before each op, less the time the host spent blocked meanwhile (in a sync or a
    blocking copy: reported as those, not as the op's launch)."""
    blocked = _union([(c.start, c.end) for c in step.calls if c.name == BLOCKING_COPY or SYNC_CALL.fullmatch(c.name)])
    frontier, out = step.start, []
    for op in step.ops:
        idle = max(0.0, op.start - frontier)
        if idle:
            idle -= sum(max(0.0, min(b, op.start) - max(a, frontier)) for a, b in blocked)
        out.append(max(0.0, idle))
        frontier = max(frontier, op.end)
    return out


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]
