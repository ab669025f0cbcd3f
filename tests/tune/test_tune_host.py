"""``optkit.tune.host`` and the trial's edges: the log line a failed start is told by, a start that runs out of
memory (the simulated server), a port already held (never measured, the trial queued again), the server a
killed run left (``reap``), and the early stop of a trial that cannot beat the best so far."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_support import TOKENIZER, need_vllm, sim_host, study, write_tune  # noqa: E402
from optkit.measure.sweep import Probe, Search  # noqa: E402
from optkit.resolve.plan import load_workspace  # noqa: E402
from optkit.tune import TuneError  # noqa: E402
from optkit.tune.candidate import Candidate, resolve_point  # noqa: E402
from optkit.tune.host import SERVER_PID, HostExecutor, _start_time, failure_line  # noqa: E402
from optkit.tune.study import run_tune, started_trials, stop_rule  # noqa: E402

VLLM_OOM = """INFO 05-01 [api_server.py] vLLM API server version 0.23.0
ERROR 05-01 [core.py] EngineCore failed to start.
Traceback (most recent call last):
  File "vllm/v1/engine/core.py", line 498, in run_engine_core
RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)
Traceback (most recent call last):
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


@pytest.mark.parametrize("log, line", [
    pytest.param(VLLM_OOM, "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total "
                 "capacity)", id="oom-over-the-summary"),
    pytest.param("INFO up\nValueError: max_num_batched_tokens (1024) is smaller than max_model_len\n"
                 "RuntimeError: Engine core initialization failed. See root cause above.\n",
                 "ValueError: max_num_batched_tokens (1024) is smaller than max_model_len", id="refusal-over-summary"),
    pytest.param("INFO a\nRuntimeError: Engine core initialization failed. See root cause above.\n",
                 "RuntimeError: Engine core initialization failed. See root cause above.", id="only-a-summary"),
    pytest.param("INFO loading\nINFO killed\n", "INFO killed", id="no-error-named"),
    pytest.param("\n \n", "the server wrote nothing", id="empty"),
    pytest.param("x" * 500 + " error\n", "x" * 400, id="cut-at-400"),
])
def test_failure_line_picks_the_line_that_says_why(log, line):
    assert failure_line(log) == line


@pytest.fixture(scope="module")
def tune(tmp_path_factory):
    base = tmp_path_factory.mktemp("tune-host")
    data = write_tune(base / "tune")
    return base, data, load_workspace()


def point(data, **knobs) -> dict:
    return {**{d["name"]: d["start"] for d in data["space"]["dims"]}, **{k.replace("_", "-"): v for k, v in knobs.items()}}


def executor(data, host, **kw) -> HostExecutor:
    return HostExecutor(data["sweep"], tree=None, model=str(host.root / TOKENIZER), served_name=data["served_name"],
                        port=host.port, health_timeout=60, log=lambda s: None, **kw)


def on_path(monkeypatch, host) -> None:
    for name, value in host.env().items():
        monkeypatch.setenv(name, value)


def test_a_start_out_of_memory_is_a_failed_start_with_the_log_line(tune, tmp_path, monkeypatch):
    base, data, workspace = tune
    host = sim_host(tmp_path)
    on_path(monkeypatch, host)
    candidate = resolve_point(data["request"], point(data, speculative="mtp:4"), workspace)
    assert isinstance(candidate, Candidate)
    outcome = executor(data, host, client=lambda argv: pytest.fail("no probe on a failed start"),
                       client_name="none").run(candidate, None, tmp_path / "trial")
    assert outcome.status == "failed-start" and not outcome.feasible
    assert outcome.reason.startswith("exited 1 before answering /health: RuntimeError: NPU out of memory. Tried to "
                                     "allocate"), outcome.reason
    assert len(host.starts()) == 1 and not (tmp_path / "trial" / SERVER_PID).exists()


