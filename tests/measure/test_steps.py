"""optkit.measure.steps: the ladder's steps from real plans of the shipped catalog, and their cost."""

from __future__ import annotations

import re

import pytest

from optkit.errors import UnknownName
from optkit.measure import MeasureError
from optkit.measure.steps import NONE, _Links, ladder_steps, load_article_order, run_cost
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WS = load_workspace()
ARTICLE = load_article_order(WS.root)
MTP = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
NO_MTP = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4]}


def ladder(request: dict, **options):
    result = plan(Request(**request), WS)
    return result, ladder_steps(result, WS.catalog, article_order=ARTICLE, **options)


def by_subject(steps):
    return {s.subject: s for s in steps if s.subject}


@pytest.mark.parametrize("request_, options", [
    pytest.param(MTP, {}, id="mtp-dependency"), pytest.param(MTP, {"order": "article"}, id="mtp-article"),
    pytest.param(NO_MTP, {}, id="no-mtp"), pytest.param(MTP, {"leave_one_out": True}, id="mtp-leave-one-out"),
    pytest.param(NO_MTP, {"leave_one_out": True, "order": "article"}, id="no-mtp-leave-one-out"),
])
def test_every_step_is_a_valid_selection_and_every_recipe_is_measured_once(request_, options):
    result, lad = ladder(request_, **options)
    links = _Links(WS.catalog, result.facts, result.selected, result.resolution.upstream)
    for step in lad.steps:
        assert links.unmet(set(step.recipes)) == [] and links.clashes(set(step.recipes)) == [], step.id
    subjects = [s.subject for s in lad.steps if s.subject]
    assert len(subjects) == len(set(subjects))
    measured = set(lad.steps[0].recipes) | {r for s in lad.steps for r in s.changes} | set(lad.inert)
    assert measured == set(result.selected)
    assert [s.index for s in lad.steps] == list(range(len(lad.steps)))


def test_the_baseline_holds_what_the_request_implies():
    _, lad = ladder(MTP)
    assert lad.steps[0].recipes == ("cudagraph-capture-sizes-spec-aware", "mtp-enable-k4")
    _, lad = ladder(NO_MTP)
    assert lad.steps[0].recipes == ()


def test_a_recipe_that_changes_nothing_is_no_step():
    _, lad = ladder(MTP)
    assert list(lad.inert) == ["waterfall-version-upgrade"]


def test_recipes_that_need_each_other_move_together_with_the_reason():
    _, lad = ladder(MTP)
    step = by_subject(lad.steps)["waterfall-static-kernel"]
    assert step.changes == ("waterfall-static-kernel", "compile-super-kernel")
    assert step.together["compile-super-kernel"].startswith(
        "lifts the conflict of waterfall-static-kernel with mtp-enable-k4 (static kernel + MTP needs SuperKernel")
    assert "compile-super-kernel" not in by_subject(lad.steps)  # it came along: no step of its own


def test_incremental_steps_follow_the_order_and_compare_with_the_step_before():
    result, lad = ladder(MTP)
    assert [s.subject for s in lad.steps[1:]] == [r for r in result.selected if r not in lad.steps[0].recipes
                                                  and r not in lad.inert and r != "compile-super-kernel"]
    assert all(s.reference == prev.id for prev, s in zip(lad.steps, lad.steps[1:]))
    assert lad.steps[-1].recipes == tuple(r for r in result.selected if r not in lad.inert)


def test_article_order_follows_the_articles_sequence():
    _, lad = ladder(MTP, order="article")
    assert [s.subject for s in lad.steps[1:4]] == ["waterfall-static-kernel", "waterfall-hccl-aiv",
                                                   "moe-shared-expert-sidestream-ar"]


def test_the_article_order_names_only_catalog_recipes():
    assert set(ARTICLE) <= set(WS.catalog.recipes) and len(ARTICLE) == len(set(ARTICLE))


