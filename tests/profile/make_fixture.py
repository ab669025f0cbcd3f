"""Write an Ascend PyTorch Profiler capture of Qwen3.5-35B-A3B decode steps, with chosen signatures injected.

The files follow the formats optkit and msprof-analyze read (docs/profile.md lists the columns and
events): a ``{host}_{pid}_{stamp}_ascend_pt`` folder per rank with ``profiler_info_{rank}.json``
and ``ASCEND_PROFILER_OUTPUT/`` holding ``trace_view.json``, ``kernel_details.csv``,
``op_statistic.csv`` and ``step_trace_time.csv`` (text form), or ``ascend_pytorch_profiler_{rank}.db``
(database form). Every step is the model's 40 layers (30 Gated DeltaNet, 10 full attention, one in
four) and a sampler; the first step is a prefill. Durations are chosen, not measured: each injected
signature's cost per decode step is known exactly (``INJECTED``), which is what the tests check
optkit's estimates against.

    python tests/profile/make_fixture.py            # rewrites tests/profile/fixtures/one-rank
    python -c 'import make_fixture; make_fixture.write_all()'   # (in tests/profile) every committed fixture
    python tests/profile/make_fixture.py OUT --ranks 2 --clean --db --marks --steps 5

Like vllm-ascend's own captures (its profiler never steps the torch profiler) the default has no
``ProfilerStep`` marks and no ``Step Id`` column: optkit finds the steps by the model's repetition.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import sqlite3
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "fixtures" / "one-rank"
LAYERS, VOCAB, EPOCH_US = 40, 248320, 1764633600_000000  # 2025-12-02 00:00 UTC, in microseconds
STAMP = "20251202000000000"

# per decode step, in µs: what each injected signature costs (device time + the gap before each op,
# or the blocking host call's duration), the numbers optkit's savings must come within 10 % of
INJECTED = {
    "blocktable-slot-mapping-cpu-fastpath": 131.0,  # one launch-bound _compute_slot_mapping_kernel
    "gdn-conv-weight-transpose-cache": 30 * 4.3,  # a TransposeD per GDN layer
    "gdn-l2norm-fused-recurrent-kernel": 60 * 5.0,  # two l2norm_fwd per GDN layer
    "gdn-rearrange-qkv-view": 30 * 4.1,  # a ConcatD per GDN layer
    "sampler-greedy-bf16-fastpath": 10.0,  # one full-vocabulary Cast
    "sampler-min-tokens-spec-mask-cache": 2 * 800.0,  # two blocking copies from pageable memory
}
STALLING = 2 * (13.5 + 60.0 + 20.0)  # the stalling-copies variant's MinTokens cost: device idle, not 2 × 13.5 µs
RESULT_COPY = 9700.0  # the result-copy variant: a step-end D2H aclrtMemcpy waiting for the device
UNEXPLAINED_GAP = ("AddRmsNorm", 21, 250.0)  # a host gap before layer 20's first op that no recipe explains


class Timeline:
    """Ops and host calls of one rank, laid out in time (µs after EPOCH_US)."""

    def __init__(self, scale: float):
        self.now, self.scale = 0.0, scale
        self.ops: list[dict] = []
        self.calls: list[dict] = []
        self.marks: list[tuple[str, float, float]] = []
        self.step = ""

    def op(self, name, type_, dur, gap=1.0, stream=2, shapes="1,2048", side=False):
        """An op ``gap`` µs after the device frees (``side``: on another stream, alongside the last op)."""
        if side:
            last = self.ops[-1]
            start = last["start"] + 0.5
            self.ops.append(dict(name=name, type=type_, start=start, dur=dur * self.scale, stream=stream,
                                 shapes=shapes, step=self.step))
            return
        start = self.now + gap
        self.ops.append(dict(name=name, type=type_, start=start, dur=dur * self.scale, stream=stream, shapes=shapes,
                             step=self.step))
        self.now = start + dur * self.scale

    def call(self, name, dur):
        """A host call starting now; a blocking one keeps the device idle until it returns."""
        self.calls.append(dict(name=name, start=self.now, dur=dur))
        self.now += dur


def build(inject: set[str], steps: int, scale: float, gap: bool, copies: str = "pageable") -> Timeline:
    """``copies``: how the MinTokens mask copies look (when injected): ``pageable`` two blocking 800 µs copies
    with the device idle meanwhile; ``stalling`` two 13.5 µs copies, each followed by a NonZero and the host's
    sync on it (93.5 µs of device idle each); ``result`` none, but every step ends in a blocking D2H copy of
    the step's results that waits for the device (the host has launched everything: ops back to back)."""
    t = Timeline(scale)
    for number in range(1, steps + 1):
        prefill = number == 1
        t.step, begin = str(number), t.now
        t.scale = scale * (8.0 if prefill else 1.0)
        t.call("AscendCL@aclrtMemcpyAsync", 5.0)
        t.op("TensorMove", "TensorMove", 2.0, gap=30.0)
        if "blocktable-slot-mapping-cpu-fastpath" in inject:
            t.op("_compute_slot_mapping_kernel", "_compute_slot_mapping_kernel", 3.0 / t.scale, gap=128.0)
        norms = 0
        for layer in range(LAYERS):
            norms += 1
            before = UNEXPLAINED_GAP[2] if gap and not prefill and norms == UNEXPLAINED_GAP[1] else 1.0
            t.op("AddRmsNorm", "AddRmsNorm", 3.0, gap=before)
            t.op("MatMulV2", "MatMulV2", 8.0, shapes="1,2048;2048,8192")
            if layer % 4 != 3:  # Gated DeltaNet
                if "gdn-conv-weight-transpose-cache" in inject:
                    t.op("aclnnPermute_TransposeD_TransposeD", "TransposeD", 1.3 / t.scale, gap=3.0)
                t.op("CausalConv1d", "CausalConv1d", 4.0)
                if "gdn-rearrange-qkv-view" in inject:
                    t.op("aclnnCat_ConcatD_ConcatD", "ConcatD", 2.1 / t.scale, gap=2.0)
                if "gdn-l2norm-fused-recurrent-kernel" in inject:
                    for _ in range(2):
                        t.op("l2norm_fwd_kernel2_loop", "l2norm_fwd_kernel2_loop", 3.0 / t.scale, gap=2.0)
                t.op("RecurrentGatedDeltaRule", "RecurrentGatedDeltaRule", 10.0)
            else:
                t.op("FusedInferAttentionScore", "FusedInferAttentionScore", 12.0)
            t.op("GroupedMatmul", "GroupedMatmul", 20.0)
            t.op("MatMulV2", "MatMulV2", 6.0, stream=3, side=True)  # the shared expert, on its side stream
        t.op("MatMulV2", "MatMulV2", 30.0, shapes=f"1,2048;{VOCAB // 2},2048")  # lm_head shard
        if "sampler-min-tokens-spec-mask-cache" in inject and copies == "pageable":
            for _ in range(2):
                t.call("AscendCL@aclrtMemcpy", 800.0)
        if "sampler-min-tokens-spec-mask-cache" in inject and copies == "stalling":
            for _ in range(2):  # a small pageable copy, then a NonZero the host syncs on
                t.call("AscendCL@aclrtMemcpy", 13.5)
                t.op("aclnnNonzero_NonZero_NonZero", "NonZero", 4.0, gap=60.0)
                t.call("AscendCL@aclrtSynchronizeStream", 20.0)
            t.op("aclnnIndexPutImpl_IndexPutV2_IndexPutV2", "IndexPutV2", 3.0, gap=0.0)
        if "sampler-greedy-bf16-fastpath" in inject:
            t.op("aclnnCast_Cast_Cast", "Cast", 9.0 / t.scale, gap=1.0, shapes=f"1,{VOCAB}")
        t.op("ArgMaxV2", "ArgMaxV2", 4.0, shapes=f"1,{VOCAB}")
        if copies == "result" and not prefill:  # the host waits in the copy for the device to finish
            t.calls.append(dict(name="AscendCL@aclrtMemcpy", start=t.now + 5.0 - RESULT_COPY, dur=RESULT_COPY))
            t.now += 5.0
        else:
            t.call("AscendCL@aclrtSynchronizeStream", 6.0)
        t.now += 20.0  # the scheduler's turn
        t.marks.append((str(number), begin, t.now))
    return t


