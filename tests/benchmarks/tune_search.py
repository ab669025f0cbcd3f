"""Benchmark (not a test): server starts each search needs to come within 5 % of a landscape's known optimum.

    python tests/benchmarks/tune_search.py [--seeds 5] [--budget 40] [--landscape NAME]

On each landscape of ``tests/tune/landscapes.py`` (a real request through the real resolver, a simulated server
with a known optimum by brute force), in the same loop:

- **tune**: ``optkit.tune.study.run_tune`` with the ``LandscapeExecutor`` (the real sweep ``Search``, stop rule
  and ``outcome_from_sweep``); a point the resolver refuses is free, as in ``optkit tune``;
- **grid**: vLLM's ``benchmarks/auto_tune`` shape: max-num-seqs (powers of two in its range) × max-num-batched-tokens
  (its choices), every other knob at the rule's value, in auto_tune's order (seqs outer, tokens inner);
  the full space's grid size is printed beside it;
- **random**: uniform points of the space (integer knobs log-uniform, as tune's distributions);
- **pso**: a particle swarm, 5 particles × 10 iterations as msModeling optix's default; each particle's position
  is in [0, 1] per knob, decoded to the domain (log-scaled integers, choices by equal slices).

Starts: every measured point costs one start; a point already measured is not started again (the baselines are
given that memo too). The baselines do not know which points the resolver refuses, so an invalid point they
pick costs a start and measures nothing (objective 0): that is the advantage ``optkit tune`` has by planning
each point first. A search that never comes within 5 % within its budget is shown as ``never (N)``; its ratio
is then a lower bound (``>``), counted at the N starts it spent.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tune"))

from landscapes import HELD_OUT, LANDSCAPES, Landscape, LandscapeExecutor  # noqa: E402

from optkit.tune.study import run_tune  # noqa: E402

WITHIN = 0.95


def first_within(objectives: list[float], best: float) -> int | None:
    """Starts until the first objective within 5 % of ``best`` (1-based), None if never."""
    return next((i + 1 for i, o in enumerate(objectives) if o >= WITHIN * best), None)


def tune_run(land: Landscape, seed: int, budget: int) -> list[float]:
    """The objectives of tune's started trials, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_tune(Path(tmp), land.settings(budget, seed), LandscapeExecutor(land), land.workspace,
                           log=lambda s: None)
    return [t["objective"] for t in summary.trials]


class Starts:
    """A baseline's measurements, one start per new effective point (invalid points included)."""

    def __init__(self, land: Landscape):
        self.land, self.seen, self.objectives = land, {}, []

    def measure(self, params: dict) -> float:
        from optkit.tune.candidate import effective_params, params_text

        key = params_text(effective_params(params))
        if key not in self.seen:
            self.seen[key] = self.land.objective(params) if self.land.valid(params) else 0.0
            self.objectives.append(self.seen[key])
        return self.seen[key]


def grid_points(land: Landscape) -> list[dict]:
    dims = {d.name: d for d in land.space.dims}
    seqs_d = dims["max-num-seqs"]
    seqs = [seqs_d.start] if seqs_d.fixed else [2 ** i for i in range(20) if seqs_d.low <= 2 ** i <= seqs_d.high]
    start = land.space.start()
    return [{**start, "max-num-seqs": s, "max-num-batched-tokens": t} for s in seqs
            for t in dims["max-num-batched-tokens"].choices]


def decode(land: Landscape, x: list[float]) -> dict:
    """A position in [0, 1]^open to a point (log-scaled integers, choices by equal slices)."""
    point = land.space.start()
    for d, v in zip(land.space.open, x):
        v = min(max(v, 0.0), 1.0)
        if d.kind == "int":
            point[d.name] = int(round(math.exp(math.log(d.low) + v * (math.log(d.high) - math.log(d.low)))))
        else:
            point[d.name] = d.choices[min(int(v * len(d.choices)), len(d.choices) - 1)]
    return point


