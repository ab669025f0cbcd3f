"""The ``optkit`` command and the one place where exceptions become exit codes.

User errors (``OptkitError``) → the message on stderr, exit 1. Usage errors → click's exit 2.
Anything else is a bug in optkit → "please report", exit 3.
"""

from __future__ import annotations

import gc
import sys

import click

from optkit import __version__
from optkit.errors import OptkitError


# Every command and the module that defines it, in the order `optkit --help` lists them. A
# command's module is imported when the command runs (or --help lists them all), so `optkit plan`
# imports only plan_cmds. tests/test_cli.py keeps this in step with each module's COMMANDS.
COMMAND_MODULES = {
    "plan": "plan_cmds", "explain": "plan_cmds", "facts": "plan_cmds",
    "models": "catalog_cmds", "recipes": "catalog_cmds", "show": "catalog_cmds", "lint": "catalog_cmds", "schema": "catalog_cmds",
    "docs": "catalog_cmds",
    "apply": "tree_cmds", "revert": "tree_cmds", "status": "tree_cmds", "tree": "tree_cmds",
    "bundle": "bundle_cmds",
    "versions": "versions_cmds", "compat": "versions_cmds", "port": "versions_cmds", "export": "export_cmds",
    "tutorials": "tutorials_cmds",
    "ladder": "measure_cmds", "tune": "tune_cmds", "report": "measure_cmds", "measure": "measure_cmds",
    "profile": "profile_cmds",
}


class Group(click.Group):
    """Loads a command's module when the command is used; maps exceptions to exit codes."""

    def list_commands(self, ctx):
        return [name for name in COMMAND_MODULES if name not in self._not_here()]

    @staticmethod
    def _not_here() -> tuple[str, ...]:
        """Commands this install cannot run, left out of --help: `docs` regenerates a source checkout's docs/."""
        from optkit.catalog.paths import checkout_root

        return () if checkout_root() is not None else ("docs",)

    def get_command(self, ctx, name):
        if name not in COMMAND_MODULES:
            return None
        from importlib import import_module

        module = import_module(f"optkit.cli.{COMMAND_MODULES[name]}")
        return next(command for command in module.COMMANDS if command.name == name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except OptkitError as exc:
            click.echo(f"optkit: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except BrokenPipeError:  # output piped into `head` and closed: not an error
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except KeyboardInterrupt:
            click.echo("optkit: interrupted", err=True)
            raise Interrupted(130) from None
        except Exception as exc:  # noqa: BLE001 - the one catch-all boundary
            import traceback

            traceback.print_exc()
            click.echo(f"optkit: internal error: {type(exc).__name__}: {exc}\n"
                       "This is a bug in optkit; please report it with the command you ran.", err=True)
            sys.exit(3)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="optkit")
def cli() -> None:
    """Declarative optimization recipes for vLLM + vllm-ascend on Ascend NPUs."""


def main() -> None:
    # One command allocates ~20,000 long-lived objects (modules, classes, the catalog's records) and
    # next to no garbage, so the collector's default passes only re-walk them: collect rarely, and
    # not at all at exit (gc.freeze: the final passes skip them; atexit handlers still run).
    gc.set_threshold(100_000, 20, 20)
    # A stdout that cannot encode a character (PYTHONIOENCODING=ascii or latin-1, LC_ALL=C) shows it
    # as an escape (\u2212; valid inside JSON strings too) instead of raising UnicodeEncodeError.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        cli(prog_name="optkit")
    except Interrupted:
        _die_of_sigint()
    finally:
        gc.freeze()


class Interrupted(SystemExit):
    """Ctrl-C: exit 130 in-process (CliRunner), killed by SIGINT as a process (see ``_die_of_sigint``)."""


def _die_of_sigint() -> None:
    """End the process by SIGINT itself, once the interruption is reported and the files are closed.

    A shell running optkit in a script (run-ladder.sh, apply.sh) acts on a Ctrl-C only if its child
    died of the signal ("wait and cooperative exit"); a child that exits 130 instead looks as if it
    handled the key, and the script goes on to its next step.
    """
    import os
    import signal

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    sys.exit(130)  # where SIGINT cannot end the process


if __name__ == "__main__":
    main()
