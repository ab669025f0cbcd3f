"""Benchmark (not a test): ``optkit bundle check`` of the flagship bundle, as a ratio to the start-up of
the paired vLLM's own parser.

    python tests/benchmarks/bundle_check.py [--pairs 5] [--vllm-python PY]

The baseline is ``PY -c 'import vllm.entrypoints.openai.cli_args'`` (``vllm.entrypoints.launchers.cli_args``
from vLLM 0.30 on: the module whose ``make_arg_parser`` builds ``vllm serve``'s parser), in the Python the
check runs its probe in (``--vllm-python``, default this one). The bundle is written once by ``optkit plan
qwen3.5-35b --target 910c --mtp -o DIR``; the check runs as a user runs it (``python -m optkit bundle check
DIR``, output to /dev/null) right after a run of the baseline, so both see the same machine load; the
ratio is the median of the per-pair ratios, and it is the last line. Load still moves it: the load
average is printed with the figures.

What is held fixed: this checkout is what runs (PYTHONPATH); the vllm-ascend tree comes from the usual
optkit cache (fetched by the warm-up run if missing); every child compiles its modules once into a
temporary ``PYTHONPYCACHEPREFIX`` and reuses them (see startup.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAN = ["plan", "qwen3.5-35b", "--target", "910c", "--mtp"]
PARSER_IMPORT = ("try:\n    import vllm.entrypoints.openai.cli_args\n"
                 "except ModuleNotFoundError:\n    import vllm.entrypoints.launchers.cli_args\n")


def run(argv: list[str], env: dict) -> float:
    """Wall time of one run, in seconds; a failing command stops the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return elapsed


def measure(pairs: int, vllm_python: str) -> None:
    with tempfile.TemporaryDirectory(prefix="optkit-bundle-check-") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        bundle = Path(tmp) / "bundle"
        run([sys.executable, "-m", "optkit", *PLAN, "-o", str(bundle)], env)
        check = [sys.executable, "-m", "optkit", "bundle", "check", str(bundle), "--vllm-python", vllm_python]
        baseline = [vllm_python, "-c", PARSER_IMPORT]
        for _ in range(2):  # warm-up: bytecode, the cached tree, page cache
            run(baseline, env)
            run(check, env)
        floors, times = [], []
        for _ in range(pairs):
            floors.append(run(baseline, env))
            times.append(run(check, env))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{pairs} pairs, {os.cpu_count()} CPUs, load average {load} (1, 5, 15 min)")
    print(f"  {'vllm serve parser import (baseline)':<40} median {statistics.median(floors):.2f} s")
    print(f"  {'optkit bundle check (flagship)':<40} median {statistics.median(times):.2f} s")
    ratio = statistics.median(t / f for t, f in zip(times, floors))
    print(f"optkit bundle check / vllm serve parser import, median of {pairs} per-pair ratios: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="baseline/check pairs (at least 3)")
    parser.add_argument("--vllm-python", default=sys.executable,
                        help="the Python with the vLLM the flagship's release pairs with (default: this one)")
    args = parser.parse_args()
    if args.pairs < 3:
        parser.error("--pairs must be at least 3")
    measure(args.pairs, args.vllm_python)


if __name__ == "__main__":
    main()
