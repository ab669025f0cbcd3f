"""docs/example-ladder/ shows the output of a request `optkit ladder --sweep` accepts today.

The example's inputs come from tests/measure/make_example.py (a simulated run); the sweep sizing rule
(optkit.measure.sweep_fit) refuses a sweep above the plan's range, so an example swept past it would
document an output the tool refuses. These tests read the committed ladder.json, and the page that
shows it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optkit.measure.sweep_fit import plan_for_sweep
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request

ROOT = Path(__file__).resolve().parents[2]
LADDER = ROOT / "docs" / "example-ladder" / "ladder.json"


@pytest.fixture(scope="module")
def example() -> dict:
    return json.loads(LADDER.read_text(encoding="utf-8"))


def test_the_example_sweep_stays_within_the_plans_range(example):
    """Re-planning the example's request for its sweep changes nothing: the ladder accepts it as it is."""
    workspace = load_workspace(ROOT)
    result = plan(parse_request(example["request"]), workspace)
    assert plan_for_sweep(result, workspace, example["sweep"]) is result
    assert example["sweep"]["high"] <= max(example["request"]["concurrency"])


def test_every_example_step_holds_the_highest_probe(example):
    high = example["sweep"]["high"]
    short = [s["id"] for s in example["steps"] if s.get("scheduler", {}).get("slots", 0) < high]
    assert short == []


@pytest.mark.parametrize("phrase", ["predate", "now refuses", "not regenerated"], ids=["predate", "refuses", "stale"])
def test_the_measure_page_has_no_stale_example_caveat(phrase):
    assert phrase not in (ROOT / "docs" / "measure.md").read_text(encoding="utf-8")
