"""A tune bundle and a simulated NPU host for the tune tests (tests/measure/simhost.py, the knob mode of
tests/measure/sim_server.py): each trial's real serve.sh starts the simulated server, whose latency and memory
follow the launch's knobs, and the real vLLM benchmark client measures it.

The space is cut to what runs in seconds: layouts TP1xDP1 (refused by the resolver: the weights do not fit one
device), TP2xDP1 and TP2xDP2; every other knob open, the sweep c1 … c8 with two requests per slot. The
simulated device has ``HBM_GIB``: a launch needs 35 GiB of weights per device at TP 2 plus KV and activations
(``sim_server.oom_gib``), so MTP with many sequences, or large batched tokens, runs out of memory at start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "measure"))

import sim_server  # noqa: E402
from simhost import REPO, TOKENIZER, SimHost  # noqa: E402

SLO = "tpot_p90<=15ms,ttft_p99<=1s"
HBM_GIB = 42.0
KNOBS = {"tp_gain": 0.5, "tokens_ms": 0.5, "eager_ms": 6.0, "spec_ms": 2.0, "accept": 0.7,
         "hbm_gib": HBM_GIB, "weights_gib": 70.0, "seq_gib": 1.0, "act_gib": 0.25}
TUNE_ARGS = ["qwen3.5-35b", "--target", "910c", "--input-len", "32", "--output-len", "8", "--slo", SLO,
             "--sweep-max", "8", "--sweep-resolution", "0.5", "--prompts-per-concurrency", "2", "--min-prompts", "2",
             "--warmups", "0", "--choices", "layout=TP1xDP1,TP2xDP1,TP2xDP2"]
ECHO_VLLM = """#!/usr/bin/env bash
{python} -c 'import json, sys; print(json.dumps(sys.argv[2:]))' "$@"
"""


def profile(*, oom: bool = True) -> dict:
    """The knob mode: 10 ms a token at one request, +1.5 ms per further request on a DP rank."""
    knobs = KNOBS if oom else {k: v for k, v in KNOBS.items() if k != "hbm_gib"}
    return {"base_ms": {"1": 10.0}, "ttft_ms": 10.0, "noise_ms": 0.2, "startup_s": 0.2, "seed": 3, "recipes": {},
            "knobs": knobs, "load": {"batch_ms": 1.5}}


def optkit(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """This checkout's optkit as a user runs it (``python -m optkit``: the console script may be another's)."""
    full = {**(env or os.environ), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "optkit", *args], env=full, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def write_tune(out: Path, *extra: str) -> dict:
    proc = optkit("tune", *TUNE_ARGS, *extra, "-o", str(out))
    assert proc.returncode == 0, proc.stdout
    return json.loads((out / "tune.json").read_text())


def sim_host(root: Path, *, oom: bool = True) -> SimHost:
    tree = root / "no-tree"  # the knob mode reads no tree; the simulation wants a directory
    tree.mkdir(parents=True)
    return SimHost(root / "host", tree, profile(oom=oom))


def measure_argv(tune_dir: Path, host: SimHost, *extra: str) -> list[str]:
    return [sys.executable, "-m", "optkit", "measure", "tune", str(tune_dir), "--model", str(host.root / TOKENIZER),
            "--port", str(host.port), "--client", "in-process", "--health-timeout", "60", *extra]


def run_measure(tune_dir: Path, host: SimHost, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(measure_argv(tune_dir, host, *extra), cwd=host.root, env=host.env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def study(tune_dir: Path):
    from optkit.tune.study import open_study

    return open_study(tune_dir, json.loads((tune_dir / "tune.json").read_text()))


def launch_argv(bundle: Path, host: SimHost, tmp: Path) -> list[str]:
    """The argv a trial bundle's serve.sh gives ``vllm serve`` (a stand-in vllm that prints it)."""
    bin_dir = tmp / "echo-bin"
    if not bin_dir.is_dir():
        bin_dir.mkdir(parents=True)
        (bin_dir / "vllm").write_text(ECHO_VLLM.format(python=sys.executable))
        (bin_dir / "vllm").chmod(0o755)
    env = {**host.env(), "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    proc = subprocess.run(["bash", str(bundle / "serve.sh"), "--model", str(host.root / TOKENIZER),
                           "--served-model-name", "qwen3.5-35b-a3b", "--port", str(host.port)],
                          env=env, cwd=host.root, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def predicted_oom(argv: list[str], knobs: dict = KNOBS) -> float | None:
    """What the simulation does with this launch: GiB over the device (None: it starts)."""
    return sim_server.oom_gib(knobs, sim_server.launch(sim_server.parse_argv(argv)))


def need_vllm() -> None:
    import importlib.util

    import pytest

    if importlib.util.find_spec("vllm") is None:
        message = "vLLM 0.23.0 is not installed (see scripts/test: requirements-vllm*.txt, pip install --no-deps vllm==0.23.0)"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)


def snapshot(tune_dir: Path) -> dict[int, tuple]:
    return {t.number: (t.state.name, t.values, t.params, dict(t.user_attrs)) for t in study(tune_dir).get_trials()}


__all__ = ["SLO", "KNOBS", "TUNE_ARGS", "profile", "optkit", "write_tune", "sim_host", "run_measure", "measure_argv",
           "study", "snapshot", "need_vllm", "launch_argv", "predicted_oom", "sim_server", "SimHost", "REPO", "TOKENIZER"]
