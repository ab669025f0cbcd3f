"""The simulated server's load model (tests/measure/sim_server.py): batching, a knee moved per step by
its recipes, queueing behind a slot limit, and a server that dies above an injected load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sim_server  # noqa: E402
from simhost import free_port  # noqa: E402

PROFILE = {"base_ms": {"1": 20.0}, "ttft_ms": 10.0, "noise_ms": 0.0, "startup_s": 0.0, "seed": 1,
           "recipes": {"r": {"env": {"R": "1"}, "load": {"knee": 4}}, "d": {"env": {"D": "1"}, "load": {"die_above": 2}}},
           "load": {"knee": 2, "steep": 0.5, "batch_ms": 0.1}}


@pytest.mark.parametrize("argv, load, slots", [
    pytest.param(["m"], {}, 256, id="vllms-default"),
    pytest.param(["m", "--max-num-seqs", "4"], {}, 4, id="max-num-seqs"),
    pytest.param(["m", "--max-num-seqs", "4"], {"slots": 2}, 2, id="profile-lower"),
    pytest.param(["m", "--max-num-seqs", "4"], {"slots": 64}, 4, id="profile-higher"),
])
def test_the_decode_slots_are_the_servers_max_num_seqs(argv, load, slots):
    assert sim_server.decode_slots(load, sim_server.parse_argv(argv)) == slots


def test_latency_grows_with_batching_then_steeply_past_the_knee():
    load = sim_server.load_model(PROFILE, [])
    assert [round(sim_server.loaded_ms(20.0, n, load), 3) for n in (1, 2, 3, 4)] == [20.0, 20.1, 30.3, 40.6]
    moved = sim_server.load_model(PROFILE, ["r"])
    assert moved["knee"] == 6 and sim_server.loaded_ms(20.0, 6, moved) == pytest.approx(20.5)
    assert sim_server.load_model({k: v for k, v in PROFILE.items() if k != "load"}, ["r"]) == {}  # no load: as before


def _serve(tmp_path: Path, profile: dict, env: dict | None = None, argv: tuple[str, ...] = ()):
    port = free_port()
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({**profile, "tree": str(tmp_path), "log": str(tmp_path / "log")}))
    proc = subprocess.Popen([sys.executable, str(Path(sim_server.__file__)), "m", "--port", str(port), *argv],
                            env={**os.environ, "SIM_PROFILE": str(path), **(env or {})}, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc, port
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the simulated server did not start"
            time.sleep(0.1)


def _stream(port: int, out: list, tokens: int = 5) -> None:
    body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": tokens, "stream": True}).encode()
    start = time.monotonic()
    first = None
    try:
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                                           {"Content-Type": "application/json"}), timeout=30) as r:
            done = False
            for line in r:
                if line.startswith(b"data: {") and first is None:
                    first = time.monotonic() - start
                done = done or line.startswith(b"data: [DONE]")
        out.append(("ok" if done else "cut", first, time.monotonic() - start))
    except Exception as exc:  # noqa: BLE001 - a reset, an incomplete chunked read: the server went away
        out.append(("error", first, str(exc)))


@pytest.mark.parametrize("load, argv", [
    pytest.param({"slots": 1}, (), id="profile-slots"),
    pytest.param({}, ("--max-num-seqs", "1"), id="max-num-seqs-as-vllm"),
    pytest.param({"slots": 8}, ("--max-num-seqs", "1"), id="max-num-seqs-below-the-profiles-slots"),
])
def test_requests_beyond_the_slots_queue_for_their_first_token(tmp_path, load, argv):
    """As vLLM's scheduler: at most --max-num-seqs requests decode at once, the rest wait in the queue."""
    proc, port = _serve(tmp_path, {**PROFILE, "load": load}, argv=argv)
    try:
        out: list = []
        threads = [threading.Thread(target=_stream, args=(port, out)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        (_, first_a, end_a), (_, first_b, _) = sorted(out, key=lambda o: o[1])
        assert first_a < 0.5 and first_b >= end_a - 0.02  # the second waited for the first to finish
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_server_loaded_above_die_above_dies(tmp_path):
    proc, port = _serve(tmp_path, PROFILE, {"D": "1"})
    out: list = []
    threads = [threading.Thread(target=_stream, args=(port, out, 50)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert proc.wait(10) == 3 and "the server dies (injected)" in proc.stderr.read()
    assert len(out) == 3 and all(status in ("error", "cut") for status, _, _ in out), out  # no stream finished


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _queue_client(port: int, tokens: int = 6):
    """A small benchmark client for the sweep (not vLLM's): ``--num-prompts`` streaming requests at most
    ``--max-concurrency`` at a time, written as vLLM's result keys the SLO reads."""
    def run(argv: list[str]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        c, n = int(_flag(argv, "--max-concurrency")), int(_flag(argv, "--num-prompts"))
        out: list = []
        start = time.monotonic()
        with ThreadPoolExecutor(c) as pool:
            list(pool.map(lambda _: _stream(port, out, tokens), range(n)))
        elapsed = time.monotonic() - start
        ok = [o for o in out if o[0] == "ok"]
        tpot = [(end - first) / (tokens - 1) * 1000 for _, first, end in ok]
        result = {"completed": len(ok), "failed": n - len(ok), "max_concurrency": c, "num_prompts": n,
                  "p99_tpot_ms": max(tpot), "p99_ttft_ms": max(first for _, first, _ in ok) * 1000,
                  "output_throughput": len(ok) * tokens / elapsed}
        Path(_flag(argv, "--result-dir"), _flag(argv, "--result-filename")).write_text(json.dumps(result))

    return run


@pytest.mark.parametrize("sized, capacity, status", [
    pytest.param(False, 8, "at-most-high", id="unsized-the-queue-passes-for-capacity"),
    pytest.param(True, 2, "found", id="sized-a-queued-probe-is-a-miss"),
])
def test_a_sweep_against_a_server_that_queues_beyond_max_num_seqs(tmp_path, sized, capacity, status):
    """Finding 12 against the simulated server: with --max-num-seqs 2, loads above 2 queue (TTFT grows,
    TPOT and throughput do not), so a TPOT-only SLO "holds" up to the highest probe; with the step's
    scheduler known, the sweep counts those probes as misses that say requests queue."""
    from optkit.measure.sweep import run_sweep, sweep_settings
    from optkit.measure.sweep_fit import scheduler
    from optkit.resolve.slo import parse_slo

    proc, port = _serve(tmp_path, {**PROFILE, "load": {"batch_ms": 0.1}}, argv=("--max-num-seqs", "2"))
    try:
        settings = sweep_settings(parse_slo("tpot_p99<=60ms"), low=1, high=8, resolution=0, prompts_per_concurrency=2,
                                  min_prompts=2, warmups=0, client_args=[])
        sched = scheduler(["vllm", "serve", "m", "--max-num-seqs", "2"]) if sized else None
        data = run_sweep(settings, model="m", served_name="m", host="127.0.0.1", port=port, out_dir=tmp_path / "out",
                         client=_queue_client(port), client_name="queue-client", scheduler=sched, log=lambda s: None)
    finally:
        proc.terminate()
        proc.wait(10)
    assert (data["status"], data["capacity"]) == (status, capacity), data["probes"]
    probes = {p["concurrency"]: p for p in data["probes"]}
    assert probes[4]["output_throughput"] < 1.5 * probes[2]["output_throughput"]  # flat beyond the slots: the queue
    assert sized == any("requests queue" in v for p in data["probes"] for v in p["violations"])
