"""One trial on the NPU host: the candidate's bundle on the tree, its server started, its capacity swept, stopped.

``HostExecutor.run(candidate, incumbent, trial_dir)``, as ``run-ladder.sh`` runs a step:

1. writes the candidate's bundle into ``trial_dir/bundle/``;
2. re-patches the tree only when the patch set differs from the one applied (``optkit revert``, then
   ``optkit apply``; the tree's own journal makes both atomic) and rebuilds the custom ops only when the
   kernel set differs (the bundle's ``build-kernels.sh``, or ``$KERNEL_BUILD_CMD BUNDLE TREE``);
3. starts ``serve.sh`` in its own session, its output in ``trial_dir/server.log``, its process group in
   ``trial_dir/server.pid`` while it runs, and waits for ``/health``; a server that exits or does not answer
   within the health timeout is a **failed start**, its reason the log's line that says why
   (``failure_line``: out of memory first, then the last error that is not a "see above" summary);
   a port already in use before the start is no trial's fault: ``TuneError``, the run stops and the trial is
   queued again (else the sweep would measure whatever server holds the port). A run that was killed leaves
   its server running (its own session): the next run stops it (``reap``) when it recovers that trial;
4. runs the capacity sweep (``optkit.measure.sweep.run_sweep``) with the tune's SLO and workload against the
   candidate's scheduler slots, stopping early once the trial cannot beat the best so far
   (``optkit.tune.study.stop_rule``);
5. stops the server (SIGTERM to its group, then SIGKILL after ``STOP_GRACE_S``).

No step raises for the server's sake: every failure is an ``Outcome``. A failure of the tree (an apply that
is refused) or of the client (no result while the server is up) is one too, with its reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from optkit.measure.sweep import _healthy
from optkit.tune import TuneError
from optkit.tune.candidate import Candidate
from optkit.tune.space import parse_layout
from optkit.tune.study import Outcome, outcome_from_sweep, stop_rule

STOP_GRACE_S = 30
"""SIGTERM first (vllm-ascend uninstalls its static kernels only on SIGTERM/SIGINT), SIGKILL after this."""
_ERROR = re.compile(r"(?i)(out of memory|outofmemory|\boom\b|error|refus|traceback|exception|not supported)")
_OOM = re.compile(r"(?i)(out of memory|outofmemory|\boom\b)")
_SUMMARY = re.compile(r"(?i)(see root cause above|failed to start|^traceback)")
"""Lines that only point elsewhere (vLLM's ``Engine core initialization failed. See root cause above``)."""
SERVER_PID = "server.pid"
"""In a trial's directory while its server runs: the server's process group, for the next run to stop it if this
run was killed (the server runs in its own session and outlives a SIGKILLed ``optkit measure tune``)."""


def failure_line(log_text: str) -> str:
    """The line of a server log that says why it failed: the last naming out of memory, else the last naming an
    error that is not a summary pointing above it (vLLM's API server ends with ``Engine core initialization
    failed. See root cause above``), else the last naming an error, else the last line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    named = [line for line in lines if _ERROR.search(line)]
    for group in ([x for x in named if _OOM.search(x)], [x for x in named if not _SUMMARY.search(x)], named,
                  lines[-1:]):
        if group:
            return group[-1][:400]
    return "the server wrote nothing"


def port_open(host: str, port: int) -> bool:
    """Whether something accepts connections on host:port (a server left running holds it)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _start_time(pid: int) -> str | None:
    """The running process's start time in clock ticks since boot (/proc), to tell it from a later process with its
    pid; None when no such process runs (an exited one not yet waited for, a zombie, included)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


class HostExecutor:
    """Trials on this host (see the module docstring). ``tree``: the vllm-ascend tree the server imports (None: no
    patches are applied, for a host whose tree is not patched by optkit, or the simulated server)."""

    name = "host"

    def __init__(self, settings: dict, *, tree: Path | None, model: str, served_name: str, port: int = 8000,
                 host: str = "127.0.0.1", health_timeout: float = 1800.0, client=None, client_name: str = "",
                 optkit: list[str] | None = None, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr,
                                                                                              flush=True)):
        from optkit.measure.sweep import command_client, in_process_client

        self.settings, self.tree, self.model, self.served_name = settings, tree, model, served_name
        self.port, self.host, self.health_timeout, self.log = port, host, health_timeout, log
        if client is None:
            client = in_process_client()
            client_name = "vllm.benchmarks.serve (in process)" if client else "vllm bench serve"
            client = client or command_client()
        self.client, self.client_name = client, client_name or "client"
        self.optkit = optkit or [sys.executable, "-m", "optkit"]
        self.applied: str | None = None  # the patch key on the tree (None: unknown, revert first)
        self.built: str | None = None

    # -- the tree ---------------------------------------------------------------------------------------------
    def _tree(self, candidate: Candidate, bundle: Path, log_file) -> str | None:
        if self.tree is None:
            return None
        if candidate.patch_key != self.applied:
            for argv in ([*self.optkit, "revert", "--tree", str(self.tree)],
                         [*self.optkit, "apply", str(bundle), "--tree", str(self.tree)]):
                self.applied = None  # until the apply succeeds: an interrupted one is redone
                proc = subprocess.run(argv, stdout=log_file, stderr=subprocess.STDOUT)
                if proc.returncode != 0:
                    return f"`optkit {argv[len(self.optkit)]}` on the tree exited {proc.returncode} (server.log)"
            self.applied = candidate.patch_key
        if candidate.kernel_key != self.built:
            command = os.environ.get("KERNEL_BUILD_CMD")
            argv = [*command.split(), str(bundle), str(self.tree)] if command else ["bash", str(bundle / "build-kernels.sh"),
                                                                                    str(self.tree)]
            self.built = None
            proc = subprocess.run(argv, stdout=log_file, stderr=subprocess.STDOUT)
            if proc.returncode != 0:
                return f"the custom ops did not build (exit {proc.returncode}; server.log)"
            self.built = candidate.kernel_key
        return None

    # -- the server -------------------------------------------------------------------------------------------
    def _start(self, bundle: Path, log_file) -> subprocess.Popen:
        argv = ["bash", str(bundle / "serve.sh"), "--model", self.model, "--served-model-name", self.served_name,
                "--port", str(self.port)]
        proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        (bundle.parent / SERVER_PID).write_text(json.dumps({"pid": proc.pid, "started": _start_time(proc.pid)}) + "\n")
        return proc

    def reap(self, trial_dir: Path) -> str | None:
        """Stop the server a killed run left for ``trial_dir`` (its ``server.pid``, still the same process: same
        start time); what was done, or None when nothing was left running."""
        path = Path(trial_dir) / SERVER_PID
        if not path.is_file():
            return None
        try:
            left = json.loads(path.read_text())
            pid = int(left["pid"])
        except (ValueError, KeyError, TypeError):
            path.unlink()
            return None
        alive = _start_time(pid)
        if alive is None or alive != left.get("started"):
            path.unlink()
            return None
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10)):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _start_time(pid) == alive:
                time.sleep(0.1)
            if _start_time(pid) != alive:
                break
        path.unlink()
        return f"stopped its server (process group {pid}), left running by the killed run"

    def _wait(self, proc: subprocess.Popen, base_url: str) -> str | None:
        deadline = time.monotonic() + self.health_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return f"exited {proc.returncode} before answering /health"
            if _healthy(base_url):
                return None
            time.sleep(0.5)
        return f"no answer on /health within {self.health_timeout:.0f} s"

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        if proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                proc.send_signal(sig)
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def run(self, candidate: Candidate, incumbent: float | None, trial_dir: Path) -> Outcome:
        from optkit.bundle.writer import write_files
        from optkit.measure import MeasureError
        from optkit.measure.sweep import run_sweep

        began = time.monotonic()
        trial_dir = Path(trial_dir)
        bundle = trial_dir / "bundle"
        trial_dir.mkdir(parents=True, exist_ok=True)
        write_files(candidate.files, bundle)
        log_path = trial_dir / "server.log"
        base_url = f"http://{self.host}:{self.port}"
        if port_open(self.host, self.port):  # the host's fault, not the candidate's: no outcome, the run stops
            raise TuneError(f"port {self.port} on {self.host} is in use before trial {trial_dir.name}'s server starts "
                            "(another server, or one a killed run left?): stop it, or give another --port; "
                            "the trial is queued again")
        with open(log_path, "ab") as log_file:
            problem = self._tree(candidate, bundle, log_file)
            if problem:
                return Outcome("failed-start", reason=problem, seconds=round(time.monotonic() - began, 1))
            proc = self._start(bundle, log_file)
        try:
            problem = self._wait(proc, base_url)
            if problem:
                line = failure_line(log_path.read_text(encoding="utf-8", errors="replace"))
                return Outcome("failed-start", reason=f"{problem}: {line}", seconds=round(time.monotonic() - began, 1))
            tp, dp = parse_layout(str(candidate.effective["layout"]))
            seqs = int(candidate.effective["max-num-seqs"])
            sched = {"max_num_seqs": seqs, "dp": dp, "slots": seqs * dp,
                     "text": f"--max-num-seqs {seqs} × DP {dp}" if dp > 1 else f"--max-num-seqs {seqs}"}
            try:
                data = run_sweep(self.settings, model=self.model, served_name=self.served_name, host=self.host,
                                 port=self.port, out_dir=trial_dir, client=self.client, client_name=self.client_name,
                                 scheduler=sched, log=self.log, stop=stop_rule(incumbent, candidate.cards))
            except MeasureError as exc:
                return Outcome("client-failed", reason=str(exc), seconds=round(time.monotonic() - began, 1))
        finally:
            self._stop(proc)
            (trial_dir / SERVER_PID).unlink(missing_ok=True)
        return outcome_from_sweep(data, trial_dir, candidate.cards, time.monotonic() - began)


__all__ = ["HostExecutor", "failure_line", "port_open", "SERVER_PID"]