def test_a_port_already_in_use_is_never_measured_and_the_trial_waits(tmp_path, monkeypatch):
    _, workspace = write_tune(tmp_path / "tune"), load_workspace()
    data = json.loads((tmp_path / "tune" / "tune.json").read_text())
    host = sim_host(tmp_path)
    on_path(monkeypatch, host)
    with socket.socket() as held:  # another server holds the port
        held.bind(("127.0.0.1", host.port))
        held.listen()
        ex = executor(data, host, client=lambda argv: pytest.fail("nothing to measure"), client_name="none")
        with pytest.raises(TuneError, match=rf"port {host.port} on 127.0.0.1 is in use before trial 0000's server "
                                            "starts .*give another --port; the trial is queued again"):
            run_tune(tmp_path / "tune", data, ex, workspace, budget=1, log=lambda s: None)
    assert host.starts() == []  # nothing started
    s = study(tmp_path / "tune")
    first, queued = s.get_trials()
    assert first.state.name == "FAIL" and queued.state.name == "WAITING"
    assert queued.user_attrs["retry_of"] == 0 and queued.system_attrs["fixed_params"] == first.params
    assert started_trials(s) == 0  # an interrupted trial costs no start of the budget


def test_reap_stops_the_server_a_killed_run_left_and_nothing_else(tmp_path):
    bundle = tmp_path / "trial" / "bundle"
    bundle.mkdir(parents=True)
    (bundle / "serve.sh").write_text("exec sleep 60\n")
    ex = HostExecutor({}, tree=None, model="m", served_name="m", client=lambda argv: None, client_name="x")
    with open(tmp_path / "trial" / "server.log", "ab") as log:
        proc = ex._start(bundle, log)
    assert json.loads((tmp_path / "trial" / SERVER_PID).read_text())["pid"] == proc.pid
    assert ex.reap(tmp_path / "trial").startswith(f"stopped its server (process group {proc.pid})")
    assert proc.wait(10) != 0 and not (tmp_path / "trial" / SERVER_PID).exists()
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a later process with a recorded pid
    try:
        (tmp_path / "trial" / SERVER_PID).write_text(json.dumps({"pid": other.pid, "started": "0"}))
        assert ex.reap(tmp_path / "trial") is None and other.poll() is None  # not the recorded process: left alone
        assert ex.reap(tmp_path / "trial") is None  # and the stale record is gone
    finally:
        other.kill()
        other.wait()
    assert _start_time(other.pid) is None


class _Search:
    def __init__(self, high, *probes):
        self.search = Search(1, high, 0.5)
        for c, met, tput in probes:
            self.search.record(Probe(c, met, [] if met else ["x"], None, {"output_throughput": tput}))


@pytest.mark.parametrize("incumbent, cards, probes, stops", [
    pytest.param(None, 1, [(1, True, 100.0)], False, id="no-incumbent"),
    pytest.param(1000.0, 1, [(1, True, 100.0)], True, id="c1-at-most-800-below-1000"),
    pytest.param(500.0, 1, [(1, True, 100.0)], False, id="c1-at-most-800-above-500"),
    pytest.param(790.0, 1, [(1, True, 100.0)], False, id="within-the-resolution"),
    pytest.param(150.0, 1, [(1, True, 100.0), (2, False, 150.0)], True, id="capacity-below-c2"),
    pytest.param(450.0, 2, [(1, True, 100.0)], True, id="per-card-at-most-400"),
    pytest.param(10.0, 1, [(1, False, 0.0)], False, id="nothing-met"),
])
def test_stop_rule_bounds_what_the_trial_can_still_reach(incumbent, cards, probes, stops):
    why = stop_rule(incumbent, cards)(_Search(8, *probes).search)
    assert (why is not None) == stops, why
    if stops:
        assert "below the best so far" in why


@pytest.mark.vllm
def test_a_trial_that_cannot_beat_the_incumbent_stops_early(tune, tmp_path, monkeypatch):
    need_vllm()
    from optkit.measure.sweep import in_process_client

    base, data, workspace = tune
    host = sim_host(tmp_path)
    on_path(monkeypatch, host)
    candidate = resolve_point(data["request"], point(data), workspace)
    outcome = executor(data, host, client=in_process_client(), client_name="in-process").run(
        candidate, 1e6, tmp_path / "trial")
    assert outcome.status == "stopped-early" and outcome.probes == 1, outcome
    assert "below the best so far (1000000.0)" in outcome.reason
    sweep = json.loads((tmp_path / "trial" / "sweep.json").read_text())
    assert sweep["status"] == "stopped-early" and sweep["stopped"] == outcome.reason
    assert outcome.feasible and outcome.capacity == 1  # what it measured stands, as a lower bound
    assert not (tmp_path / "trial" / SERVER_PID).exists()
