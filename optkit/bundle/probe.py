"""Where and how the probe scripts run (``vllm_probe.py``: vLLM's own parser and config classes;
``ascend_config_probe.py``: the tree's ``AscendConfig``): the Python of the vLLM the bundle's release
pairs with, found without importing vLLM, and what the parser is given for each node of a plan.
The probes import vLLM in their own process; optkit never does.

A whole ``bundle check`` runs ONE probe process (``ProbeSession``): started first, it imports vLLM
(most of the check's time) while optkit prepares the tree and reads its knobs, then answers every
request with that one import — the parser on each node's argv and, on a strict release, the tree's
``AscendConfig``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from optkit.errors import OptkitError
from optkit.versions.parser_patches import widenings

PROBE_TIMEOUT = 600
PROBE_ENV = {"VLLM_LOGGING_LEVEL": "ERROR", "PYTHONWARNINGS": "ignore"}
SESSION_ENV = {**PROBE_ENV, "VLLM_TARGET_DEVICE": "cpu", "VLLM_PLUGINS": ""}
"""A session also imports the tree's vllm_ascend: no NPU platform, no plugins (as ``ascend_config_probe``)."""
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
    return None, f"vLLM {version} not installed (this Python has {here or 'no vLLM'}, and there is no {venv}); {ways_to_get(version)}"


def ways_to_get(version: str, cwd: Path | None = None) -> str:
    """How to get vLLM ``version`` for the check, in words that work as printed from ``cwd`` (default:
    the current directory): the checkout's ``scripts/vllm-venv`` when it knows that version's dependency
    set (``tests/requirements-vllm-MAJOR.MINOR.txt``), where it is; else ``--vllm-python``."""
    from optkit.catalog.paths import checkout_root

    root = checkout_root()
    requirements = f"tests/requirements-vllm-{version.rsplit('.', 1)[0]}.txt"
    own_venv = (f"pass --vllm-python PYTHON, a Python with vLLM {version} (e.g. of a virtualenv of its own "
                f"with `pip install vllm=={version}`)")
    if root is None:
        return (f"build its virtualenv in optkit's source checkout with `bash scripts/vllm-venv {version}` "
                f"(scripts/ and tests/ are not part of an installed optkit), or {own_venv}")
    if not (root / requirements).is_file():
        return f"scripts/vllm-venv cannot build it (no {requirements}: its dependency set is not known); {own_venv}"
    return f"build its virtualenv with `bash {_shown(root / 'scripts' / 'vllm-venv', cwd)} {version}`, or {own_venv}"


def _shown(path: Path, cwd: Path | None) -> str:
    """``path`` relative to ``cwd`` when it is inside it, else absolute."""
    cwd = (cwd or Path.cwd()).resolve()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


def probe_request(lock: dict, node: int = 0, instance: dict | None = None) -> dict:
    """What ``optkit.bundle.vllm_probe`` gets: the argv after ``vllm serve`` with serve.sh's defaults
    and, on a multi-node plan, the values serve.sh gives node ``node`` (a worker's arguments added);
    on a PD role (``lock`` is its view, ``optkit.bundle.pd.lock_view``), those of ``instance``. A node of a
    multi-node plan is numbered (``node``): the probe applies the DP handshake across those."""
    launch = lock["launch"]
    params = {f"${name}": value or name.lower() for name, value in launch["parameters"].items()}
    if instance is not None:
        params.update({"$PORT": str(instance["port"]), "$KV_TRANSFER_CONFIG": instance["kv_transfer_config"]})
    argv, labels = launch["argv"][2:], launch["argv_sources"][2:]
    nodes = launch.get("nodes")
    if nodes:
        params.update({"$LEADER_IP": PROBE_LEADER_IP, "$NODE_RANK": str(node),
                       "$DP_START_RANK": str(node * nodes["dp_local"])})
        if node:
            argv, labels = argv + nodes["worker_args"], labels + ["optkit"] * len(nodes["worker_args"])
    request = {"argv": [params.get(token, token) for token in argv], "labels": labels, "vllm": lock["versions"]["vllm"]}
    widened = widenings(lock["versions"]["vllm_ascend"], request["argv"])  # of the options the argv sets
    request.update({"widen": widened} if widened else {})
    return {**request, "node": node} if nodes else request


