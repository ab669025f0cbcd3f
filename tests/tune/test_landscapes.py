"""The landscapes of tests/tune/landscapes.py are self-consistent: the executor measures what the brute force
computes, the validity shortcut agrees with the resolver, and the early stop never stops the eventual best."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from landscapes import LANDSCAPES, LandscapeExecutor, landscape, measure  # noqa: E402

from optkit.tune.candidate import Candidate, resolve_point  # noqa: E402
from optkit.tune.study import run_tune  # noqa: E402


def sample_points(land, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = land.space.start()
        for d in land.space.open:
            p[d.name] = rng.randint(d.low, d.high) if d.kind == "int" else rng.choice(d.choices)
        out.append(p)
    return out


@pytest.mark.parametrize("name", [land.name for land in LANDSCAPES])
def test_executor_matches_brute_force(name, tmp_path):
    land = landscape(name)
    points = [land.space.start(), *sample_points(land, 6, 1)]
    for i, params in enumerate(points):
        candidate = resolve_point(land.given, params, land.workspace)
        assert isinstance(candidate, Candidate) == land.valid(params), params
        if not isinstance(candidate, Candidate):
            continue
        outcome = measure(land, candidate.effective, candidate.cards, tmp_path / str(i))
        assert outcome.objective == pytest.approx(land.objective(params)), params
        assert (outcome.status == "failed-start") == bool(land.oom(candidate.effective))


@pytest.mark.parametrize("name", [land.name for land in LANDSCAPES])
def test_early_stop_never_stops_the_best(name, tmp_path):
    land = landscape(name)
    executor = LandscapeExecutor(land)
    run_tune(tmp_path, land.settings(20, 0), executor, land.workspace, log=lambda s: None)
    best = max(outcome.objective for _, outcome in executor.runs)
    stopped = [c for c, outcome in executor.runs if outcome.status == "stopped-early"]
    for candidate in stopped:  # measured in full, a stopped trial would not have been the best
        assert land.objective(candidate.params) < best, candidate.params
