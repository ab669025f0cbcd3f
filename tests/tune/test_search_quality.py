"""The search against the baselines on the simulated landscapes (issue 27's measure of done).

With fixed seeds the searches are deterministic (pinned Optuna, torch, scipy): per landscape, the mean server
starts tune needs to come within 5 % of the brute-force optimum (a miss counted at its whole budget) against an
auto_tune-style grid, random search and a 5 × 10 particle swarm (tests/benchmarks/tune_search.py prints the
table). The landscape's executor asserts that every point tune starts is one the resolver accepts, so these runs
also prove that no invalid configuration is ever started.

The issue's bar is asserted on the three landscapes: within 5 % in at most a third of the grid's starts (a grid
that never comes within 5 % counted at the starts it spent, so the bar is then against a lower bound). The
held-out landscape, written after the tune's one-knob moves and never tuned against, is held to the weaker
claim alone: fewer starts than every baseline (docs/tune.md says by how much).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]

from landscapes import HELD_OUT, LANDSCAPES  # noqa: E402
from tune_search import compare  # noqa: E402

SEEDS, BUDGET = 2, 40
pytestmark = pytest.mark.slow


@lru_cache(maxsize=None)
def result(name: str) -> dict:
    land = next(land for land in LANDSCAPES + HELD_OUT if land.name == name)
    return compare(land, SEEDS, BUDGET)


@pytest.mark.parametrize("name", [land.name for land in LANDSCAPES + HELD_OUT])
def test_tune_needs_fewer_starts_than_the_grid_random_search_and_the_swarm(name):
    r = result(name)
    tune = r["tune"][0]
    for method in ("grid", "random", "pso"):
        assert tune < r[method][0], (name, method, r)


@pytest.mark.parametrize("name", [land.name for land in LANDSCAPES])
def test_tune_comes_within_five_percent_in_a_third_of_the_grids_starts(name):
    r = result(name)
    assert r["tune"][1] == 0 and r["tune"][0] <= r["grid"][0] / 3, (name, r)
