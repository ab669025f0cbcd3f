"""Benchmark (not a test): start-up time of optkit commands, as a ratio to the import floor.

    python tests/benchmarks/startup.py [--pairs 11]

The import floor is ``python -c 'import pydantic, click, yaml'``. Each command is run as a user
runs it (``python -m optkit …``, output to /dev/null) right after a run of the floor, so both
see the same machine load; a command's ratio is the median of its per-pair ratios (the pairs
absorb load changes that medians of separate series would not). The last two lines are the ratios
of ``optkit plan qwen3.5-35b --target 910c --mtp``: to the import floor, and to ``python -c 'import
click'`` (the least any click command costs), from pairs of its own in the same loop. Load still moves the ratio (on the 2-core
development machine it came out lower while other test suites ran), so the load average is
printed with the figures: compare runs at similar load.

What is held fixed, so that runs compare:
- this checkout is what runs (PYTHONPATH), not an installed copy;
- the catalog cache lives in a fresh temporary ``OPTKIT_CACHE_DIR``, warmed by the warm-up runs
  (``plan, cold cache`` gets a new empty one every run);
- bytecode: every child compiles its modules once into a temporary ``PYTHONPYCACHEPREFIX`` and
  reuses them, as an installed package does, even where ``PYTHONDONTWRITEBYTECODE`` is set
  (else a checkout without ``__pycache__`` recompiles optkit on every run, and the floor does not).
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
FLOOR = ["-c", "import pydantic, click, yaml"]
CLICK = ["-c", "import click"]
CLICK_LABEL = "python -c 'import click'"
PLAN = ["plan", "qwen3.5-35b", "--target", "910c", "--mtp"]
PLAN_LABEL = "optkit " + " ".join(PLAN)
# What a warm plan cannot go below: the libraries it imports (pydantic-core for the request's
# validator, packaging.version for the versions; no pydantic models, no YAML, no rich).
LIBRARIES = "import click, pydantic_core, packaging.version"


def commands(tree: Path) -> list[tuple[str, list[str], dict]]:
    """(label, python arguments, extra environment) of every command timed."""
    optkit = ["-m", "optkit"]
    cold = {"OPTKIT_CACHE_DIR": None}  # a new empty cache dir per run, see run()
    return [
        ("(libraries as plan imports them)", ["-c", LIBRARIES], {}),
        ("optkit --help", optkit + ["--help"], {}),
        ("optkit status --tree T", optkit + ["status", "--tree", str(tree)], {}),
        ("optkit recipes", optkit + ["recipes"], {}),
        ("optkit plan (cold cache)", optkit + PLAN, cold),
        (PLAN_LABEL, optkit + PLAN, {}),
    ]


def fake_tree(where: Path) -> Path:
    """The smallest directory `optkit status` accepts as a vllm-ascend tree (nothing applied)."""
    package = where / "tree" / "vllm_ascend"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_version.py").write_text('__version__ = "0.23.0"\n')
    return package.parent


def base_env(scratch: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["OPTKIT_CACHE_DIR"] = str(scratch / "cache")
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run(args: list[str], env: dict, extra: dict, scratch: Path) -> float:
    """Wall time of one run, in seconds; a failing command stops the benchmark."""
    env = dict(env)
    for key, value in extra.items():
        env[key] = value if value is not None else tempfile.mkdtemp(dir=scratch)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, cwd=scratch, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed (exit {done.returncode}):\n{done.stderr}")
    return elapsed


def measure(pairs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="optkit-startup-") as tmp:
        scratch = Path(tmp)
        env = base_env(scratch)
        timed = commands(fake_tree(scratch))
        for _ in range(2):  # warm-up: bytecode, catalog cache, page cache
            run(FLOOR, env, {}, scratch)
            for _, args, extra in timed:
                run(args, env, extra, scratch)
        floors: dict[str, list[float]] = {label: [] for label, _, _ in timed}
        times: dict[str, list[float]] = {label: [] for label, _, _ in timed}
        clicks: list[tuple[float, float]] = []  # (import click, plan) pairs
        plan_args = next(args for label, args, _ in timed if label == PLAN_LABEL)
        for _ in range(pairs):
            for label, args, extra in timed:
                floors[label].append(run(FLOOR, env, {}, scratch))
                times[label].append(run(args, env, extra, scratch))
            clicks.append((run(CLICK, env, {}, scratch), run(plan_args, env, {}, scratch)))
    report(timed, floors, times, pairs, clicks)


def report(timed, floors, times, pairs: int, clicks: list[tuple[float, float]]) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{pairs} pairs per command, {os.cpu_count()} CPUs, load average {load} (1, 5, 15 min)")
    all_floors = [t for label in floors for t in floors[label]]
    print(f"  {'import floor':<46} median {statistics.median(all_floors):.3f} s")
    ratios = {label: statistics.median(t / f for t, f in zip(times[label], floors[label])) for label in times}
    for label, ratio in ratios.items():
        print(f"  {label:<46} median {statistics.median(times[label]):.3f} s   ratio {ratio:.2f}")
    print(f"  {CLICK_LABEL:<46} median {statistics.median(c for c, _ in clicks):.3f} s")
    print(f"{PLAN_LABEL} / import floor, median of {pairs} per-pair ratios: {ratios[PLAN_LABEL]:.2f}")
    print(f"{PLAN_LABEL} / {CLICK_LABEL}, median of {pairs} per-pair ratios: "
          f"{statistics.median(t / c for c, t in clicks):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=11, help="floor/command pairs per command (at least 9)")
    args = parser.parse_args()
    if args.pairs < 9:
        parser.error("--pairs must be at least 9")
    measure(args.pairs)


if __name__ == "__main__":
    main()