def probe_requests(lock: dict) -> list[dict]:
    """One probe request per node: the leader's, then each worker's (one for a single-node plan); on a
    PD plan one per instance, prefill first (``probe_names`` says whose each is)."""
    roles = lock["launch"].get("roles")
    if roles:  # each instance's nodes are one DP group of their own (the probe's handshake groups them)
        return [{**probe_request(_view(lock, role), node, instance=i), **({"group": f"{role}-{i['index']}"}
                                                                          if roles[role].get("nodes") else {})}
                for role in _ordered(roles) for i in roles[role]["instances"] for node in range(_count(roles[role]))]
    nodes = lock["launch"].get("nodes")
    return [probe_request(lock, node) for node in range(nodes["count"] if nodes else 1)]


def _count(launch: dict) -> int:
    """The nodes one server (or one PD instance) of ``launch`` runs on."""
    return (launch.get("nodes") or {}).get("count", 1)


def probe_names(lock: dict) -> list[str]:
    """Whose argv each of ``probe_requests`` is: 'node 1 (worker)', 'prefill instance 0', or '' (one server)."""
    roles = lock["launch"].get("roles")
    if roles:
        return [f"{role} instance {i['index']}" + (f" node {n} ({'leader' if n == 0 else 'worker'})"
                                                   if _count(roles[role]) > 1 else "")
                for role in _ordered(roles) for i in roles[role]["instances"] for n in range(_count(roles[role]))]
    nodes = lock["launch"].get("nodes")
    count = nodes["count"] if nodes else 1
    return [""] if count == 1 else [f"node {n} ({'leader' if n == 0 else 'worker'})" for n in range(count)]


def _ordered(roles: dict) -> list[str]:
    """A PD lock's roles, prefill first (the lock's JSON sorts them by name)."""
    from optkit.resolve.pd import ROLES

    return sorted(roles, key=ROLES.index)


def _view(lock: dict, role: str) -> dict:
    return {**lock, "launch": lock["launch"]["roles"][role]}


def run_probe(request: dict, python: str | None = None, *, script: str = "vllm_probe.py",
              env: dict[str, str] | None = None) -> dict:
    """Run a probe script of this package (``vllm_probe.py``: vLLM is imported there, never here)
    in ``python`` (default: this one), by path, so the interpreter needs nothing of optkit's."""
    env = {**os.environ, **PROBE_ENV, **(env or {})}
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


class ProbeSession:
    """One probe process (``vllm_probe.py -``) for a whole bundle check: it imports vLLM as soon as
    it starts, then answers each request ``ask`` wrote to its stdin, in order, once ``answers`` is
    called (its stderr goes to a file: a chatty vLLM cannot fill a pipe nobody reads yet)."""

    def __init__(self, python: str):
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._asked = 0
        try:
            self._proc = subprocess.Popen([python, str(Path(__file__).with_name("vllm_probe.py")), "-"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                          text=True, env={**os.environ, **SESSION_ENV})
        except OSError as exc:
            self._stderr.close()
            raise OptkitError(f"cannot run {python} for the vLLM probe ({exc.strerror or exc}); "
                              "pass --vllm-python a Python with that vLLM, or --no-vllm") from None

    def ask(self, kind: str, request: dict) -> None:
        """Queue one request (``kind``: ``vllm`` or ``ascend-config``); a probe that already died
        is reported by ``answers``."""
        self._asked += 1
        try:
            self._proc.stdin.write(json.dumps({"kind": kind, **request}) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def answers(self) -> list[dict]:
        """The answer to every request asked, in order (waits for the probe to finish)."""
        try:
            out, _ = self._proc.communicate(timeout=PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.close()
            raise OptkitError(f"the probe vllm_probe.py did not finish in {PROBE_TIMEOUT}s") from None
        try:
            answers = [json.loads(line) for line in out.splitlines() if line.strip()]
        except ValueError:
            answers = []
        if len(answers) != self._asked:
            self._stderr.seek(0)
            tail = "\n".join(self._stderr.read().strip().splitlines()[-15:])
            raise OptkitError(f"the probe vllm_probe.py failed (exit {self._proc.returncode}):\n{tail}")
        return answers

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()
        self._stderr.close()


@contextmanager
def probe_session(python: str | None) -> Iterator[ProbeSession | None]:
    """A ``ProbeSession`` in ``python`` (None without one), ended however the check ends."""
    if python is None:
        yield None
        return
    session = ProbeSession(python)
    try:
        yield session
    finally:
        session.close()
