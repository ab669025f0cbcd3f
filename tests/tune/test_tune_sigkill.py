"""A SIGKILL of ``optkit measure tune`` at a random point of a trial (seeded) loses at most that trial: the next
run stops the server the killed run left holding the port (it runs in its own session), marks the trial failed,
queues its point again (``retry_of``) and finishes the budget; every other trial is kept as it was."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_support import measure_argv, need_vllm, run_measure, sim_host, snapshot, study, write_tune  # noqa: E402
from optkit.tune.host import port_open  # noqa: E402

pytestmark = [pytest.mark.vllm]

SEED = 27


def test_a_sigkill_during_a_trial_loses_at_most_that_trial(tmp_path):
    need_vllm()
    rng = random.Random(SEED)
    kill_at, delay = rng.choice([1, 2]), rng.uniform(0.3, 1.2)  # during the n-th server's trial
    write_tune(tmp_path / "tune")
    host = sim_host(tmp_path, oom=False)
    with open(tmp_path / "killed.log", "w") as out:
        proc = subprocess.Popen(measure_argv(tmp_path / "tune", host, "--budget", "3"), cwd=host.root, env=host.env(),
                                stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while len(host.starts()) < kill_at:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "killed.log").read_text()
            time.sleep(0.05)
        time.sleep(delay)
        running = list((tmp_path / "tune" / "trials").glob("*/server.pid"))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert len(running) == 1, (kill_at, delay, (tmp_path / "killed.log").read_text())  # killed during a trial
    killed = int(running[0].parent.name)
    before = snapshot(tmp_path / "tune")
    assert before[killed][0] == "RUNNING"
    assert port_open("127.0.0.1", host.port)  # the killed run's server outlived it, holding the port

    again = run_measure(tmp_path / "tune", host, "--budget", "3")
    assert again.returncode == 0, again.stdout
    assert f"tune: trial {killed}: stopped its server" in again.stdout
    assert f"trial {killed} was interrupted" in again.stdout
    trials = study(tmp_path / "tune").get_trials()
    lost = [t for t in trials if t.state.name == "FAIL"]
    assert [t.number for t in lost] == [killed]  # at most the running trial
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == killed]
    assert retry.params == lost[0].params and retry.state.name == "COMPLETE" and retry.user_attrs["started"]
    for number, (state, values, params, attrs) in before.items():  # every other trial kept as it was
        if number != killed:
            assert (trials[number].state.name, trials[number].values, trials[number].params) == (state, values, params)
    measured = [t for t in trials if t.user_attrs.get("started") and t.state.name == "COMPLETE"]
    assert len(measured) == 3  # the budget counts the interrupted trial once, as its retry
    assert len(host.starts()) == 4  # three measured + the one the kill interrupted
    assert not list((tmp_path / "tune" / "trials").glob("*/server.pid"))
    assert not port_open("127.0.0.1", host.port)
