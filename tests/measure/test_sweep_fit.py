"""A capacity sweep measures servers sized for its range (issue 25, findings 12 and 14), a load above a
step's scheduler slots is a miss that says requests queue, and a dead server's bound is no capacity
delta (finding 13): optkit.measure.sweep_fit, optkit.measure.capacity."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli
from optkit.measure.capacity import RunCapacity, StepCapacity, capacity_delta, step_capacities
from optkit.measure.results import Run
from optkit.measure.sweep import sweep_settings, violations
from optkit.measure.sweep_fit import queue_violation, scheduler
from optkit.resolve.slo import parse_slo

BASE = ["ladder", "qwen3.5-35b", "--target", "910c", "--concurrency", "1,4"]
FINDING_12 = [*BASE, "--goal", "throughput", "--sweep", "--slo", "tpot_p99<=40ms", "--sweep-max", "64",
              "--recipes", "sched-capacity-for-load"]


def _argv(out) -> list[str]:
    return json.loads((out / "steps" / "01-sched-capacity-for-load" / "optkit.lock.json").read_text())["launch"]["argv"]


def test_a_throughput_sweep_ladder_sizes_every_step_for_the_sweeps_highest_probe(tmp_path):
    """Finding 12: the step with sched-capacity-for-load launched --max-num-seqs 4 (from --concurrency 1,4)
    and the sweep then probed up to c64 against a server that queues beyond c4."""
    out = tmp_path / "l"
    result = CliRunner().invoke(cli, [*FINDING_12, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "planned for concurrency 1,4,64" in result.output
    data = json.loads((out / "ladder.json").read_text())
    assert data["workload"]["concurrency"] == [1, 4, 64]
    argv = _argv(out)
    assert argv[argv.index("--max-num-seqs") + 1] == "64"
    assert {s["id"]: s["scheduler"]["slots"] for s in data["steps"]} == {"00-baseline": 256,
                                                                         "01-sched-capacity-for-load": 64}
    assert all(s["scheduler"]["slots"] >= data["sweep"]["high"] for s in data["steps"])


@pytest.mark.parametrize("extra, refused", [
    pytest.param(["--sweep"], "this latency plan's servers are built for c <= 4 (capture sizes [1, 4], vLLM's default scheduler)", id="latency-default-range"),
    pytest.param(["--sweep", "--sweep-max", "64"], "--goal throughput", id="latency-above-the-plan"),
    pytest.param(["--sweep", "--sweep-max", "4"], None, id="latency-within-the-plan"),
    pytest.param(["--goal", "throughput", "--sweep", "--sweep-max", "16"], None, id="throughput-resized"),
])
def test_a_latency_plan_refuses_a_sweep_above_what_its_servers_are_built_for(tmp_path, extra, refused):
    """Finding 14: ladder --sweep on the latency plan probed c1…c256 against servers built for c <= 8."""
    out = tmp_path / "l"
    result = CliRunner().invoke(cli, [*BASE, "--slo", "tpot_p99<=40ms", *extra, "-o", str(out)])
    if refused is None:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code != 0 and refused in result.output and "--sweep-max 4" in result.output, result.output
        assert not out.exists()


def test_a_sweep_from_a_lock_that_does_not_hold_its_range_is_refused(tmp_path):
    bundle = tmp_path / "b"
    assert CliRunner().invoke(cli, ["plan", *BASE[1:], "--goal", "throughput", "--slo", "tpot_p99<=40ms",
                                    "-o", str(bundle)]).exit_code == 0
    result = CliRunner().invoke(cli, ["ladder", "--from-lock", str(bundle / "optkit.lock.json"), "--sweep",
                                      "--sweep-max", "64", "-o", str(tmp_path / "l")])
    assert result.exit_code != 0 and "--concurrency 1,4,64" in result.output, result.output


@pytest.mark.parametrize("argv, slots, text", [
    pytest.param(["vllm", "serve", "M"], 256, "vLLM's default max-num-seqs 256", id="vllms-default"),
    pytest.param(["vllm", "serve", "M", "--max-num-seqs", "4"], 4, "--max-num-seqs 4", id="max-num-seqs"),
    pytest.param(["vllm", "serve", "M", "--max-num-seqs", "32", "--data-parallel-size", "2"], 64,
                 "--max-num-seqs 32 × DP 2", id="per-dp-engine"),
])
def test_a_steps_scheduler_slots_are_read_off_its_launch(argv, slots, text):
    sched = scheduler(argv)
    assert (sched["slots"], sched["text"]) == (slots, text)


SETTINGS = sweep_settings(parse_slo("tpot_p99<=40ms"), prompts_per_concurrency=10, min_prompts=20, warmups=1,
                          client_args=[])
FAST = {"completed": 10, "failed": 0, "p99_tpot_ms": 10.0}


@pytest.mark.parametrize("concurrency, slots, queued", [
    pytest.param(4, 4, False, id="at-the-slots"),
    pytest.param(8, 4, True, id="above-the-slots"),
    pytest.param(64, None, False, id="no-scheduler-known"),
])
def test_a_probe_above_the_scheduler_slots_is_a_miss_that_says_requests_queue(concurrency, slots, queued):
    sched = scheduler(["vllm", "serve", "M", "--max-num-seqs", str(slots)]) if slots else None
    missed = violations(SETTINGS, {**FAST, "max_concurrency": concurrency}, sched)
    assert bool(missed) == queued and (not queued or "requests queue" in missed[0]), missed
    assert (queue_violation(concurrency, sched) is not None) == queued


def test_the_report_counts_a_queued_probe_as_a_miss():
    run = Run("s", 1)
    run.sweep = {"status": "at-most-high", "capacity": 16, "died_at": None}
    run.probes = {c: {**FAST, "max_concurrency": c} for c in (1, 2, 4, 8, 16)}
    caps, _ = step_capacities(SETTINGS, {"s": [run]}, {"s": scheduler(["vllm", "--max-num-seqs", "4"])})
    assert (caps["s"].status, caps["s"].capacity, caps["s"].upper) == ("found", 4, 8)
    assert [p["met"] for p in caps["s"].curve] == [True, True, True, False, False]


def _cap(step, capacity, upper, status="found", died_at=None):
    return StepCapacity(step, [RunCapacity(1, status, capacity, upper, died_at)])


@pytest.mark.parametrize("after, before", [
    pytest.param(_cap("01-x", 4, 16, "server-died", 16), _cap("00-baseline", 16, 17), id="dead-after"),
    pytest.param(_cap("01-x", 30, 31), _cap("00-baseline", 4, 16, "server-died", 16), id="dead-before"),
])
def test_a_dead_servers_bound_is_no_capacity_delta(after, before):
    """Finding 13: the report flagged "capacity regression: −12" from a dead step's lower bound."""
    from types import SimpleNamespace

    from optkit.cli.render import capacity_summary

    d = capacity_delta(after, before)
    assert (d.value, d.verdict) == (None, "unavailable")
    assert "died during the capacity sweep (at c16)" in d.why_unavailable and "lower bound" in d.why_unavailable
    report = SimpleNamespace(ladder={"sweep": {"slo": "tpot_p99<=40ms"}}, capacity={c.step: c for c in (before, after)},
                             attributions=[SimpleNamespace(step=after.step, capacity=d)])
    lines = [b for b in capacity_summary(report) if isinstance(b, str)]
    assert lines == [f"  01-x: no Δ capacity: {d.why_unavailable}"]


