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
@settings(FEW, max_examples=5)
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
