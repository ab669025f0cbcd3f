"""Your own recipes: ``--catalog DIR`` (and ``$OPTKIT_CATALOG_PATH``) layered over the shipped catalog,
with the same loader, lint and errors; the lock records each folder and its hash."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.catalog.lint import lint
from optkit.catalog.loader import load_catalog
from optkit.cli.main import cli
from optkit.errors import ValidationFailed

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "recipes"


def _team_recipe(folder: Path, rid: str = "team-hccl-tweak", source: str = "waterfall-hccl-aiv", **edits) -> Path:
    """A recipe of one's own: a shipped one copied under a new id, its env var renamed."""
    target = folder / rid
    shutil.copytree(SHIPPED / source, target)
    path = target / "recipe.yaml"
    text = path.read_text(encoding="utf-8").replace(f"id: {source}", f"id: {rid}", 1)
    text = text.replace("HCCL_OP_EXPANSION_MODE", "HCCL_TEAM_KNOB")
    for old, new in edits.items():
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return path


def run(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env)


def test_a_layered_recipe_is_planned_and_locked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _team_recipe(Path("mine"))
    data = json.loads(run("plan", "qwen3.5-35b", "--catalog", "mine", "--json").output)
    assert data["decisions"]["team-hccl-tweak"]["status"] == "selected"
    assert run("plan", "qwen3.5-35b", "--catalog", "mine", "-o", "bundle").exit_code == 0
    lock = json.loads(Path("bundle/optkit.lock.json").read_text())
    assert lock["optkit"]["catalogs"][0]["path"] == "mine" and len(lock["optkit"]["catalogs"][0]["sha256"]) == 64
    assert lock["recipes"]["team-hccl-tweak"]["catalog"] == "mine"
    assert lock["recipes"]["waterfall-hccl-aiv"]["catalog"] == "shipped"
    assert "export HCCL_TEAM_KNOB=AIV" in Path("bundle/env.sh").read_text()
    again = run("plan", "--from-lock", "bundle/optkit.lock.json", "-o", "again")
    assert again.exit_code == 0, again.output
    assert all((Path("again") / p.relative_to("bundle")).read_bytes() == p.read_bytes()
               for p in Path("bundle").rglob("*") if p.is_file())


def test_from_lock_refuses_a_changed_catalog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = _team_recipe(Path("mine"))
    assert run("plan", "qwen3.5-35b", "--catalog", "mine", "-o", "bundle").exit_code == 0
    recipe.write_text(recipe.read_text() + "# edited\n")
    result = run("plan", "--from-lock", "bundle/optkit.lock.json", "-o", "again")
    assert result.exit_code == 1
    assert "the catalog mine changed since bundle/optkit.lock.json was written" in result.output
    shutil.rmtree("mine")
    gone = run("plan", "--from-lock", "bundle/optkit.lock.json", "-o", "again")
    assert gone.exit_code == 1 and "--catalog mine is not found from here" in gone.output
    assert not Path("again").exists()


def test_from_lock_refuses_a_catalog_whose_records_changed(recorded, tmp_path, monkeypatch):
    """A record added to (or removed from) one's own verified/ after the lock changes the plan's numbers."""
    monkeypatch.chdir(tmp_path)
    _team_recipe(Path("mine"))
    assert run(*PLAN, "--catalog", "mine", "-o", "bundle").exit_code == 0
    shutil.copytree(recorded / "verified", Path("mine/verified"))
    result = run("plan", "--from-lock", "bundle/optkit.lock.json", "-o", "again")
    assert result.exit_code == 1, result.output
    assert "the catalog mine changed since bundle/optkit.lock.json was written" in result.output


def test_the_environment_variable_layers_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _team_recipe(Path("a"), "team-one")
    _team_recipe(Path("b"), "team-two", source="waterfall-version-upgrade")
    result = run("recipes", "--json", env={"OPTKIT_CATALOG_PATH": "a:b"})
    ids = {row["id"] for row in json.loads(result.output)}
    assert {"team-one", "team-two", "waterfall-hccl-aiv"} <= ids


@pytest.mark.parametrize(
    "layout, message",
    [
        (lambda d: _team_recipe(d / "one", "waterfall-hccl-aiv"),
         "one/waterfall-hccl-aiv/recipe.yaml:1: id: recipe 'waterfall-hccl-aiv' is a shipped recipe "
         "(recipes/waterfall-hccl-aiv) (rename yours, or set replaces_shipped: true to plan with it instead)"),
        (lambda d: (_team_recipe(d / "one"), _team_recipe(d / "two")),
         "two/team-hccl-tweak/recipe.yaml:1: id: recipe 'team-hccl-tweak' is also in the catalog one"),
        (lambda d: _team_recipe(d / "one", **{"kind: env": "kind: env\nreplaces_shipped: true"}),
         "replaces_shipped: replaces_shipped is true but no shipped recipe is called 'team-hccl-tweak'"),
        (lambda d: _team_recipe(d / "one", **{"kind: env": "kind: envv"}),
         "one/team-hccl-tweak/recipe.yaml:"),
        (lambda d: (d / "one" / "empty").mkdir(parents=True),
         "one/empty: no recipe.yaml in this folder"),
    ],
    ids=["shipped-id", "two-folders-one-id", "replaces-nothing", "schema-error", "folder-without-recipe"],
)
def test_layering_errors(tmp_path, monkeypatch, layout, message):
    monkeypatch.chdir(tmp_path)
    layout(Path("."))
    folders = [Path(p) for p in ("one", "two") if Path(p).is_dir()]
    with pytest.raises(ValidationFailed) as exc:
        load_catalog(None, folders)
    assert message in str(exc.value), str(exc.value)