def _ts(us: float) -> str:
    return f"{EPOCH_US + round(us * 1000) / 1000:.3f}"


def trace_view(t: Timeline, marks: bool) -> str:
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Python"}},
              {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "CANN"}},
              {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "Ascend Hardware"}}]
    events += [{"ph": "M", "name": "thread_name", "pid": 3, "tid": s, "args": {"name": f"Stream {s}"}} for s in (2, 3)]
    if marks:
        events += [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": _ts(a),
                    "dur": round(b - a, 3), "args": {}} for n, a, b in t.marks]
    events += [{"ph": "X", "name": c["name"], "pid": 2, "tid": 1, "ts": _ts(c["start"]), "dur": round(c["dur"], 3),
                "args": {}} for c in t.calls]
    events += [{"ph": "X", "name": o["name"], "pid": 3, "tid": o["stream"], "ts": _ts(o["start"]),
                "dur": round(o["dur"], 3), "args": {"Task Type": _task_type(o)}} for o in t.ops]
    events += [{"ph": "M", "name": "process_name", "pid": 4, "args": {"name": "Overlap Analysis"}}]
    events += [{"ph": "M", "name": "thread_name", "pid": 4, "tid": tid, "args": {"name": name}}
               for tid, name in ((0, "Computing"), (3, "Free"))]
    events += [{"ph": "X", "name": name, "pid": 4, "tid": tid, "ts": _ts(a), "dur": round(b - a, 3), "args": {}}
               for name, tid, a, b in _overlap(t)]
    return "[\n" + ",\n".join(json.dumps(e, separators=(",", ":"), sort_keys=True) for e in events) + "\n]\n"


