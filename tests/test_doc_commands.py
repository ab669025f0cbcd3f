"""Every optkit command line the README and docs/ show names a command and options that exist.

A page that tells users to run an option optkit does not have (``optkit compat --all``) is a dead end
found only by someone who types it; this reads every ``optkit …`` in a code span or an indented block.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from optkit.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SPAN = re.compile(r"`([^`\n]*)`|^    (.*)$", re.M)
_USE = re.compile(r"(?<![\w/.-])optkit ([a-z][a-z-]*)((?: [a-z][a-z-]*)?)([^|;#`/]*)")


def unknown_options(text: str) -> list[str]:
    """``command: what is wrong`` for each optkit command line in ``text`` that names what is not there."""
    problems = []
    ctx = click.Context(cli)
    for span in _SPAN.finditer(text):
        for use in _USE.finditer(span.group(1) or span.group(2) or ""):
            name, sub, rest = use.group(1), use.group(2).strip(), use.group(3)
            command = cli.get_command(ctx, name)
            if command is None:
                problems.append(f"optkit {name}: no such command")
                continue
            if isinstance(command, click.Group) and sub and command.get_command(ctx, sub) is not None:
                command = command.get_command(ctx, sub)
            known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
            problems += [f"optkit {name}: no option {flag}" for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)
                         if flag not in known]
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_command_a_page_shows_exists(page):
    assert unknown_options(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text, problems", [
    pytest.param("run `optkit compat --all`", ["optkit compat: no option --all"], id="unknown-option"),
    pytest.param("    optkit tree fetch 0.23.0 DIR --force", [], id="group-subcommand-option"),
    pytest.param("    optkit tree fetch 0.23.0 DIR --forse", ["optkit tree: no option --forse"], id="subcommand-typo"),
    pytest.param("`optkit frobnicate`", ["optkit frobnicate: no such command"], id="unknown-command"),
    pytest.param("`optkit recipes / optkit docs [--check]`", [], id="two-commands-in-one-span"),
    pytest.param("optkit compat --all in prose is not a command line", [], id="prose"),
])
def test_the_reader_of_command_lines(text, problems):
    assert unknown_options(text) == problems
