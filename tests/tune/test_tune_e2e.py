"""``optkit tune`` end to end on this CPU machine: the tune bundle written by ``optkit tune``, its trials run by
``optkit measure tune`` (as run-tune.sh runs it) against the simulated vLLM server in its knob mode (latency and
memory follow the launch's argv: tests/tune/tune_support.py), with the real vLLM 0.23.0 benchmark client in
process. The tune runs with a budget of 2 starts, then is resumed with 4 after an out-of-memory point and a point
the resolver refuses are queued (Optuna's own enqueue, as a user's study could hold them); about half a minute.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_support import launch_argv, need_vllm, predicted_oom, run_measure, sim_host, snapshot, study, write_tune  # noqa: E402

pytestmark = [pytest.mark.vllm]

OOM_POINT = {"speculative": "mtp:4", "max-num-seqs": 8, "capture-share": "1"}  # 35 + 8 × 5 / 2 + 1 GiB > 42
INVALID_POINT = {"layout": "TP1xDP1"}  # the weights do not fit one device: the resolver refuses it


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    need_vllm()
    base = tmp_path_factory.mktemp("tune-e2e")
    data = write_tune(base / "tune")
    host = sim_host(base)
    first = run_measure(base / "tune", host, "--budget", "2")
    after_first = snapshot(base / "tune")
    start = {d["name"]: d["start"] for d in data["space"]["dims"] if not d["fixed"]}
    queued = study(base / "tune")
    # a move the first run queued (none when its budget ran out first) runs before the points below
    queued_moves = sum(1 for t in queued.get_trials() if t.state.name == "WAITING")
    for point in (OOM_POINT, INVALID_POINT):
        queued.enqueue_trial({**start, **point})
    second = run_measure(base / "tune", host, "--budget", str(4 + queued_moves))
    trials = study(base / "tune").get_trials()
    return SimpleNamespace(base=base, tune=base / "tune", host=host, first=first, second=second, data=data,
                           queued_moves=queued_moves,
                           after_first=after_first, trials=trials,
                           started=[t for t in trials if t.user_attrs.get("started")],
                           invalid=[t for t in trials if "invalid" in t.user_attrs])


def trial_dir(run, t) -> Path:
    return run.tune / "trials" / f"{t.number:04d}"


def test_the_budget_of_starts_is_spent_and_each_started_trial_keeps_its_files(tuned):
    assert tuned.first.returncode == 0, tuned.first.stdout
    assert tuned.second.returncode == 0, tuned.second.stdout
    budget = 4 + tuned.queued_moves
    assert f"the budget of {budget} server starts is spent" in tuned.second.stdout
    assert len(tuned.started) == budget and all(t.state.name == "COMPLETE" for t in tuned.started)
    for t in tuned.started:
        d = trial_dir(tuned, t)
        assert (d / "bundle" / "serve.sh").is_file() and (d / "server.log").is_file(), t.number
        assert not (d / "server.pid").exists()  # the server was stopped
        if t.user_attrs["status"] != "failed-start":
            sweep = json.loads((d / "sweep.json").read_text())
            assert sweep["client"] == "in-process" and sweep["capacity"] == t.user_attrs["capacity"] > 0
            assert t.values[0] == pytest.approx(t.user_attrs["throughput"] / t.user_attrs["cards"])
    assert sorted(p.name for p in (tuned.tune / "trials").iterdir()) == [f"{t.number:04d}" for t in tuned.started]


def test_an_out_of_memory_start_is_a_failed_start_with_the_log_line_and_the_search_goes_on(tuned):
    failed = [t for t in tuned.started if t.user_attrs["status"] == "failed-start"]
    assert failed, [t.user_attrs["status"] for t in tuned.started]
    for t in failed:
        assert "RuntimeError: NPU out of memory. Tried to allocate" in t.user_attrs["reason"], t.user_attrs["reason"]
        assert t.values == [0.0] and t.user_attrs["feasible"] is False and t.user_attrs["constraint"] == 1.0
    oom = next(t for t in failed if all(t.params.get(k) == v for k, v in OOM_POINT.items()))
    assert any(t.number > oom.number for t in tuned.started)  # the search went on after it
    for t in tuned.started:  # the simulation is consistent: out of memory exactly where it says
        argv = launch_argv(trial_dir(tuned, t) / "bundle", tuned.host, tuned.base)
        assert (predicted_oom(argv) is not None) == (t.user_attrs["status"] == "failed-start"), (t.number, argv)


def test_no_invalid_point_ever_started_a_server(tuned):
    assert any(t.params.get("layout") == "TP1xDP1" and "does not fit 910c at TP 1" in t.user_attrs["invalid"]
               for t in tuned.invalid)
    for t in tuned.invalid:
        assert t.user_attrs["invalid"] and t.values == [0.0] and t.user_attrs["constraint"] == 1.0
        assert not t.user_attrs.get("started") and not trial_dir(tuned, t).exists()
    starts = [s["argv"] for s in tuned.host.starts()]  # one line per start of the simulated server
    bundles = [launch_argv(trial_dir(tuned, t) / "bundle", tuned.host, tuned.base) for t in tuned.started]
    assert starts == bundles  # every start is a started trial's own launch, in order; nothing else started


def test_the_tune_resumes_where_it_stopped(tuned):
    assert "the budget of 2 server starts is spent" in tuned.first.stdout
    first_started = [n for n, (_, _, _, attrs) in tuned.after_first.items() if attrs.get("started")]
    assert len(first_started) == 2
    now = {t.number: (t.state.name, t.values, t.params, dict(t.user_attrs)) for t in tuned.trials}
    for number, before in tuned.after_first.items():
        if before[0] != "WAITING":  # a queued move runs in the second run
            assert now[number] == before  # the first run's trials are kept as they were
    budget = 4 + tuned.queued_moves
    assert f"(1/{budget} starts)" not in tuned.second.stdout and f"(3/{budget} starts)" in tuned.second.stdout
    assert tuned.trials[0].user_attrs.get("rule_based") and tuned.trials[0].params == {
        d["name"]: d["start"] for d in tuned.data["space"]["dims"] if not d["fixed"]}
