"""Records carry capacity: a capacity sweep's record (``capacity`` in verified/<digest>.yaml, one's own
``--catalog DIR``) read by the objective under the throughput goal. The request's SLO in canonical text
must be the sweep's; then the step that served exactly the plan's selection gives the plan's measured
capacity, and each recipe's measured capacity change replaces the "unquantified" throughput label (a
regression makes it ``regresses``). Other SLOs and the latency goal change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.catalog.loader import load_catalog
from optkit.catalog.records import Record, patch_hashes, record_file
from optkit.cli.main import cli

SLO = "tpot_p99<=25ms"
PLAN = ("plan", "qwen3.5-35b", "--target", "910c", "--concurrency", "64", "--input-len", "32", "--output-len", "8",
        "--slo", SLO, "--goal", "throughput", "--no-flashcomm1")  # FlashComm1 off: the shared-expert overlap stays in
GAIN = "moe-skip-dispatch-combine-events"  # the article measured it at c1: unquantified at c64 under the throughput goal
REGRESSING = "compile-super-kernel"  # selected at c64, nothing requires it
RIVAL = "moe-fused-mc2-enable"  # conflicts with moe-shared-expert-sidestream-ar, which wins by rule today
WHERE = "measured on 910C (driver 24.1.rc3, CANN 9.0.1), vllm-ascend 0.23.0, record "


def run(*args):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def plan_json(*extra) -> dict:
    return json.loads(run(*PLAN, *extra, "--json"))


def _entry(catalog, rid: str, step: str, delta: int | None, verdict: str | None) -> dict:
    entry = {"step": step, "patches": patch_hashes(catalog, rid), "tpot_delta_ms": {1: -0.5, 4: -0.4},
             "noise_ms": {1: 0.05, 4: 0.05}, "verdict": {1: "gain", 4: "gain"},
             "reference_tpot_ms": {1: 20.0, 4: 24.0}, "repeats": 2}
    if delta is not None:
        entry.update(capacity_delta=delta, capacity_verdict=verdict)
    return entry


def write_record(folder: Path, capacities: dict[str, tuple[int, str]], step_recipes: list[str],
                 slo: str = SLO, changed_since: str = "") -> str:
    """A record of a ladder whose sweep ran under ``slo``: per recipe its capacity change, and a step
    ``01-all`` that served ``step_recipes`` (capacity 24: met at 24, missed at 26)."""
    catalog = load_catalog(None)
    data = {
        "record_version": 1, "target": "910c", "model": "qwen3.5-35b-a3b",
        "release": {"vllm_ascend": "0.23.0", "vllm": "0.23.0"}, "tree_digest": "ab" * 32,
        "host": {"npu": "910C", "target": "910c", "driver": "24.1.rc3", "cann": "9.0.1", "packages": {}},
        "workload": {"concurrency": [1, 4], "input_len": 32, "output_len": 8, "mtp": False,
                     "num_speculative_tokens": 0, "tp": 2, "dp": 1, "ep": True, "sampling": "greedy",
                     "min_tokens": True},
        "ladder": "incremental", "accuracy_gate": "passed",
        "recipes": {rid: _entry(catalog, rid, "01-all", delta, verdict) for rid, (delta, verdict) in capacities.items()},
        "results": {"00-baseline/r1/c1.json": "cd" * 32},
        "capacity": {"slo": slo, "variable": "concurrency", "low": 1, "high": 256, "resolution": 0.1,
                     "prompts_per_concurrency": 4,
                     "steps": {"00-baseline": {"recipes": [], "capacity": 16, "upper": 18, "status": "found",
                                               "repeats": 2},
                               "01-all": {"recipes": step_recipes, "capacity": 24, "upper": 26, "status": "found",
                                          "output_throughput": 1234.5, "request_goodput": 3.25, "repeats": 2}}},
    }
    if changed_since:  # its patches were others when measured: the entry is refused on loading
        data["recipes"][changed_since]["patches"] = {f: "00" * 32 for f in data["recipes"][changed_since]["patches"]}
    name, text = record_file(Record.model_validate(data))
    (folder / "verified").mkdir(parents=True, exist_ok=True)
    (folder / "verified" / name).write_text(text, encoding="utf-8")
    return name.removesuffix(".yaml")


@pytest.fixture
def mine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("mine").mkdir()
    return Path("mine")


@pytest.fixture(scope="module")
def unrecorded() -> dict:
    """The throughput plan without any record."""
    return plan_json()


def test_a_matching_slo_gives_the_measured_capacity_and_it_beats_the_rule_label(mine, unrecorded):
    assert unrecorded["decisions"][GAIN]["reason"].endswith("c64 unquantified under the throughput goal "
                                                            "(extrapolated from c1 only)")
    name = write_record(mine, {GAIN: (8, "gain")}, unrecorded["selected"])
    # the same SLO written otherwise: compared in canonical text
    data = plan_json("--catalog", "mine", "--slo", "tpot_p99 < 25 ms")
    assert data["selected"] == unrecorded["selected"]
    assert data["measured_capacity"] == {
        "capacity": 24, "upper": 26, "status": "found", "slo": SLO, "record": name, "step": "01-all", "repeats": 2,
        "output_throughput": 1234.5, "request_goodput": 3.25,
        "text": f"measured capacity 24 at SLO {SLO} ({WHERE}{name}, step 01-all: met at 24, missed at 26, "
                "1234.5 output tok/s at it; 2 runs)"}
    gain = data["decisions"][GAIN]
    assert gain["reason"] == (f"expected gain: measured capacity Δ +8 concurrent requests at SLO {SLO} "
                              f"({WHERE}{name}, step 01-all)")
    assert gain["measured_capacity"]["verdict"] == "gain" and "unquantified" not in gain["reason"]
    text = run(*PLAN, "--catalog", "mine")
    assert f"Objective: throughput under SLO {SLO}: measured capacity 24 at SLO {SLO}" in text
    assert "nothing here measures" not in text
    explained = run("explain", GAIN, "qwen3.5-35b", *PLAN[2:], "--catalog", "mine")
    assert "measured capacity 24 at SLO" in explained and "measured capacity Δ +8 concurrent requests" in explained


def test_the_plans_capacity_is_of_the_step_that_served_exactly_its_selection(mine, unrecorded):
    """Leave one recipe out: the step no longer equals the selection, the recipe's own number still counts."""
    write_record(mine, {GAIN: (8, "gain")}, unrecorded["selected"])
    data = plan_json("--catalog", "mine", "--without", "waterfall-hccl-aiv")
    assert "measured_capacity" not in data
    assert data["decisions"][GAIN]["measured_capacity"]["delta"] == 8
    assert (f"Objective: throughput under SLO {SLO} (no record measured this selection's capacity under it; the "
            'recipes whose gain says "measured capacity" were measured under it') in " ".join(
        run(*PLAN, "--catalog", "mine", "--without", "waterfall-hccl-aiv").split())