def test_replacing_a_shipped_recipe_is_said_and_used(tmp_path):
    _team_recipe(tmp_path / "mine", "waterfall-hccl-aiv", **{"kind: env": "kind: env\nreplaces_shipped: true"})
    catalog = load_catalog(None, [tmp_path / "mine"])
    assert catalog.origins["waterfall-hccl-aiv"] == tmp_path / "mine"
    assert catalog["waterfall-hccl-aiv"].env[0].name == "HCCL_TEAM_KNOB"
    assert list(catalog.recipes) == sorted(catalog.recipes)


def test_lint_audits_a_folder_against_the_shipped_catalog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _team_recipe(Path("mine"), **{"effective_when:\n": "requires:\n  - recipe: compile-super-kernal\n    msg: needs it\n"
                                                      "effective_when:\n"})
    found = [str(p) for p in lint(Path("mine"))]
    assert any(f.startswith("mine/team-hccl-tweak/recipe.yaml:") and "unknown recipe 'compile-super-kernal'" in f
               and "did you mean 'compile-super-kernel'?" in f for f in found), found
    result = run("lint", "mine")
    assert result.exit_code == 1 and "unknown recipe 'compile-super-kernal'" in result.output
    shutil.rmtree("mine")
    _team_recipe(Path("mine"), **{"effective_when:\n": "requires:\n  - recipe: compile-super-kernel\n    msg: needs it\n"
                                                      "effective_when:\n"})
    assert run("lint", "mine").output.strip() == "catalog ok"


PLAN = ("plan", "qwen3.5-35b", "--target", "910c", "--concurrency", "1,4", "--input-len", "32", "--output-len", "8",
        "--no-min-tokens", "--json")  # no min_tokens: with it the sampler fast path the record measured has no effect
MEASURED = "measured on 910C (driver 24.1.rc3, CANN 9.0.1), vllm-ascend 0.23.0, record "


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A folder of one's own holding only verified/: the record `optkit report --record --catalog` wrote."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "measure"))
    from test_report import Lab

    lab = Lab(tmp_path_factory.mktemp("lab"))
    lab.all()
    mine = tmp_path_factory.mktemp("user") / "mine"
    mine.mkdir()
    result = run("report", str(lab.ladder), "--record", "--catalog", str(mine))
    assert result.exit_code == 0, result.output
    (path,) = (mine / "verified").glob("*.yaml")
    assert f"recorded {path}" in result.output
    return mine


def _with_a_recipe(folder: Path) -> None:
    _team_recipe(folder)


def _record_removed(folder: Path) -> None:
    for path in (folder / "verified").glob("*.yaml"):
        path.unlink()


@pytest.mark.parametrize("via", ["--catalog", "OPTKIT_CATALOG_PATH"])
@pytest.mark.parametrize("command, change, measured", [
    pytest.param(PLAN, None, True, id="plan"),
    pytest.param(("show", "sampler-greedy-bf16-fastpath"), None, True, id="show"),
    pytest.param(("recipes", "--json"), None, True, id="recipes"),
    pytest.param(PLAN, _with_a_recipe, True, id="plan-beside-a-recipe-of-ones-own"),
    pytest.param(PLAN, _record_removed, False, id="plan-after-the-record-is-removed"),  # the cache sees the folder
])
def test_the_records_of_ones_own_catalog_are_read(recorded, tmp_path, monkeypatch, via, command, change, measured):
    mine = tmp_path / "mine"
    shutil.copytree(recorded, mine)
    run(*PLAN, "--catalog", str(mine))  # warm the cache with the record in place
    if change:
        change(mine)
    monkeypatch.chdir(tmp_path)
    args, env = (command + ("--catalog", "mine"), None) if via == "--catalog" else (command, {"OPTKIT_CATALOG_PATH": "mine"})
    result = run(*args, env=env)
    assert result.exit_code == 0, result.output
    if command[0] == "recipes":
        row = next(r for r in json.loads(result.output) if r["id"] == "sampler-greedy-bf16-fastpath")
        assert row["verification"] == "hardware-verified" and row["measured"][0].startswith(MEASURED)
    else:
        assert (MEASURED in result.output) is measured, result.output


def test_a_catalog_root_is_named_as_such_by_lint_and_plan(tmp_path, monkeypatch):
    """`optkit lint ROOT` checks a catalog root (it holds recipes/) on its own; `plan --catalog ROOT` takes recipe
    folders, so it refuses the root naming the folder to give instead, and lint says the same."""
    monkeypatch.chdir(tmp_path)
    _team_recipe(Path("root/recipes"))
    lint_out = run("lint", "root")
    assert lint_out.exit_code == 0 and lint_out.output.strip() == (
        "catalog ok: root checked as a catalog root on its own (plan --catalog takes a folder of recipe folders, "
        "layered over the shipped catalog: root/recipes)")
    refused = run(*PLAN, "--catalog", "root")
    assert refused.exit_code == 1 and "root: a catalog root (it holds recipes/), not a folder of recipe folders " \
        "(--catalog takes the recipe folders: give root/recipes" in refused.output
    assert run(*PLAN, "--catalog", "root/recipes").exit_code == 0
