"""Benchmark (not a test): a warm ``optkit compat`` over every known release, as a ratio to the same
patches checked with plain ``git apply --check`` on the same cached trees.

    python tests/benchmarks/compat.py [--pairs 5]

The trees are fetched (and cached) first, and one ``optkit compat`` run warms its result cache, so
what is timed is the warm command a user reruns. The baseline is the floor of that work: one
``git apply --check`` per written patch and release, run one after the other in the release's
pristine tree. The two are run in the same loop, alternating, so both see the same machine load; the
ratio is the median of the per-pair ratios, printed last. Load still moves it (the development
machine has 2 shared cores), so the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from optkit.catalog.loader import load_catalog  # noqa: E402
from optkit.tree.fetch import fetch_many  # noqa: E402
from optkit.versions.releases import known_versions  # noqa: E402


def trees() -> dict[str, Path]:
    versions = [str(v) for v in known_versions()]
    return {v: r.path for v, r in zip(versions, fetch_many(versions))}


def patches() -> list[Path]:
    catalog = load_catalog()
    return [catalog.patch_path(r.id, p.file) for r in catalog for p in r.patches if p.status == "present"]


def optkit_compat() -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "optkit", "compat", "--json"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def git_apply_check(files: list[Path], where: dict[str, Path]) -> float:
    start = time.perf_counter()
    for tree in where.values():
        for patch in files:
            subprocess.run(["git", "apply", "--check", "-p1", str(patch)], cwd=tree,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    where, files = trees(), patches()
    optkit_compat()  # warms the result cache
    ratios = []
    for pair in range(args.pairs):
        ours, floor = optkit_compat(), git_apply_check(files, where)
        ratios.append(ours / floor)
        print(f"pair {pair + 1}: optkit compat {ours:.2f}s, git apply --check {floor:.2f}s "
              f"({len(files)} patches x {len(where)} releases), ratio {ours / floor:.2f}, "
              f"load {os.getloadavg()[0]:.1f}")
    print(f"median ratio optkit compat / git apply --check: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
