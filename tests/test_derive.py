"""Launch values derived from the request (optkit.catalog.derive): the expression's type checks, its
evaluation, the decode ladder; refused at load and by lint at file:line; the cited tutorial lines checked
against trees (fake ones here, every release's real tree in the tree-marked test)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from optkit.catalog.derive import DerivedValueError, check_expression, check_target, decode_ladder, evaluate
from optkit.catalog.factspec import FACTS
from optkit.catalog.lint import lint
from optkit.catalog.loader import load_catalog
from optkit.errors import ValidationFailed

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"
FACTS_C64 = {"workload.concurrency_max": 64, "parallel.dp": 4, "parallel.tp": 2, "spec.num_speculative_tokens": 3,
             "parallel.flashcomm1": True, "objective.tpot_limit_ms": 25.0}

# (id, expression, the ValueError's words, or the type)
CHECKS = [
    ("literal", 8192, "int"),
    ("int-fact", "parallel.dp", "int"),
    ("nested", {"max": [4096, {"mul": [{"ceil_div": ["workload.concurrency_max", "parallel.dp"]}, 2]}]}, "int"),
    ("if", {"if": ["objective.tpot_limit_ms > 0", 4096, 8192]}, "int"),
    ("ladder", {"ladder": {"up_to": 8, "rows_per_request": 1, "multiple_of": 1, "max_sizes": 4}}, "list[int]"),
    ("bool", True, "value: true is no integer"),
    ("negative", -1, "value: -1 is out of range"),
    ("unknown-fact", "parallel.dpx", "value: unknown fact 'parallel.dpx'; did you mean 'parallel.dp'?"),
    ("bool-fact", "parallel.ep", "value: fact parallel.ep is a bool, not an int"),
    ("list-fact", "workload.concurrency", "value: fact workload.concurrency is a list[int], not an int"),
    ("unknown-op", {"pow": [2, 3]}, "value: unknown operator 'pow'"),
    ("two-ops", {"add": [1, 2], "mul": [1, 2]}, "value: expected an integer, an int fact's name or one operator"),
    ("not-a-list", {"add": 3}, "value.add: the operands are a list"),
    ("arity", {"ceil_div": [1, 2, 3]}, "value.ceil_div: takes exactly two operands"),
    ("one-operand", {"max": [1]}, "value.max: takes two or more operands"),
    ("bad-condition", {"if": ["parallel.dp >", 1, 2]}, "value.if: "),
    ("deep-error", {"max": [1, {"add": [1, "nope.fact"]}]}, "value.max[1].add[1]: unknown fact 'nope.fact'"),
    ("ladder-keys", {"ladder": {"up_to": 8}}, "ladder takes exactly up_to, rows_per_request, multiple_of, max_sizes"),
    ("ladder-bound", {"ladder": {"up_to": 8, "rows_per_request": 1, "multiple_of": 1, "max_sizes": 1000}},
     "ladder.max_sizes: an integer literal from 1 to 256"),
    ("ladder-nested", {"max": [1, {"ladder": {}}]}, "value.max[1]: a ladder is a list of sizes, only a whole value"),
]


@pytest.mark.parametrize("expr, expected", [c[1:] for c in CHECKS], ids=[c[0] for c in CHECKS])
def test_expressions_are_type_checked(expr, expected):
    if expected in ("int", "list[int]"):
        assert check_expression(expr, FACTS) == expected
        return
    with pytest.raises(ValueError) as exc:
        check_expression(expr, FACTS)
    assert str(exc.value).startswith(expected)


@pytest.mark.parametrize("target, ok", [
    ("serve:--max-num-seqs", True), ("compilation_config:cudagraph_capture_sizes", True),
    ("additional_config:a.b_c", True), ("serve:max-num-seqs", False), ("serve:--a b", False),
    ("serve:--tensor-parallel-size", False), ("speculative_config:x", False), ("compilation_config:", False), ("compilation_config:a..b", False)])
def test_targets(target, ok):
    if ok:
        assert check_target(target) == target
    else:
        with pytest.raises(ValueError):
            check_target(target)


@pytest.mark.parametrize("expr, value, how", [
    ({"ceil_div": ["workload.concurrency_max", "parallel.dp"]}, 16,
     "ceil_div(workload.concurrency_max = 64, parallel.dp = 4) = 16"),
    ({"round_up": [7, "parallel.tp"]}, 8, "round_up(7, parallel.tp = 2) = 8"),
    ({"lcm": ["parallel.tp", {"add": [1, "spec.num_speculative_tokens"]}]}, 4,
     "lcm(parallel.tp = 2, add(1, spec.num_speculative_tokens = 3) = 4) = 4"),
    ({"if": ["objective.tpot_limit_ms > 0", 4096, 8192]}, 4096, "(4096, as objective.tpot_limit_ms > 0 holds)"),
    ({"min": [3, {"mul": [2, 5]}]}, 3, "min(3, mul(2, 5) = 10) = 3"),
])
def test_evaluation_says_how(expr, value, how):
    assert evaluate(expr, FACTS_C64) == (value, how)


@pytest.mark.parametrize("expr, words", [
    ({"ceil_div": ["workload.concurrency_max", 0]}, "ceil_div(workload.concurrency_max = 64, 0): the operands must be above zero"),
    ({"add": [0, 0]}, "the value 0 is out of range 1..16777216"),
])
def test_an_out_of_range_value_is_the_requests_error(expr, words):
    with pytest.raises(DerivedValueError) as exc:
        evaluate(expr, FACTS_C64)
    assert words in str(exc.value)


@pytest.mark.parametrize("args, sizes", [
    ((1, 1, 1, 32), [1]),
    ((10, 7, 1, 32), [7, 14, 28, 56, 70]),
    ((20, 1, 1, 32), [1, 2, 4, 8, 16, 20]),
    ((20, 5, 2, 32), [6, 10, 20, 40, 80, 100]),  # 1 × 5 rounded up to 6: multiples of TP under sequence parallelism
    ((20, 5, 10, 32), [10, 20, 40, 80, 100]),  # multiples of lcm(TP, 1 + k)
    ((64, 1, 1, 4), [1, 8, 40, 64]),  # thinned evenly, the smallest and the largest kept
    ((64, 1, 1, 1), [64]),
])
def test_the_decode_ladder(args, sizes):
    assert decode_ladder(*args) == sizes


def test_the_ladder_is_bounded_and_reaches_the_load():
    for up_to in range(1, 300, 7):
        for rows, multiple in ((1, 1), (5, 1), (4, 2), (5, 10)):
            sizes = decode_ladder(up_to, rows, multiple, 16)
            assert len(sizes) <= 16 and sizes == sorted(set(sizes))
            assert sizes[-1] >= up_to * rows and all(s % multiple == 0 for s in sizes)


# --------------------------------------------------------------------------- refused at load and by lint

F = "mine/team-derived/recipe.yaml"


def _catalog(tmp_path: Path, derived: str, source: str = "waterfall-hccl-aiv") -> Path:
    target = tmp_path / "mine" / "team-derived"
    shutil.copytree(SHIPPED / source, target)
    path = target / "recipe.yaml"
    text = path.read_text(encoding="utf-8").replace(f"id: {source}", "id: team-derived", 1)
    text = text.replace("HCCL_OP_EXPANSION_MODE", "HCCL_TEAM_KNOB")
    path.write_text(text + derived, encoding="utf-8")
    return tmp_path / "mine"


def test_a_bad_expression_is_refused_at_file_line_and_field(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _catalog(tmp_path, "derived:\n  - set: 'serve:--max-num-seqs'\n"
                                "    value: {ceil_div: [workload.concurrency, parallel.dp]}\n    why: a rule of ours\n")
    line = len((folder / "team-derived" / "recipe.yaml").read_text(encoding="utf-8").splitlines()) - 1
    with pytest.raises(ValidationFailed) as exc:
        load_catalog(None, [Path("mine")])
    assert str(exc.value) == (f"{F}:{line}: derived[0].value: value.ceil_div[0]: fact workload.concurrency is a "
                              "list[int], not an int")


def test_lint_wants_a_conflict_between_two_recipes_deriving_one_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _catalog(tmp_path, "derived:\n  - set: 'serve:--max-num-seqs'\n    value: 8\n    why: a rule of ours\n")
    found = [str(p) for p in lint(Path("mine"))]
    assert any(p.startswith(F) and "serve.--max-num-seqs = '<derived by team-derived>' but sched-capacity-for-load "
               "sets '<derived by sched-capacity-for-load>', and no conflict links them" in p for p in found), found


# --------------------------------------------------------------------------- cited tutorial lines


def _fake_tree(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tree" / "docs" / "source" / "tutorials" / "models" / "Qwen3.6-35B-A3B.md"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return tmp_path / "tree"


def _problems(tmp_path, monkeypatch, ref: str, tree_text: str) -> list[str]:
    from optkit.versions.tutorials import check_tutorials

    monkeypatch.chdir(tmp_path)
    _catalog(tmp_path, f"tutorials:\n  - {ref}\n")
    tree = _fake_tree(tmp_path, tree_text)
    catalog = load_catalog(None, [Path("mine")])
    return [str(p) for p in check_tutorials(catalog, lambda release: tree) if p.location.file == F]


REF = "{release: '0.23.0', file: docs/source/tutorials/models/Qwen3.6-35B-A3B.md, line: 2, quote: 'the rule here', " \
      "supports: a rule}"


@pytest.mark.parametrize("ref, text, problem", [
    (REF, "first\nwe say the rule here\n", None),
    (REF, "the rule here\nsomething else\n", "Qwen3.6-35B-A3B.md:2 in 0.23.0 does not contain the quote; it reads "
     "'something else' (the quote is at line 1)"),
    (REF, "only one line\n", "does not contain the quote; it reads '' (the quote is nowhere in the file"),
    (REF.replace("line: 2", "line: 9"), "a\nb\n", "has 3 lines in 0.23.0, not 9"),
    (REF.replace("Qwen3.6-35B-A3B.md", "Nope.md"), "x\n", "docs/source/tutorials/models/Nope.md is not in the 0.23.0 tree"),
    (REF.replace("'0.23.0'", "'0.99.0'"), "x\n", "release 0.99.0 is not one optkit has data for"),
], ids=["holds", "moved", "gone", "past-the-end", "no-file", "unknown-release"])
def test_cited_tutorial_lines_are_checked(tmp_path, monkeypatch, ref, text, problem):
    found = _problems(tmp_path, monkeypatch, ref, text)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0] and found[0].startswith(f"{F}:"), found


@pytest.mark.tree
def test_every_shipped_tutorial_citation_holds_in_its_releases_tree():
    """Each cited file:line of every release's real tree contains the quoted text (optkit lint --trees)."""
    from compat_support import release_trees
    from optkit.versions.tutorials import check_tutorials

    trees = release_trees()
    catalog = load_catalog()
    cited = {t.release for r in catalog for t in r.tutorials}
    assert {"0.23.0", "0.30.0rc2"} <= cited
    assert [str(p) for p in check_tutorials(catalog, lambda release: trees[release])] == []