def _overlap(t: Timeline):
    """The profiler's 'Overlap Analysis' bar: merged device busy ('Computing') and the idle between ('Free')."""
    busy: list[list[float]] = []
    for a, b in sorted((o["start"], o["start"] + o["dur"]) for o in t.ops):
        if busy and a <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], b)
        else:
            busy.append([a, b])
    out = [("Computing", 0, a, b) for a, b in busy]
    out += [("Free", 3, x[1], y[0]) for x, y in zip(busy, busy[1:])]
    return sorted(out, key=lambda e: (e[2], e[1]))


def _task_type(op) -> str:
    return "AI_VECTOR_CORE" if op["type"] not in ("MatMulV2", "GroupedMatmul", "FusedInferAttentionScore") else "AI_CORE"


def _csv_text(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def kernel_details(t: Timeline, marks: bool) -> str:
    header = (["Step Id"] if marks else []) + ["Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
                                               "Accelerator Core", "Start Time(us)", "Duration(us)",
                                               "Wait Time(us)", "Block Dim", "Input Shapes"]
    rows, last_end = [], None
    for i, o in enumerate(t.ops):
        wait = 0.0 if last_end is None else max(0.0, o["start"] - last_end)
        last_end = o["start"] + o["dur"]
        rows.append(([o["step"]] if marks else []) + [4294967295, i % 65536, o["stream"], o["name"], o["type"],
                                                      "dynamic", _task_type(o), _ts(o["start"]),
                                                      f"{o['dur']:.3f}", f"{wait:.3f}", 24, o["shapes"]])
    return _csv_text(header, rows)


def op_statistic(t: Timeline) -> str:
    stats: dict[tuple[str, str], list[float]] = {}
    for o in t.ops:
        stats.setdefault((o["type"], _task_type(o)), []).append(o["dur"])
    total = sum(o["dur"] for o in t.ops)
    rows = [[k[0], k[1], len(v), f"{sum(v):.3f}", f"{min(v):.3f}", f"{sum(v) / len(v):.3f}", f"{max(v):.3f}",
             f"{100 * sum(v) / total:.2f}"] for k, v in sorted(stats.items(), key=lambda kv: -sum(kv[1]))]
    return _csv_text(["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                      "Max Time(us)", "Ratio(%)"], rows)


def step_trace_time(t: Timeline, marks: bool) -> str:
    """One row per step with marks; without, one row for the whole capture (an empty Step)."""
    rows = []
    spans = t.marks if marks else [("", t.marks[0][1], t.marks[-1][2])]
    for n, a, b in spans:
        ops = [o for o in t.ops if o["step"] == n or not marks]
        computing = sum(o["dur"] for o in ops if o["stream"] == 2)
        rows.append([n, f"{computing:.3f}", "0.000", "0.000", "0.000", f"{b - a - computing:.3f}", f"{b - a:.3f}",
                     "0.000", "0.000", "0.000"])
    return _csv_text(["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
                      "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"], rows)


def write_db(path: Path, t: Timeline, marks: bool) -> None:
    """The database form: the tables and columns msprof-analyze's readers query (docs/profile.md)."""
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings))

    con.executescript("""
        CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
            globalTaskId INTEGER PRIMARY KEY, globalPid INTEGER, taskType INTEGER, contextId INTEGER,
            streamId INTEGER, taskId INTEGER, modelId INTEGER);
        CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER,
            mixBlockDim INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER,
            inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER,
            attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER);
        CREATE TABLE CANN_API (startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER,
            connectionId INTEGER PRIMARY KEY, name INTEGER);
        CREATE TABLE ENUM_API_TYPE (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
        CREATE TABLE META_DATA (name TEXT, value TEXT);
    """)
    ns = lambda us: EPOCH_US * 1000 + round(us * 1000)  # noqa: E731
    con.executemany("INSERT INTO ENUM_API_TYPE VALUES (?, ?)", [(20000, "acl"), (15000, "node"), (10000, "runtime")])
    for i, o in enumerate(t.ops):
        con.execute("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (ns(o["start"]), ns(o["start"] + o["dur"]), 0, i, i, 1, sid(_task_type(o)), 0, o["stream"],
                     i % 65536, 4294967295))
        con.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (sid(o["name"]), i, 24, 0, sid(_task_type(o)), sid(o["type"]), sid("ND"), sid("DT_BF16"),
                     sid(o["shapes"]), sid("ND"), sid("DT_BF16"), sid(o["shapes"]), sid(""), sid("dynamic"), 0))
    for j, c in enumerate(t.calls):
        con.execute("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)",
                    (ns(c["start"]), ns(c["start"] + c["dur"]), 20000, 1, 1_000_000 + j, sid(c["name"])))
    if marks:
        con.executemany("INSERT INTO STEP_TIME VALUES (?,?,?)", [(int(n), ns(a), ns(b)) for n, a, b in t.marks])
    con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(v, k) for k, v in strings.items()])
    con.commit()
    con.close()