def test_the_ladder_library_refuses_a_sweep_above_a_steps_scheduler_slots(tmp_path):
    """The guard under the CLI's sizing: a plan for c1,4 (--max-num-seqs 4) with a sweep to c64 is refused."""
    from optkit.measure import MeasureError
    from optkit.measure.ladder import ladder_files, sweep_options
    from optkit.measure.steps import ladder_steps
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    workspace = load_workspace()
    small = plan(Request(model="qwen3.5-35b", target="910c", concurrency=[1, 4], goal="throughput",
                         slo="tpot_p99<=40ms"), workspace)
    ladder = ladder_steps(small, workspace.catalog, only=["sched-capacity-for-load"])
    with pytest.raises(MeasureError, match=r"01-sched-capacity-for-load \(--max-num-seqs 4\)"):
        ladder_files(small, workspace, ladder, sweep=sweep_options(parse_slo("tpot_p99<=40ms"), high=64))
    assert ladder_files(small, workspace, ladder, sweep=sweep_options(parse_slo("tpot_p99<=40ms"), high=4))


@pytest.mark.parametrize("ttft, e2el, queued", [
    pytest.param(5900.0, 1200.0, True, id="ttft-beyond-a-whole-request"),
    pytest.param(300.0, 1200.0, False, id="ttft-within-a-request"),
    pytest.param(None, 1200.0, False, id="no-ttft-percentile"),
])
def test_measured_queueing_at_a_met_probe_is_said(ttft, e2el, queued):
    """Finding 12's second signal: p99 TTFT 5.9 s at a load that met a TPOT-only SLO."""
    run = Run("s", 1)
    run.sweep = {"status": "at-most-high", "capacity": 2, "died_at": None}
    run.probes = {c: {**FAST, "max_concurrency": c, "median_e2el_ms": e2el,
                      **({"p99_ttft_ms": ttft} if ttft is not None and c == 2 else {})} for c in (1, 2)}
    caps, issues = step_capacities(SETTINGS, {"s": [run]})
    assert caps["s"].capacity == 2
    assert any("c2 met the SLO while requests queued" in i for i in issues) == queued, issues