@pytest.mark.parametrize("fields", [dict(mtp=True), dict(tp=2, dp=16, concurrency=64), dict(tp=16, target="910b"),
                                    dict(enforce_eager=True, async_scheduling=False, prefix_caching=True)],
                         ids=["flagship", "dp-across-nodes", "tp-across-nodes", "flags"])
def test_optkits_own_flags_are_the_ones_derive_reserves(fields):
    """Every flag the launch sets from the request (not from a recipe) is in OPTKIT_FLAGS."""
    from optkit.bundle.launch import Launch
    from optkit.catalog.derive import OPTKIT_FLAGS
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    workspace = load_workspace()
    launch = Launch(plan(parse_request({"model": "qwen3.5-35b", **fields}), workspace), workspace)
    own = {t for t, who in zip(launch.argv, launch.sources) if t.startswith("--") and who in ("optkit", "request")}
    own |= {t for t, who in zip(launch.argv, launch.sources) if t in ("--compilation-config", "--speculative-config",
                                                                       "--additional-config")}
    assert own and own <= OPTKIT_FLAGS, own - OPTKIT_FLAGS


@pytest.mark.tree
def test_lint_trees_reports_a_moved_line_at_file_line(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from optkit.cli.main import cli

    monkeypatch.chdir(tmp_path)
    _catalog(tmp_path, "tutorials:\n  - {release: '0.23.0', file: docs/source/tutorials/models/Qwen3.6-35B-A3B.md, "
                       "line: 226, quote: 'greater than or equal to the test concurrency', supports: the rule}\n")
    result = CliRunner().invoke(cli, ["lint", "mine", "--trees"])
    assert result.exit_code == 1
    assert f"{F}:" in result.output and "does not contain the quote" in result.output
    assert "(the quote is at line 227)" in result.output
