"""One bad-input case run through the real CLI under a time limit, and the record of how it ended.

In-process runs (click's CliRunner, the same ``optkit.cli.main.cli`` the console script runs) are
stopped by SIGALRM after ``IN_PROCESS_LIMIT`` seconds; subprocess runs (``python -m
optkit.cli.main``, for cases that could hang the interpreter or depend on its stdio encoding) by
``SUBPROCESS_LIMIT``. Every run is appended to ``OUTCOMES``; tests/test_bad_input.py asserts on
each one and prints the counts at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from optkit.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
IN_PROCESS_LIMIT = 15.0
SUBPROCESS_LIMIT = 30.0
INTERNAL = ("internal error", "Traceback (most recent call last)")


@dataclass
class Outcome:
    family: str
    case: str
    code: int | None
    """Exit code; None when the run hit its time limit."""
    output: str
    seconds: float
    mode: str
    """``in-process`` or ``subprocess``."""

    @property
    def hung(self) -> bool:
        return self.code is None

    @property
    def internal(self) -> bool:
        return self.code == 3 or any(word in self.output for word in INTERNAL)

    def describe(self) -> str:
        return f"[{self.family}/{self.case}] exit {self.code} after {self.seconds:.1f}s:\n{self.output[-3000:]}"


OUTCOMES: list[Outcome] = []


class _Hang(BaseException):
    """Raised by SIGALRM inside a run (a BaseException: optkit's catch-all boundary must not take it)."""


def _alarm(signum, frame):
    raise _Hang()


def run(family: str, case: str, args: list, *, env: dict | None = None, limit: float = IN_PROCESS_LIMIT) -> Outcome:
    """``optkit ARGS`` in this process; ``env`` is set for the run only."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    started = time.monotonic()
    try:
        result = CliRunner().invoke(cli, [str(a) for a in args], env=env)
        code, output = result.exit_code, result.output
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            code, output = 3, f"{output}\nTraceback (most recent call last): {result.exception!r}"
    except _Hang:
        code, output = None, f"no answer within {limit}s"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return _record(Outcome(family, case, code, output, time.monotonic() - started, "in-process"))


def run_subprocess(family: str, case: str, args: list, *, env: dict | None = None,
                   limit: float = SUBPROCESS_LIMIT) -> Outcome:
    """``python -m optkit.cli.main ARGS`` in a fresh interpreter, killed after ``limit`` seconds."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    full_env.update(env or {})
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "optkit.cli.main", *map(str, args)], capture_output=True,
                              timeout=limit, env=full_env, cwd=REPO)
        code, output = proc.returncode, (proc.stdout + proc.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        code, output = None, f"no answer within {limit}s"
    return _record(Outcome(family, case, code, output, time.monotonic() - started, "subprocess"))


def _record(outcome: Outcome) -> Outcome:
    OUTCOMES.append(outcome)
    return outcome


def check(outcome: Outcome, codes: tuple[int, ...] = (0, 1, 2)) -> Outcome:
    """No hang, no internal error, an expected exit code."""
    assert not outcome.hung, outcome.describe()
    assert not outcome.internal, outcome.describe()
    assert outcome.code in codes, outcome.describe()
    return outcome


def summary() -> str:
    """The counts: cases, families, exit codes, internal errors, hangs, slowest case."""
    cases = [o for o in OUTCOMES if o.family != "setup"]
    families: dict[str, int] = {}
    codes: dict[str, int] = {}
    for o in cases:
        families[o.family] = families.get(o.family, 0) + 1
        codes[str(o.code)] = codes.get(str(o.code), 0) + 1
    slowest = max(cases, key=lambda o: o.seconds)
    lines = [f"bad-input suite: {len(cases)} cases in {len(families)} families, "
             f"{sum(o.mode == 'subprocess' for o in cases)} of them in subprocesses",
             "  families: " + ", ".join(f"{name} {n}" for name, n in sorted(families.items())),
             "  exit codes: " + ", ".join(f"{code}: {n}" for code, n in sorted(codes.items())),
             f"  internal errors: {sum(o.internal for o in cases)}; hangs: {sum(o.hung for o in cases)}; "
             f"slowest: {slowest.family}/{slowest.case} {slowest.seconds:.1f}s"]
    return "\n".join(lines)