def write(out: Path, ranks: int = 1, inject: set[str] | None = None, steps: int = 3, db: bool = False,
          marks: bool = False, gap: bool = True, copies: str = "pageable", release: str | None = "0.23.0",
          cut: int | None = None) -> list[Path]:
    """Write the capture into ``out`` (replaced); returns the rank folders. ``copies``: see ``build`` (the
    ``result`` variant runs the model 5.75 times slower, so that a decode step takes ~10.65 ms);
    ``release``: the vllm-ascend release profiler_metadata.json records (None: no such file); ``cut``:
    kernel_details.csv keeps only its first ``cut`` lines, as ``head -n`` leaves a partial copy."""
    inject = set(INJECTED) if inject is None else inject
    base = 5.75 if copies == "result" else 1.0
    if out.exists():
        shutil.rmtree(out)
    folders = []
    for rank in range(ranks):
        t = build(inject, steps, base + 0.02 * rank, gap, copies)
        folder = out / f"dp0_pp0_tp{rank}_dcp0_ep{rank}_rank{rank}_{STAMP}_ascend_pt"  # vllm-ascend's worker name
        data = folder / "ASCEND_PROFILER_OUTPUT"
        data.mkdir(parents=True)
        info = {"config": {"common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                                             "schedule": {}}, "experimental_config": {"export_type": ["db" if db else "text"]}},
                "rank_id": rank, "torch_npu_version": "2.10.0.post4", "cann_version": "9.1.0"}  # 0.23.0's pins
        (folder / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        if release is not None:  # what torch_npu's prof.add_metadata writes, here the release that served
            (folder / "profiler_metadata.json").write_text(json.dumps({"vllm_ascend_version": release}) + "\n")
        if db:
            write_db(data / f"ascend_pytorch_profiler_{rank}.db", t, marks)
        else:
            (data / "trace_view.json").write_text(trace_view(t, marks))
            lines = kernel_details(t, marks).splitlines(keepends=True)
            (data / "kernel_details.csv").write_text("".join(lines[:cut] if cut else lines))
            (data / "op_statistic.csv").write_text(op_statistic(t))
            (data / "step_trace_time.csv").write_text(step_trace_time(t, marks))
        folders.append(folder)
    return folders


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3, help="steps, the first a prefill (default 3)")
    parser.add_argument("--clean", action="store_true", help="inject no signature")
    parser.add_argument("--db", action="store_true", help="the database form instead of the text form")
    parser.add_argument("--marks", action="store_true", help="ProfilerStep marks and Step Id (vllm-ascend writes none)")
    parser.add_argument("--copies", choices=("pageable", "stalling", "result"), default="pageable",
                        help="the MinTokens mask copies' form, or a step-end result copy instead (see build)")
    parser.add_argument("--cut", type=int, help="keep the first N lines of kernel_details.csv (head -n N)")
    args = parser.parse_args(argv)
    write(args.out, args.ranks, set() if args.clean else None, args.steps, args.db, args.marks,
          copies=args.copies, cut=args.cut)


VARIANTS = {  # the committed fixtures besides one-rank: folder → write()'s arguments
    "stalling-copies": dict(copies="stalling"),
    "result-copy": dict(inject=set(), copies="result", gap=False),
    "cut-kernel-details": dict(cut=500),
}


def write_all() -> None:
    """Every committed fixture: one-rank and the VARIANTS."""
    write(DEFAULT_OUT)
    for name, kwargs in VARIANTS.items():
        write(HERE / "fixtures" / name, **kwargs)


if __name__ == "__main__":
    main()
