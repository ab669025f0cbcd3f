"""Cross-command invariants of issue 25, 2(b) and 2(c): a lock replays its bundle byte for byte from any
directory, a changed input is refused naming it; a plan on a tree optkit patched selects and launches
exactly what the applied bundle does (optkit's own patches are known from the apply's records, never
taken for upstream).

Requests are generated (hypothesis, derandomized, few examples); the tree tests fetch 0.23.0 once.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.tree.apply import apply
from optkit.tree.journal import applied_recipes, pristine_base
from optkit.tree.patchset import from_bundle
from tree_support import make_bundle, make_tree, three_patches, MODULE

REPO = Path(__file__).resolve().parents[1]
FEW = settings(max_examples=8, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def files_of(bundle: Path) -> dict[str, bytes]:
    return {p.relative_to(bundle).as_posix(): p.read_bytes() for p in sorted(bundle.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- 2(b): a lock replays from any directory

HF = REPO / "tests" / "fixtures" / "hf" / "qwen3.6-35b-a3b" / "config.json"
CAPTURE = REPO / "tests" / "profile" / "fixtures" / "one-rank"
SHIPPED = REPO / "recipes"


def run(*args):
    from click.testing import CliRunner

    from optkit.cli.main import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


def _inputs(work: Path) -> None:
    """The inputs a request may name, under ``work``: a config.json, a capture, a catalog of one's own."""
    (work / "ckpt").mkdir()
    shutil.copy(HF, work / "ckpt" / "config.json")
    shutil.copytree(CAPTURE, work / "cap")
    recipe = work / "mine" / "team-hccl-tweak"
    shutil.copytree(SHIPPED / "waterfall-hccl-aiv", recipe)
    text = (recipe / "recipe.yaml").read_text(encoding="utf-8")
    (recipe / "recipe.yaml").write_text(text.replace("id: waterfall-hccl-aiv", "id: team-hccl-tweak", 1)
                                        .replace("HCCL_OP_EXPANSION_MODE", "HCCL_TEAM_KNOB"), encoding="utf-8")


KINDS = {"plain": [], "profile": ["--profile", "cap"], "model-config": ["--model-config", "ckpt/config.json", "--model-id", "Qwen/Qwen3.6-35B-A3B"],
         "model-config-folder": ["--model-config", "ckpt", "--model-id", "Qwen/Qwen3.6-35B-A3B"],
         "catalog": ["--catalog", "mine"]}
LOCK_REQUESTS = st.fixed_dictionaries({
    "model": st.sampled_from(["qwen3.5-35b", "qwen3.6-35b", "qwen3.5-27b"]),
    "target": st.sampled_from(["910c", "910b"]),
    "release": st.sampled_from(["0.23.0", "0.30.0rc2"]),
    "tp": st.sampled_from([1, 2, 4]),
    "dp": st.sampled_from(["1", "2", "auto"]),
    "nodes": st.sampled_from([None, "2"]),
    "goal": st.sampled_from([None, "latency", "throughput"]),
    "slo": st.sampled_from([None, "tpot_p99<=40ms"]),
    "concurrency": st.sampled_from(["1", "1,4,8", "64"]),
    "mtp": st.sampled_from([None, "4", "2"]),
    "kind": st.sampled_from(sorted(KINDS)),
})


def _plan_args(fields: dict) -> list[str]:
    args = [] if fields["kind"].startswith("model-config") else [fields["model"]]
    args += ["--target", fields["target"], "--vllm-ascend-version", fields["release"], "--tp", str(fields["tp"]),
             "--dp", fields["dp"], "--concurrency", fields["concurrency"], *KINDS[fields["kind"]]]
    args += ["--nodes", fields["nodes"]] if fields.get("nodes") else []
    args += ["--goal", fields["goal"]] if fields["goal"] else []
    args += ["--slo", fields["slo"]] if fields["slo"] else []
    args += ["--mtp", "--num-speculative-tokens", fields["mtp"]] if fields["mtp"] else []
    return args


@settings(FEW, max_examples=14)
@given(fields=LOCK_REQUESTS)
def test_a_lock_replays_its_bundle_byte_for_byte_from_another_directory(tmp_path_factory, fields):
    from hypothesis import assume, event

    work = tmp_path_factory.mktemp("lock")
    _inputs(work)
    cwd = os.getcwd()
    try:
        os.chdir(work)
        made = run("plan", *_plan_args(fields), "-o", "B")
        assume(made.exit_code == 0)  # a request the catalog refuses has no lock to replay
        event(f"input: {fields['kind']}")
        (work / "elsewhere").mkdir()
        os.chdir(work / "elsewhere")
        again = run("plan", "--from-lock", "../B/optkit.lock.json", *(["--catalog", "../mine"] if fields["kind"] == "catalog" else []),
                    "-o", "B2")
    finally:
        os.chdir(cwd)
    assert again.exit_code == 0, again.output
    assert files_of(work / "elsewhere" / "B2") == files_of(work / "B")


