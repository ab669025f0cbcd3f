"""The plain renderer (optkit.cli.table, optkit.cli.render): rich's look, text as text, any encoding."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from optkit.catalog.paths import project_root
from optkit.cli.main import cli
from optkit.cli.render import layout
from optkit.cli.table import WIDTH, Table, cell_len, render_table, to_ascii, wrap

# Words as the reports have them: ASCII, typographic dashes, wide (CJK) characters, brackets.
CHARS = st.sampled_from([*"abcdefghijkl mnop-_.,:;()[]=", " ", " ", " ", "−", "—", "≈", "中", "文", "é"])
TEXT = st.text(CHARS, max_size=90)
CELL = st.one_of(TEXT, TEXT.map(lambda t: t.replace(";", "\n")), st.just(""), st.text(st.just("x"), min_size=30, max_size=200))


def _rich_console() -> Console:
    return Console(width=WIDTH, file=io.StringIO(), color_system=None, highlight=False, soft_wrap=False,
                   markup=False, emoji=False, legacy_windows=False)


def _by_rich(table: Table) -> list[str]:
    """How rich's default table draws ``table`` (text as Text: no markup), with folding columns."""
    console = _rich_console()
    drawn = RichTable(title=Text(table.title) if table.title else None)
    for header in table.headers:
        drawn.add_column(Text(header), overflow="fold")
    for row in table.rows:
        drawn.add_row(*[Text(cell) for cell in row])
    console.print(drawn)
    return console.file.getvalue().split("\n")[:-1]


@st.composite
def tables(draw) -> Table:
    columns = draw(st.integers(1, 5))
    rows = draw(st.lists(st.lists(CELL, min_size=columns, max_size=columns), max_size=4))
    return Table(draw(TEXT), draw(st.lists(st.text(CHARS, min_size=1, max_size=20), min_size=columns, max_size=columns)),
                 rows)


@settings(max_examples=200, deadline=None)
@given(tables())
def test_a_table_looks_as_rich_draws_it(table):
    assert render_table(table) == _by_rich(table)


@settings(max_examples=200, deadline=None)
@given(st.one_of(TEXT, st.lists(TEXT, min_size=2, max_size=6).map(" ".join), st.text(st.just("y"), max_size=400)))
def test_a_line_wraps_as_rich_wraps_it(text):
    console = _rich_console()
    console.print(Text(text))
    assert wrap(text, WIDTH) == console.file.getvalue().split("\n")[:-1]


@settings(max_examples=100, deadline=None)
@given(tables())
def test_every_line_of_a_table_is_equally_wide(table):
    assert len({cell_len(line) for line in render_table(table)[1 if table.title else 0:]}) == 1


def test_the_flagship_tables_keep_bracketed_text():
    """rich read ' [spec.async_spec_decode = true]' as a style tag and dropped it."""
    runner = CliRunner()
    plan = runner.invoke(cli, ["plan", "qwen3.5-35b", "--target", "910c", "--mtp"])
    explain = runner.invoke(cli, ["explain", "blocktable-slot-mapping-cpu-fastpath", "qwen3.5-35b", "--mtp"])
    assert plan.exit_code == explain.exit_code == 0
    assert "runs need async scheduling off [spec.async_spec_decode = true]" in plan.output
    assert "slot_mapping[num_tokens:max_num_batched_tokens]" in explain.output


@pytest.mark.parametrize("args", [
    pytest.param(["plan", "qwen3.5-35b", "--target", "910c", "--mtp"], id="plan"),
    pytest.param(["explain", "blocktable-slot-mapping-cpu-fastpath", "compile-super-kernel", "qwen3.5-35b", "--mtp"],
                 id="explain"),
    pytest.param(["recipes"], id="recipes"),
])
def test_an_ascii_terminal_gets_ascii(args, tmp_path):
    env = dict(os.environ, PYTHONIOENCODING="ascii", OPTKIT_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join([str(project_root()), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, "-m", "optkit", *args], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.isascii()
    text = done.stdout.decode()
    assert "┃" not in text and ("+====" in text or args[0] == "explain")
    if args[0] == "plan":
        assert "ms baseline - " in text and " ~ " in text  # '−' and '≈'


def test_characters_an_encoding_lacks_become_question_marks_before_layout():
    text = layout([Table("t", ["name", "n"], [["中文 ok", "1"]])], encoding="ascii")
    lines = text.splitlines()
    assert "| ?? ok |" in text
    assert len({len(line) for line in lines[1:]}) == 1


def test_an_encoding_with_boxes_keeps_them():
    assert layout([Table("t", ["a"], [["x − y"]])], encoding="utf-8").splitlines()[1].startswith("┏")


@pytest.mark.parametrize("text, expected", [
    pytest.param("c1: 14.2 ms baseline − 8.63 ms ≈ 5.57 ms", "c1: 14.2 ms baseline - 8.63 ms ~ 5.57 ms", id="minus"),
    pytest.param("a — b", "a - b", id="em-dash"),
    pytest.param("c ≥ 1", "c >= 1", id="at-least"),
    pytest.param("plain", "plain", id="ascii"),
])
def test_to_ascii(text, expected):
    assert to_ascii(text) == expected
