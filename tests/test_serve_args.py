"""A recipe's ``serve_args`` must split into shell words (the launch splits each entry with ``shlex``):
refused at load, by ``optkit lint`` and by ``plan`` with a user catalog, at ``file:line`` and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.catalog.lint import lint
from optkit.catalog.loader import load_catalog
from optkit.cli.main import cli
from optkit.errors import ValidationFailed

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"
SOURCE = "waterfall-hccl-aiv"  # a shipped recipe without serve_args
F = "mine/team-serve-args/recipe.yaml"
OPEN = "does not split into shell words: a quote is left open or a backslash ends it (close the quote, or write " \
       "the argument's words as a shell command line would)"

# (id, the YAML scalar of serve_args[1] (serve_args[0] is fine), the problem, or None: accepted)
CASES = [
    ("unbalanced-double-quote", "'--chat-template \"x'", f"'--chat-template \"x' {OPEN}"),
    ("unbalanced-single-quote", "\"--served-model-name 'a\"", f"\"--served-model-name 'a\" {OPEN}"),
    ("trailing-backslash", "'--x \\'", f"'--x \\\\' {OPEN}"),
    ("empty", "''", "'' holds no argument (remove the entry)"),
    ("blank", "'   '", "'   ' holds no argument (remove the entry)"),
    ("two-words", "'--max-num-seqs 64'", None),
    ("quoted-word", "\"--chat-template 'a b'\"", None),
]


def _catalog(tmp_path: Path, arg: str) -> Path:
    """``mine/``: a shipped recipe under a new id, with ``serve_args: ['--max-num-seqs 64', ARG]``."""
    target = tmp_path / "mine" / "team-serve-args"
    shutil.copytree(SHIPPED / SOURCE, target)
    path = target / "recipe.yaml"
    text = path.read_text(encoding="utf-8").replace(f"id: {SOURCE}", "id: team-serve-args", 1)
    text = text.replace("HCCL_OP_EXPANSION_MODE", "HCCL_TEAM_KNOB")
    path.write_text(text + f"serve_args:\n  - --enforce-eager\n  - {arg}\n", encoding="utf-8")
    return tmp_path / "mine"


def _entry_line(folder: Path) -> int:
    return len((folder / "team-serve-args" / "recipe.yaml").read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("arg, problem", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_serve_args_load(tmp_path, monkeypatch, arg, problem):
    monkeypatch.chdir(tmp_path)
    folder = _catalog(tmp_path, arg)
    if problem is None:
        assert load_catalog(None, [Path("mine")])["team-serve-args"].serve_args[1]
        return
    with pytest.raises(ValidationFailed) as exc:
        load_catalog(None, [Path("mine")])
    assert str(exc.value) == f"{F}:{_entry_line(folder)}: serve_args[1]: {problem}"


@pytest.mark.parametrize("arg, problem", [c[1:] for c in CASES if c[2]], ids=[c[0] for c in CASES if c[2]])
def test_lint_refuses_serve_args(tmp_path, monkeypatch, arg, problem):
    monkeypatch.chdir(tmp_path)
    folder = _catalog(tmp_path, arg)
    assert f"{F}:{_entry_line(folder)}: serve_args[1]: {problem}" in [str(p) for p in lint(Path("mine"))]


@pytest.mark.parametrize("args", [["plan", "qwen3.5-35b", "--mtp"], ["plan", "qwen3.5-35b", "--mtp", "-o", "bundle"]],
                         ids=["plan", "plan-bundle"])
def test_plan_with_a_bad_serve_arg_is_a_user_error(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    folder = _catalog(tmp_path, "'--chat-template \"x'")
    result = CliRunner().invoke(cli, args + ["--catalog", "mine"])
    assert result.exit_code == 1, result.output
    assert f"optkit: error: {F}:{_entry_line(folder)}: serve_args[1]: '--chat-template \"x' {OPEN}" in result.output
    assert not Path("bundle").exists()
