"""Ctrl-C: optkit dies of SIGINT, so a shell script running it stops too (its trap runs, it goes no further)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from terminal_support import as_a_foreground_job

NAP = ("import sys, time, types, click; import optkit.cli.main as m; "
       "nap = types.ModuleType('optkit.cli._nap'); sys.modules[nap.__name__] = nap; m.COMMAND_MODULES['nap'] = '_nap'; "
       "nap.COMMANDS = [click.Command('nap', callback=lambda: (print('ready', flush=True), time.sleep(60)))]; "
       "sys.argv = ['optkit', 'nap']; m.main()")


def _interrupt(argv: list[str]) -> tuple[int, str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=as_a_foreground_job)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


@pytest.mark.parametrize("argv, code, shown, not_shown", [
    pytest.param([sys.executable, "-c", NAP], -signal.SIGINT, "optkit: interrupted", None, id="optkit-alone"),
    pytest.param(["bash", "-c", f'trap "echo trapped; exit 130" INT; {sys.executable} -c "{NAP}"; echo went-on'],
                 130, "trapped", "went-on", id="in-a-script-with-a-trap"),
    pytest.param(["bash", "-c", f'{sys.executable} -c "{NAP}"; echo went-on'], -signal.SIGINT, "optkit: interrupted",
                 "went-on", id="in-a-plain-script"),
])
def test_ctrl_c_stops_optkit_and_the_script_around_it(argv, code, shown, not_shown):
    returncode, out = _interrupt(argv)
    assert returncode == code, out
    assert shown in out and (not_shown is None or not_shown not in out), out


def test_in_process_an_interrupt_is_exit_130(monkeypatch):
    import click

    import types

    from optkit.cli import main
    from optkit.cli.main import cli

    def boom():
        raise KeyboardInterrupt

    module = types.ModuleType("optkit.cli._boom")
    module.COMMANDS = [click.Command("boom", callback=boom)]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(main.COMMAND_MODULES, "boom", "_boom")
    result = CliRunner().invoke(cli, ["boom"])
    assert result.exit_code == 130 and "optkit: interrupted" in result.output
