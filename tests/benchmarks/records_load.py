"""Benchmark (not a test): what verified-on records add to planning, against the same plan without them.

    python tests/benchmarks/records_load.py [--records 1,10] [--repeat 20]

Two catalog copies, one with N records (each measuring every selected recipe of the no-MTP plan at
c1 and c4, so every record is checked against the catalog and every patch of those recipes is
hashed), timed in the same loop: ``load_workspace`` + ``plan``. Prints the median of each and their
ratio; the baseline is the copy without records.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from optkit.catalog.paths import project_root
from optkit.catalog.records import Record, patch_hashes, record_file
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

REQUEST = Request(model="qwen3.5-35b", target="910c", concurrency=[1, 4], input_len=32, output_len=8)


def copy_catalog(dest: Path) -> Path:
    for name in ("recipes", "models", "targets", "kernels"):
        shutil.copytree(project_root() / name, dest / name)
    return dest


def add_records(root: Path, count: int) -> None:
    workspace = load_workspace(root)
    selected = plan(REQUEST, workspace).selected
    (root / "verified").mkdir()
    for n in range(count):
        entry = lambda rid: {"step": f"{n:02d}-{rid}", "patches": patch_hashes(workspace.catalog, rid),  # noqa: E731
                             "tpot_delta_ms": {1: -0.1 - n / 100, 4: -0.1}, "noise_ms": {1: 0.01, 4: 0.01},
                             "verdict": {1: "gain", 4: "gain"}, "reference_tpot_ms": {1: 20.0, 4: 26.0}, "repeats": 2}
        record = Record.model_validate({
            "record_version": 1, "target": "910c", "model": "qwen3.5-35b-a3b",
            "release": {"vllm_ascend": "0.23.0", "vllm": "0.23.0"}, "tree_digest": "ab" * 32,
            "host": {"npu": "910C", "target": "910c"},
            "workload": {"concurrency": [1, 4], "input_len": 32, "output_len": 8, "mtp": False,
                         "num_speculative_tokens": 0, "tp": 2, "dp": 1, "ep": True, "sampling": "greedy",
                         "min_tokens": True},
            "ladder": "incremental", "accuracy_gate": "passed", "recipes": {rid: entry(rid) for rid in selected},
            "results": {f"r{n}/c1.json": "cd" * 32}})
        name, text = record_file(record)
        (root / "verified" / name).write_text(text)


def timed(root: Path) -> float:
    start = time.perf_counter()
    plan(REQUEST, load_workspace(root))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", default="1,10")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = copy_catalog(Path(tmp) / "without")
        for count in (int(n) for n in args.records.split(",")):
            measured = copy_catalog(Path(tmp) / f"with-{count}")
            add_records(measured, count)
            without, with_ = [], []
            for _ in range(args.repeat):  # interleaved: the same machine state for both
                without.append(timed(base))
                with_.append(timed(measured))
            a, b = statistics.median(without), statistics.median(with_)
            print(f"{count:>3} record(s): plan without {a * 1000:.1f} ms, with {b * 1000:.1f} ms, ratio {b / a:.2f}")


if __name__ == "__main__":
    main()