def _edit_config(work: Path) -> None:
    path = work / "ckpt" / "config.json"
    path.write_text(path.read_text().replace('"hidden_size": 2048', '"hidden_size": 4096', 1))


def _edit_capture(work: Path) -> None:
    path = next((work / "cap").rglob("op_statistic.csv"))
    path.write_text(path.read_text() + "\n")


def _edit_catalog(work: Path) -> None:
    path = work / "mine" / "team-hccl-tweak" / "recipe.yaml"
    path.write_text(path.read_text() + "# edited\n")


CHANGED = [
    pytest.param("model-config", _edit_config, "--model-config ckpt/config.json changed since the lock was written: "
                 "text_config.hidden_size 2048 → 4096", id="model-config-edited"),
    pytest.param("profile", _edit_capture, "--profile cap changed since the lock was written: "
                 "dp0_pp0_tp0_dcp0_ep0_rank0_20251202000000000_ascend_pt/ASCEND_PROFILER_OUTPUT/op_statistic.csv changed",
                 id="profile-file-edited"),
    pytest.param("catalog", _edit_catalog, "the catalog mine changed since", id="catalog-recipe-edited"),
]


@pytest.mark.parametrize("kind, change, message", CHANGED)
def test_a_replay_whose_input_changed_is_refused_naming_it(tmp_path, monkeypatch, kind, change, message):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    fields = {"model": "qwen3.6-35b", "target": "910c", "release": "0.23.0", "tp": 2, "dp": "1", "goal": None,
              "slo": None, "concurrency": "1,4,8", "mtp": "4", "kind": kind}
    made = run("plan", *_plan_args(fields), "-o", "B")
    assert made.exit_code == 0, made.output
    change(tmp_path)
    refused = run("plan", "--from-lock", "B/optkit.lock.json", "-o", "B2")
    assert refused.exit_code == 1
    assert message in refused.output
    assert not (tmp_path / "B2").exists()


def test_a_profile_replays_its_numbers_without_the_capture(tmp_path, monkeypatch):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert run("plan", "qwen3.5-35b", "--mtp", "--profile", "cap", "-o", "B").exit_code == 0
    shutil.rmtree("cap")  # not here any more: the lock holds what the plan read of it
    again = run("plan", "--from-lock", "B/optkit.lock.json", "-o", "B2")
    assert again.exit_code == 0, again.output
    assert files_of(tmp_path / "B2") == files_of(tmp_path / "B")
    assert "from your profile of" in (tmp_path / "B2" / "README.md").read_text()


def test_a_lock_planned_on_a_tree_refuses_another_tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path / "T")
    make_tree(tmp_path / "U")
    (tmp_path / "U" / "vllm_ascend" / "moe.py").write_text("changed = 1\n")
    from optkit.resolve.inputs import InputChanged, replay_inputs, tree_record
    from optkit.resolve.request_record import parse_request

    request = parse_request({"model": "qwen3.5-35b", "tree": "T"})
    inputs = {"tree": tree_record("T", tmp_path / "T")}
    assert replay_inputs(inputs, request).tree_at == Path("T")
    with pytest.raises(InputChanged, match=r"^--tree T \(given as U\) is another tree than the lock's"):
        replay_inputs(inputs, request, Path("U"))
    shutil.rmtree("T")
    with pytest.raises(InputChanged, match=r"^--tree T is not found from here"):
        replay_inputs(inputs, request)


# --------------------------------------------------------------------------- the pristine base of a patched tree


def test_pristine_base_of_a_clean_tree_is_the_tree(tmp_path):
    tree = make_tree(tmp_path / "t")
    with pristine_base(tree) as base:
        assert base == tree
    assert applied_recipes(tree) == {}


def test_pristine_base_puts_back_what_optkit_applied(tmp_path):
    tree = make_tree(tmp_path / "t")
    created = ("new-d", "vllm_ascend/extra/new.py", "--- /dev/null\n+++ b/vllm_ascend/extra/new.py\n@@ -0,0 +1 @@\n+x = 1\n")
    patches = three_patches() + [(created[0], created[1], "Description: d\nRecipe: new-d\n---\n" + created[2])]
    apply(tree, from_bundle(make_bundle(tmp_path / "b", patches)))
    patched = (tree / "vllm_ascend/moe.py").read_bytes()
    with pristine_base(tree) as base:
        assert base != tree
        assert (base / "vllm_ascend/moe.py").read_text() == MODULE  # the bytes before the apply
        assert not (base / "vllm_ascend/extra").exists()  # created by a patch: not in the base
        assert not (base / ".optkit").exists()
    assert (tree / "vllm_ascend/moe.py").read_bytes() == patched  # the tree itself is untouched
    assert not base.exists()
    assert sorted(applied_recipes(tree)) == ["attn-b", "moe-a", "new-d", "rope-c"]


# --------------------------------------------------------------------------- 2(c): plan on a tree optkit patched