@pytest.mark.parametrize("recipe, also_removed", [
    pytest.param("moe-shared-expert-sidestream-ar", {"moe-shared-expert-weight-prefetch": "requires moe-shared-expert-sidestream-ar",
                                                     "moe-skip-dispatch-combine-events": "requires moe-shared-expert-sidestream-ar"},
                 id="dependents-go-too"),
    pytest.param("compile-super-kernel", {"waterfall-static-kernel": "conflicts with mtp-enable-k4 without compile-super-kernel",
                                          "static-kernel-compile-fixes": "requires waterfall-static-kernel"},
                 id="an-unlifted-conflict-goes-too"),
    pytest.param("waterfall-hccl-aiv", {}, id="alone"),
])
def test_leave_one_out_removes_what_cannot_stay_without_the_recipe(recipe, also_removed):
    result, lad = ladder(MTP, leave_one_out=True)
    assert [s.kind for s in lad.steps[:2]] == ["baseline", "full"]
    step = by_subject(lad.steps)[recipe]
    assert step.id.endswith(f"-without-{recipe}") and step.reference == "01-full"
    assert set(step.changes) == {recipe, *also_removed}
    for rid, why in also_removed.items():
        assert step.together[rid].startswith(why)
    assert set(step.recipes) == set(lad.steps[1].recipes) - set(step.changes)


def test_only_measures_the_named_recipes_and_what_they_need():
    _, lad = ladder(MTP, only=["compile-super-kernel", "waterfall-hccl-aiv"])
    assert [s.changes for s in lad.steps[1:]] == [("waterfall-hccl-aiv",),
                                                  ("compile-super-kernel", "waterfall-static-kernel")]


@pytest.mark.parametrize("only, error, words", [
    pytest.param(["no-such-recipe"], UnknownName, "unknown recipe 'no-such-recipe'", id="unknown"),
    pytest.param(["moe-fused-mc2-enable"], MeasureError, "--recipes moe-fused-mc2-enable: the plan does not select it "
                 "(objective:", id="not-selected"),
])
def test_only_refuses_what_the_plan_does_not_select(only, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")):
        ladder(MTP, only=only)


@pytest.mark.parametrize("fields, words", [
    pytest.param({"tp": 2, "dp": 16}, "TP2 DP16 on 2 nodes (8 DP ranks of TP2 per node)", id="dp-across-nodes"),
    pytest.param({"tp": 16, "target": "910b"}, "TP16 DP1 on 2 nodes (the TP group spans the nodes", id="tp-across-nodes"),
    pytest.param({"tp": 2, "dp": 4, "nodes": 2}, "TP2 DP4 on 2 nodes (2 DP ranks of TP2 per node)", id="spread"),
])
def test_the_ladder_refuses_a_plan_on_several_nodes(fields, words):
    """run-ladder.sh serves every step on one host: a plan across nodes cannot be measured by it."""
    with pytest.raises(MeasureError, match=re.escape("the ladder measures on one node, and this plan runs " + words)):
        ladder({**MTP, **fields})


@pytest.mark.parametrize("keys, repeat, expected", [
    pytest.param([(NONE, NONE)], 3, (3, 0, 0, 0), id="baseline-only"),
    pytest.param([(NONE, NONE), ("a", NONE), ("a", NONE), ("b", NONE)], 1, (4, 2, 2, 0), id="re-patch-when-it-changes"),
    pytest.param([(NONE, NONE), ("a", "k"), ("b", "k"), ("c", NONE)], 2, (8, 3, 3, 2), id="rebuild-when-kernels-change"),
    pytest.param([("a", "k"), (NONE, NONE)], 1, (2, 1, 1, 2), id="back-to-pristine"),
])
def test_run_cost(keys, repeat, expected):
    cost = run_cost(keys, repeat)
    assert (cost["server_starts"], cost["tree_applies"], cost["tree_reverts"], cost["kernel_rebuilds"]) == expected
