"""Where and how the probe scripts run (``vllm_probe.py``: vLLM's own parser and config classes;
``ascend_config_probe.py``: the tree's ``AscendConfig``): the Python of the vLLM the bundle's release
pairs with, found without importing vLLM, and what the parser is given for each node of a plan.
The probes import vLLM in their own process; optkit never does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from optkit.errors import OptkitError

PROBE_TIMEOUT = 600
PROBE_LEADER_IP = "192.0.2.1"
"""The leader's address in the argv the parser sees (TEST-NET-1, RFC 5737): parsing contacts nothing."""


def find_vllm_python(version: str, given: Path | None = None) -> tuple[str | None, str]:
    """(the Python to run vLLM ``version`` in, how it was found — or why there is none): ``given``;
    else this Python if its vLLM is that version (read from its metadata, not imported); else the
    virtualenv ``scripts/vllm-venv VERSION`` builds under the optkit cache."""
    from importlib.metadata import PackageNotFoundError, version as installed_version

    from optkit.catalog.paths import cache_dir

    if given is not None:
        return str(given), f"--vllm-python {given}"
    try:
        here = installed_version("vllm")
    except PackageNotFoundError:
        here = None
    if here == version:
        return sys.executable, "this Python"
    venv = cache_dir() / "venvs" / f"vllm-{version}"
    if (venv / ".complete").is_file():
        return str(venv / "bin" / "python"), str(venv)
    return None, (f"vLLM {version} not installed (this Python has {here or 'no vLLM'}, and there is no {venv}); "
                  f"build it with `bash scripts/vllm-venv {version}` or pass --vllm-python")


def probe_request(lock: dict, node: int = 0) -> dict:
    """What ``optkit.bundle.vllm_probe`` gets: the argv after ``vllm serve`` with serve.sh's defaults
    and, on a multi-node plan, the values serve.sh gives node ``node`` (a worker's arguments added)."""
    launch = lock["launch"]
    params = {f"${name}": value or name.lower() for name, value in launch["parameters"].items()}
    argv, labels = launch["argv"][2:], launch["argv_sources"][2:]
    nodes = launch.get("nodes")
    if nodes:
        params.update({"$LEADER_IP": PROBE_LEADER_IP, "$NODE_RANK": str(node),
                       "$DP_START_RANK": str(node * nodes["dp_local"])})
        if node:
            argv, labels = argv + nodes["worker_args"], labels + ["optkit"] * len(nodes["worker_args"])
    return {"argv": [params.get(token, token) for token in argv], "labels": labels, "vllm": lock["versions"]["vllm"]}


def probe_requests(lock: dict) -> list[dict]:
    """One probe request per node: the leader's, then each worker's (one for a single-node plan)."""
    nodes = lock["launch"].get("nodes")
    return [probe_request(lock, node) for node in range(nodes["count"] if nodes else 1)]


def run_probe(request: dict, python: str | None = None, *, script: str = "vllm_probe.py",
              env: dict[str, str] | None = None) -> dict:
    """Run a probe script of this package (``vllm_probe.py``: vLLM is imported there, never here)
    in ``python`` (default: this one), by path, so the interpreter needs nothing of optkit's."""
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "PYTHONWARNINGS": "ignore", **(env or {})}
    path = Path(__file__).with_name(script)
    try:
        proc = subprocess.run([python or sys.executable, str(path), json.dumps(request)], env=env,
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise OptkitError(f"the probe {script} did not finish in {PROBE_TIMEOUT}s") from None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise OptkitError(f"the probe {script} failed (exit {proc.returncode}):\n{tail}") from None