def test_a_step_holding_a_recipe_changed_since_is_not_the_plans_capacity(mine, unrecorded):
    write_record(mine, {GAIN: (8, "gain"), REGRESSING: (2, "no-measurable-effect")}, unrecorded["selected"],
                 changed_since=REGRESSING)
    data = plan_json("--catalog", "mine")
    assert "measured_capacity" not in data and "measured_capacity" not in data["decisions"][REGRESSING]
    assert data["decisions"][GAIN]["measured_capacity"]["delta"] == 8


def test_a_capacity_gain_outweighs_the_rules_in_a_conflict(mine, unrecorded):
    assert unrecorded["decisions"][RIVAL]["status"] == "objective"
    write_record(mine, {RIVAL: (4, "gain")}, [])
    data = plan_json("--catalog", "mine")
    assert RIVAL in data["selected"]
    assert data["decisions"]["moe-shared-expert-sidestream-ar"]["status"] == "objective"
    assert "measured capacity Δ +4" in data["decisions"]["moe-shared-expert-sidestream-ar"]["reason"]


def test_a_measured_capacity_decides_over_a_tpot_regression_carried_up_by_rule(mine, unrecorded):
    rid = "gdn-l2norm-fused-recurrent-kernel"
    assert unrecorded["decisions"][rid]["reason"] == "slower at c64 (+0.5 ms, extrapolated from c8)"
    write_record(mine, {rid: (3, "gain")}, [])
    decision = plan_json("--catalog", "mine")["decisions"][rid]
    assert decision["status"] == "selected"
    assert decision["reason"].startswith("expected gain: measured capacity Δ +3 concurrent requests at SLO ")
    assert decision["reason"].endswith(", c64 +0.5 ms (extrapolated from c8)")


def test_another_slo_is_ignored_and_the_label_stays_unquantified(mine, unrecorded):
    write_record(mine, {GAIN: (8, "gain"), REGRESSING: (-6, "regression")}, unrecorded["selected"],
                 slo="tpot_p99<=50ms")
    data = plan_json("--catalog", "mine")
    assert data == unrecorded
    assert data["decisions"][GAIN]["basis"]["c64"] == "unquantified under the throughput goal (extrapolated from c1 only)"
    assert "nothing here measures the SLO" in run(*PLAN, "--catalog", "mine")


def test_a_measured_capacity_regression_is_not_selected_unless_forced(mine, unrecorded):
    assert REGRESSING in unrecorded["selected"]
    name = write_record(mine, {REGRESSING: (-6, "regression")}, unrecorded["selected"])
    data = plan_json("--catalog", "mine")
    assert REGRESSING not in data["selected"]
    assert data["decisions"][REGRESSING]["status"] == "regresses"
    assert data["decisions"][REGRESSING]["reason"] == (
        f"measured capacity regression at SLO {SLO}: Δ -6 concurrent requests ({WHERE}{name}, step 01-all)")
    assert "measured_capacity" not in data  # the selection is no longer the step's
    forced = plan_json("--catalog", "mine", "--with", REGRESSING)
    assert REGRESSING in forced["selected"] and forced["decisions"][REGRESSING]["reason"] == "requested (--with)"
    assert forced["measured_capacity"]["capacity"] == 24  # forced back in, the selection is the step's again


def test_a_latency_goal_plan_is_unaffected(mine):
    latency = [*PLAN[:PLAN.index("--goal") + 1], "latency"]
    before = json.loads(run(*latency, "--json"))
    write_record(mine, {GAIN: (8, "gain"), REGRESSING: (-6, "regression")}, before["selected"])
    assert json.loads(run(*latency, "--catalog", "mine", "--json")) == before
    assert "measured capacity" not in run(*latency, "--catalog", "mine")