REQUESTS = st.fixed_dictionaries({
    "model": st.sampled_from(["qwen3.6-35b", "qwen3.5-35b", "qwen3.5-27b"]),
    "target": st.sampled_from(["910c", "910b"]),
    "concurrency": st.sampled_from([[1], [1, 4, 8], [64]]),
    "goal": st.sampled_from([None, "throughput"]),
    "mtp": st.booleans(),
    "dp": st.sampled_from([1, "auto"]),
})


def _tree_plan_case(tmp: Path, fields: dict):
    from compat_support import pristine

    from optkit.bundle.writer import write_bundle

    workspace = load_workspace()
    bundle, again, tree = tmp / "B", tmp / "B2", tmp / "T"
    write_bundle(plan(Request(**fields), workspace), workspace, bundle)
    shutil.copytree(pristine("0.23.0"), tree, symlinks=True)
    apply(tree, from_bundle(bundle))
    write_bundle(plan(Request(**fields, tree=str(tree)), workspace), workspace, again)
    return bundle, again, tree


@pytest.mark.tree
@settings(FEW, max_examples=4)
@given(fields=REQUESTS)
def test_plan_on_a_patched_tree_selects_and_launches_what_the_bundle_does(tmp_path_factory, fields):
    bundle, again, tree = _tree_plan_case(tmp_path_factory.mktemp("tree-plan"), fields)
    first, second = (json.loads((b / "optkit.lock.json").read_text()) for b in (bundle, again))
    assert second["selected"] == first["selected"]
    assert second["patches"] == first["patches"]
    assert second["launch"] == first["launch"]
    assert {rid: d["status"] for rid, d in second["decisions"].items()} == \
        {rid: d["status"] for rid, d in first["decisions"].items()}
    skip = {"README.md", "optkit.lock.json"}  # they name the tree, as the request does
    assert {k: v for k, v in files_of(again).items() if k not in skip} == \
        {k: v for k, v in files_of(bundle).items() if k not in skip}
    # 2(b) for a tree: the lock planned on it replays byte for byte from elsewhere, told where the tree is
    elsewhere = bundle.parent / "elsewhere"
    elsewhere.mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(elsewhere)
        replayed = run("plan", "--from-lock", again / "optkit.lock.json", "--tree", tree, "-o", "B3")
    finally:
        os.chdir(cwd)
    assert replayed.exit_code == 0, replayed.output
    assert files_of(elsewhere / "B3") == files_of(again)
    shutil.rmtree(tree)


@pytest.mark.tree
def test_tree_inspect_names_optkits_applied_recipes_not_upstream(tmp_path):
    from click.testing import CliRunner

    from optkit.cli.main import cli

    fields = {"model": "qwen3.6-35b", "concurrency": [64], "goal": "throughput", "dp": "auto"}
    bundle, _, tree = _tree_plan_case(tmp_path, fields)
    applied = sorted(applied_recipes(tree))
    assert "blocktable-slot-mapping-cpu-fastpath" in applied
    result = CliRunner().invoke(cli, ["tree", "inspect", str(tree), "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["recipe"]: row for row in json.loads(result.output)["recipes"]}
    assert sorted(rid for rid, row in rows.items() if "applied_by_optkit" in row) == applied
    assert [rid for rid in applied if rows[rid]["status"] == "upstream"] == []


def _set(path: tuple, value):
    def change(lock: dict) -> None:
        node = lock
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


DAMAGED = [
    pytest.param("profile", _set(("inputs", "profile", "concurrency"), "1"), "inputs.profile.concurrency:",
                 id="profile-concurrency-not-a-number"),
    pytest.param("profile", _set(("inputs", "profile", "savings", "gdn-rearrange-qkv-view"), {"saving_us": 1}),
                 "inputs.profile.savings.gdn-rearrange-qkv-view.basis:", id="profile-saving-without-basis"),
    pytest.param("model-config", _set(("inputs", "elsewhere"), {}), "inputs.elsewhere:", id="unknown-input"),
    pytest.param("model-config", _set(("inputs", "model_config", "text"), "{}"),
                 "--model-config ckpt/config.json is held in the lock with a text whose sha256 is not the lock's",
                 id="model-config-text-edited"),
]


@pytest.mark.parametrize("kind, change, message", DAMAGED)
def test_a_lock_whose_inputs_were_edited_is_refused_where(tmp_path, monkeypatch, kind, change, message):
    _inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    fields = {"model": "qwen3.5-35b", "target": "910c", "release": "0.23.0", "tp": 2, "dp": "1", "goal": None,
              "slo": None, "concurrency": "1,4,8", "mtp": "4", "kind": kind}
    assert run("plan", *_plan_args(fields), "-o", "B").exit_code == 0
    path = tmp_path / "B" / "optkit.lock.json"
    lock = json.loads(path.read_text())
    change(lock)
    path.write_text(json.dumps(lock, indent=2))
    refused = run("plan", "--from-lock", "B/optkit.lock.json", "-o", "B2")
    assert refused.exit_code == 1
    assert message in refused.output
