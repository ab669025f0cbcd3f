"""The capacity sweep end to end on this CPU machine: a real ladder bundle written with --sweep, its
unchanged run-ladder.sh, the real vLLM 0.23.0 benchmark client (in-process in optkit measure sweep,
and the vllm command in bench.sh), and the simulated server with a load model: latency grows with
the number of requests decoded together (batching), and beyond a knee every token interval grows
steeply (compute-bound). Each step's recipes move its knee, so every step has its own capacity.

The ladder (baseline + two recipes, c1, cut-down costs: 4 prompts per slot, 4 accuracy prompts) runs
once for the module (about four minutes on two cores); then the last step runs again with a server
that dies when loaded above an injected concurrency, and the first on a server too slow for the SLO
at any load. The tests check that the sweep finds each
injected knee exactly (resolution 0: the bracket is [knee, knee + 1)), the report's capacity
attribution per recipe, goodput, the chart, the cost settings reaching bench.sh and the accuracy
prompts, a server that dies mid-sweep reported as such, and a record carrying the capacity.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support

from compat_support import scratch_tree  # noqa: E402
from simhost import SimHost  # noqa: E402
from optkit.measure.ladder import StepCost, sweep_options, write_ladder  # noqa: E402
from optkit.measure.report import build_report, report_files  # noqa: E402
from optkit.measure.steps import ladder_steps  # noqa: E402
from optkit.resolve.plan import load_workspace, plan  # noqa: E402
from optkit.resolve.request import Request  # noqa: E402
from optkit.resolve.slo import parse_slo  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.tree]

REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1], "input_len": 32, "output_len": 8}
HCCL, STATIC = "waterfall-hccl-aiv", "waterfall-static-kernel"
SIGNS = {HCCL: {"env": {"HCCL_OP_EXPANSION_MODE": "AIV"}},
         STATIC: {"config": ["additional_config.ascend_compilation_config.enable_static_kernel"]}}
BASE_KNEE = 3
KNEE_MOVES = {HCCL: 3, STATIC: 4}  # the baseline's knee at 3 requests, +3 with HCCL, +4 more with the static kernel
SLO = "tpot_p90<=32ms,ttft_p99<=1s"  # 20 ms per token below the knee (+0.1 ms per request), x2 one request above it
DIES_ABOVE = 5


def profile(dies: bool = False) -> dict:
    recipes = {rid: {**SIGNS[rid], "delta_ms": {"1": -0.5}, "load": {"knee": KNEE_MOVES[rid]}} for rid in SIGNS}
    if dies:
        recipes[STATIC]["load"]["die_above"] = DIES_ABOVE
    return {"base_ms": {"1": 20.0}, "ttft_ms": 15.0, "noise_ms": 0.2, "startup_s": 0.3, "seed": 11,
            "recipes": recipes, "load": {"knee": BASE_KNEE, "steep": 1.0, "batch_ms": 0.1}}


def knee(recipes) -> int:
    return BASE_KNEE + sum(KNEE_MOVES[r] for r in recipes if r in KNEE_MOVES)


def run_ladder(ladder: Path, host: SimHost, *extra: str):
    proc = subprocess.run(["bash", str(ladder / "run-ladder.sh"), "--tree", str(host.tree), *extra], cwd=host.root,
                          env=host.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
    return proc.returncode, proc.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        message = "vLLM 0.23.0 is not installed (see scripts/test: requirements-vllm*.txt, pip install --no-deps vllm==0.23.0)"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    base = tmp_path_factory.mktemp("sweep-e2e")
    workspace = load_workspace()
    full = plan(Request(**REQUEST), workspace)
    ladder = ladder_steps(full, workspace.catalog, only=list(SIGNS))
    cost = StepCost(prompts_per_concurrency=4, min_prompts=4, warmups=1, accuracy_prompts=4)
    write_ladder(full, workspace, ladder, base / "ladder", cost=cost,
                 sweep=sweep_options(parse_slo(SLO), low=1, high=16, resolution=0))
    host = SimHost(base / "host", scratch_tree(base), profile())
    first = run_ladder(base / "ladder", host)
    report = build_report(base / "ladder")
    last = ladder.steps[-1].id
    kept = base / "kept"
    shutil.copytree(base / "ladder" / "results" / last, kept)
    shutil.rmtree(base / "ladder" / "results" / last)
    host.write_profile(profile(dies=True))
    died = run_ladder(base / "ladder", host, "--only", last)
    died_report = build_report(base / "ladder")
    shutil.copytree(base / "ladder" / "results" / last, base / "died")
    shutil.rmtree(base / "ladder" / "results" / last)
    shutil.copytree(kept, base / "ladder" / "results" / last)
    first_step = ladder.steps[0].id  # again, on a server too slow for the SLO at any load
    shutil.move(base / "ladder" / "results" / first_step, base / "kept-first")
    host.write_profile({**profile(), "base_ms": {"1": 40.0}})
    never = run_ladder(base / "ladder", host, "--only", first_step)
    never_report = build_report(base / "ladder")
    shutil.rmtree(base / "ladder" / "results" / first_step)
    shutil.move(base / "kept-first", base / "ladder" / "results" / first_step)
    return SimpleNamespace(never=never, never_report=never_report, base=base, ladder=base / "ladder", steps=ladder.steps, first=first, report=report,
                           died=died, died_report=died_report, last=last, workspace=workspace)


def test_the_sweep_finds_each_steps_injected_knee(run):
    code, out = run.first
    assert code == 0, out
    for step in run.steps:
        cap = run.report.capacity[step.id]
        assert (cap.status, cap.capacity, cap.upper) == ("found", knee(step.recipes), knee(step.recipes) + 1), \
            (step.id, cap.runs, cap.curve)
    assert len({run.report.capacity[s.id].capacity for s in run.steps}) == len(run.steps)  # different knees
    assert f"capacity c{knee(run.steps[0].recipes)}" in out


def test_each_probe_is_vllms_result_with_goodput_and_the_slos_percentile(run):
    sweep = json.loads((run.ladder / "results" / run.steps[0].id / "r1" / "sweep.json").read_text())
    assert sweep["client"] == "in-process"
    assert [p["concurrency"] for p in sweep["probes"]] == [1, 2, 4, 3]  # doubling to a miss, then bisection
    probe = json.loads((run.ladder / "results" / run.steps[0].id / "r1" / "sweep" / "c4.json").read_text())
    assert probe["max_concurrency"] == 4 and probe["num_prompts"] == 16
    assert probe["p90_tpot_ms"] > 32 and probe["request_goodput"] is not None
    curve = run.report.capacity[run.steps[0].id].curve
    assert [p["met"] for p in curve] == [True, True, True, False]
    assert all(p["request_goodput"] is not None for p in curve)


def test_capacity_gains_are_attributed_per_recipe(run):
    for a in run.report.attributions:
        moved = sum(KNEE_MOVES[r] for r in a.recipes)
        assert (a.capacity.value, a.capacity.verdict) == (moved, "gain"), a


def test_the_report_shows_capacity_goodput_and_the_curves(run):
    files = report_files(run.report)
    assert files["capacity.png"].startswith(b"\x89PNG")
    md = files["report.md"].decode()
    assert "## Capacity under the SLO" in md and f"`{parse_slo(SLO).text()}`" in md and "--goodput ttft:1000 tpot:32" in md
    data = json.loads(files["report.json"])
    assert [s["capacity"] for s in data["capacity"]["steps"]] == [knee(s.recipes) for s in run.steps]
    assert report_files(run.report) == files  # deterministic


def test_a_runs_cost_is_the_users_to_set(run):
    r1 = run.ladder / "results" / run.steps[0].id / "r1"
    bench = json.loads((r1 / "c1.json").read_text())
    assert bench["num_prompts"] == 4  # --prompts-per-concurrency 4 --min-prompts 4 reached bench.sh
    assert len(json.loads((r1 / "accuracy.json").read_text())["outputs"]) == 4
    assert run.report.gate.passed, run.report.gate.failures + run.report.gate.unchecked


def cap_upper(run) -> int:
    return run.died_report.capacity[run.last].upper


def test_a_server_that_dies_mid_sweep_is_reported_honestly(run):
    code, out = run.died
    assert code == 0, out  # the step's other results are kept; the sweep says what happened
    sweep = json.loads((run.base / "died" / "r1" / "sweep.json").read_text())
    assert sweep["status"] == "server-died" and sweep["died_at"] == cap_upper(run)
    cap = run.died_report.capacity[run.last]
    assert cap.status == "server-died" and cap.capacity <= DIES_ABOVE < cap.upper <= 2 * DIES_ABOVE, cap.runs
    assert any("the server died during the capacity sweep" in issue for issue in run.died_report.issues)
    (a,) = [a for a in run.died_report.attributions if a.step == run.last]
    # a dead server's last met load is a lower bound: no capacity delta, the crash said (as the record leaves it out)
    assert (a.capacity.value, a.capacity.verdict) == (None, "unavailable") and "died" in a.capacity.why_unavailable
    assert any("no capacity delta" in f and "died during the capacity sweep" in f for f in a.flags), a.flags
    assert not any("capacity regression" in f for f in a.flags)
    log = (run.base / "died" / "r1" / "sweep.log").read_text()
    assert f"the server died at c{cap.upper}: the capacity is a lower bound" in log and "None]" not in log
    assert "the server does not answer /health" in out or "the server stopped answering /health" in \
        (run.base / "died" / "r1" / "sweep.log").read_text()


def test_a_record_carries_each_steps_capacity(run):
    from optkit.catalog.record_schema import Record
    from optkit.measure.record import capacity_of

    capacity = capacity_of(run.report)
    assert capacity["slo"] == parse_slo(SLO).text() == "ttft_p99<=1s,tpot_p90<=32ms"
    assert {s: v["capacity"] for s, v in capacity["steps"].items()} == {s.id: knee(s.recipes) for s in run.steps}
    assert capacity_of(run.died_report)["steps"].get(run.last) is None  # a sweep whose server died is not recorded
    assert Record.model_fields["capacity"].default is None


def test_a_record_of_the_run_carries_capacity_and_is_accepted(run, tmp_path):
    from optkit.catalog.records import load_records
    from optkit.measure.record import write_record

    root = tmp_path / "mine"
    path = write_record(run.report, root, run.workspace.catalog)
    data = json.loads(path.read_text())
    assert data["capacity"]["steps"][run.steps[0].id]["capacity"] == knee(run.steps[0].recipes)
    for a in run.report.attributions:
        assert data["recipes"][a.recipes[0]]["capacity_delta"] == sum(KNEE_MOVES[r] for r in a.recipes)
        assert data["recipes"][a.recipes[0]]["capacity_verdict"] == "gain"
    catalog = load_workspace(catalogs=[root]).catalog
    records = load_records(catalog.root, catalog)
    assert not records.refused, records.refused
    assert {e.name for rid in SIGNS for e in records.of(rid)} == {path.stem}


def test_a_step_that_never_meets_the_slo_has_capacity_zero_and_says_so(run):
    code, out = run.never
    assert code == 0, out
    first = run.steps[0].id
    cap = run.never_report.capacity[first]
    assert (cap.status, cap.capacity, cap.upper) == ("below-lowest", 0, 1), cap.curve
    assert [p["concurrency"] for p in cap.curve] == [1]  # one probe
    md = report_files(run.never_report)["report.md"].decode()
    assert f"| `{first}` | 0 | [0, 1) | below the lowest probe (c1) |" in md
    (a,) = [a for a in run.never_report.attributions if a.before == first]
    assert (a.capacity.value, a.capacity.verdict) == (knee(run.steps[1].recipes), "gain")
