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


class Group(click.Group):
    """Lists commands in the order they were added; maps exceptions to exit codes."""

    def list_commands(self, ctx):
        return list(self.commands)

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
            sys.exit(130)
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


def _register() -> None:
    from optkit.cli import bundle_cmds, catalog_cmds, measure_cmds, plan_cmds, tree_cmds, versions_cmds

    for module in (plan_cmds, catalog_cmds, tree_cmds, bundle_cmds, versions_cmds, measure_cmds):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    # One command allocates ~40,000 long-lived objects (classes, validators, the catalog) and next
    # to no garbage, so the collector's default passes only re-walk them: collect rarely, and not
    # at all at exit (gc.freeze: the final passes skip them; atexit handlers still run).
    gc.set_threshold(100_000, 20, 20)
    # A stdout that cannot encode a character (PYTHONIOENCODING=ascii or latin-1, LC_ALL=C) shows it
    # as an escape (\u2212; valid inside JSON strings too) instead of raising UnicodeEncodeError.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        cli(prog_name="optkit")
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