def random_run(land: Landscape, seed: int, budget: int) -> list[float]:
    rng, starts = random.Random(seed), Starts(land)
    while len(starts.objectives) < budget:
        starts.measure(decode(land, [rng.random() for _ in land.space.open]))
    return starts.objectives


def pso_run(land: Landscape, seed: int, particles: int = 5, iterations: int = 10, inertia: float = 0.7,
            cognitive: float = 1.5, social: float = 1.5) -> list[float]:
    rng, starts, n = random.Random(seed), Starts(land), len(land.space.open)
    pos = [[rng.random() for _ in range(n)] for _ in range(particles)]
    vel = [[rng.uniform(-0.2, 0.2) for _ in range(n)] for _ in range(particles)]
    own = [(-1.0, p[:]) for p in pos]
    best = (-1.0, pos[0][:])
    for _ in range(iterations):
        for i, p in enumerate(pos):
            value = starts.measure(decode(land, p))
            if value > own[i][0]:
                own[i] = (value, p[:])
            if value > best[0]:
                best = (value, p[:])
        for i, p in enumerate(pos):
            for j in range(n):
                vel[i][j] = (inertia * vel[i][j] + cognitive * rng.random() * (own[i][1][j] - p[j])
                             + social * rng.random() * (best[1][j] - p[j]))
                p[j] = min(max(p[j] + vel[i][j], 0.0), 1.0)
    return starts.objectives


def cost(objectives: list[float], best: float) -> tuple[int, bool]:
    """Starts to come within 5 % (hit True), or all the starts spent (hit False)."""
    hit = first_within(objectives, best)
    return (hit, True) if hit is not None else (len(objectives), False)


def summarize(runs: list[tuple[int, bool]]) -> tuple[float, int]:
    return statistics.mean(c for c, _ in runs), sum(1 for _, h in runs if not h)


def compare(land: Landscape, seeds: int, budget: int) -> dict:
    """Per method: mean starts to within 5 % (misses counted at their spent starts) and the number of misses."""
    best = land.optimum["objective"]
    grid = [Starts(land)]
    for p in grid_points(land):
        grid[0].measure(p)
    out = {"grid": summarize([cost(grid[0].objectives, best)])}
    out["tune"] = summarize([cost(tune_run(land, s, budget), best) for s in range(seeds)])
    out["random"] = summarize([cost(random_run(land, s, budget), best) for s in range(seeds)])
    out["pso"] = summarize([cost(pso_run(land, s), best) for s in range(seeds)])
    out["grid_size"] = len(grid_points(land))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=40, help="starts for tune and random search")
    parser.add_argument("--landscape", action="append", help="a landscape's name (default: all)")
    parser.add_argument("--held-out", action="store_true", help="also the held-out landscape(s), written after the "
                                                                 "tune's moves and never tuned against")
    args = parser.parse_args()
    for land in LANDSCAPES + (HELD_OUT if args.held_out else ()):
        if args.landscape and land.name not in args.landscape:
            continue
        began = time.monotonic()
        opt = land.optimum
        result = compare(land, args.seeds, args.budget)
        print(f"\n{land.name}: optimum {opt['objective']:.1f} tok/s per card at {opt['params']}")
        print(f"  {opt['valid_points']} valid launches (every max-num-seqs × capture top), {opt['within_5pct']} within "
              f"5 %; the space tune searches has {land.space.size()} points; brute force {opt['seconds']} s")
        tune_mean = result["tune"][0]
        print(f"  {'method':8} {'starts to 5 %':>16} {'× tune':>8}")
        for name in ("tune", "grid", "random", "pso"):
            mean, misses = result[name]
            runs = 1 if name == "grid" else args.seeds
            text = f"{mean:.1f}" + (f" ({misses}/{runs} never)" if misses else "")
            ratio = (">" if misses else "") + f"{mean / tune_mean:.2f}"
            print(f"  {name:8} {text:>16} {ratio:>8}")
        print(f"  (grid: {result['grid_size']} points, max-num-seqs × max-num-batched-tokens; "
              f"{time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
