"""Where a plan's TP × DP ranks run: the layouts and their refusals (optkit.resolve.layout), the node
count, and the recipe rules that read the layout facts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from optkit.catalog.factspec import FACTS
from optkit.catalog.schema import compiled
from optkit.cli.main import cli
from optkit.errors import RequestError
from optkit.resolve.layout import layout_of, layout_problem, node_layout
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WORKSPACE = load_workspace()
FLAGSHIP = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
TWO_NODES = {"tp": 2, "dp": 16}  # 8 DP ranks of TP2 on each of two 910C nodes


# --------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("tp, dp, nodes, per_node, kind, node_devices, dp_local", [
    (2, 1, 1, 16, "single-node", 2, 1),
    (8, 2, 1, 16, "single-node", 16, 2),
    (2, 16, 2, 16, "dp-across-nodes", 16, 8),
    (2, 32, 4, 16, "dp-across-nodes", 16, 8),
    (16, 2, 2, 16, "dp-across-nodes", 16, 1),
    (2, 4, 2, 16, "dp-across-nodes", 4, 2),
    (32, 1, 2, 16, "tp-across-nodes", 16, 1),
    (32, 1, 4, 16, "tp-across-nodes", 8, 1),
    (16, 1, 2, 8, "tp-across-nodes", 8, 1),
], ids=["flagship", "tp8-dp2-one-node", "dp16-two-nodes", "dp32-four-nodes", "tp16-dp2", "spread-dp4",
        "tp32-two-nodes", "tp32-four-nodes", "tp16-on-910b"])
def test_layouts(tp, dp, nodes, per_node, kind, node_devices, dp_local):
    assert layout_problem(tp, dp, nodes, per_node) == ""
    layout = layout_of(tp, dp, nodes)
    assert (layout.kind, layout.nodes, layout.node_devices, layout.dp_local) == (kind, nodes, node_devices, dp_local)
    assert layout.kind in FACTS["parallel.layout"].choices


@pytest.mark.parametrize("tp, dp, nodes, per_node, problem", [
    (2, 2, 3, 16, "the 4 ranks (TP × DP) do not split evenly over 3 nodes"),
    (2, 16, 1, 16, "each node would run 32 devices, but a node has 16"),
    (4, 5, 2, 16, "DP 5 does not split evenly over 2 nodes, so a TP group would span nodes although TP 4 fits one"),
    (8, 1, 2, 16, "DP 1 does not split evenly over 2 nodes, so a TP group would span nodes although TP 8 fits one"),
    (32, 2, 4, 16, "TP 32 does not fit one node, and a TP group spanning nodes is planned with DP 1 only"),
    (32, 1, 1, 16, "each node would run 32 devices, but a node has 16"),
], ids=["ranks-not-divisible", "too-many-devices", "dp-not-divisible", "tp-that-fits-spread", "tp-across-with-dp",
        "tp-too-big-for-one"])
def test_layout_refusals(tp, dp, nodes, per_node, problem):
    assert layout_problem(tp, dp, nodes, per_node).startswith(problem)


@pytest.mark.parametrize("fields, message", [
    (dict(tp=2, dp=2, nodes=3), "--tp 2 × --dp 2 on --nodes 3 of 910c (16 devices each): the 4 ranks (TP × DP) do not "
     "split evenly over 3 nodes; TP 2 × DP 2 runs on --nodes 1 (one node), --nodes 2 (1 DP rank of TP2 per node)"),
    (dict(tp=4, dp=5), "--tp 4 × --dp 5 on 2 nodes (the fewest that hold them) of 910c (16 devices each): DP 5 does "
     "not split evenly over 2 nodes, so a TP group would span nodes although TP 4 fits one; TP 4 × DP 5 runs on "
     "--nodes 5 (1 DP rank of TP4 per node)"),
    (dict(tp=8, nodes=2), "--tp 8 × --dp 1 on --nodes 2 of 910c (16 devices each): DP 1 does not split evenly over 2 "
     "nodes, so a TP group would span nodes although TP 8 fits one; TP 8 × DP 1 runs on --nodes 1 (one node)"),
    (dict(tp=2, dp=16, nodes=1), "--tp 2 × --dp 16 on --nodes 1 of 910c (16 devices each): each node would run 32 "
     "devices, but a node has 16; TP 2 × DP 16 runs on --nodes 2 (8 DP ranks of TP2 per node), --nodes 4 (4 DP ranks "
     "of TP2 per node), --nodes 8 (2 DP ranks of TP2 per node), --nodes 16 (1 DP rank of TP2 per node)"),
    (dict(tp=32, dp=2), "--tp 32 × --dp 2 on 4 nodes (the fewest that hold them) of 910c (16 devices each): TP 32 "
     "does not fit one node, and a TP group spanning nodes is planned with DP 1 only (vLLM would infer each node's "
     "DP rank from its node rank; no vllm-ascend release documents it); use --dp 1 with --tp 32, or a TP of at most "
     "16 with the DP ranks across nodes"),
], ids=["indivisible", "derived-count-fails", "tp-fits-one-node", "nodes-1-too-small", "tp-across-with-dp"])
def test_layout_errors_name_the_flags_and_the_way_out(fields, message):
    with pytest.raises(RequestError) as info:
        node_layout(Request(model="qwen3.5-35b", **fields), WORKSPACE.targets["910c"])
    assert str(info.value) == message


@pytest.mark.parametrize("fields, nodes", [
    (dict(), 1), (dict(tp=16), 1), (dict(tp=2, dp=16), 2), (dict(tp=2, dp=12), 2), (dict(tp=32), 2),
    (dict(tp=2, dp=32), 4), (dict(tp=2, dp=4, nodes=2), 2),
], ids=["flagship", "tp16", "dp16", "dp12", "tp32", "dp32", "given"])
def test_the_node_count_is_the_fewest_that_hold_the_ranks_unless_given(fields, nodes):
    assert node_layout(Request(model="qwen3.5-35b", **fields), WORKSPACE.targets["910c"]).nodes == nodes


def test_a_request_file_takes_nodes(tmp_path):
    path = tmp_path / "request.yaml"
    path.write_text("model: qwen3.5-35b\ntp: 2\ndp: 4\nnodes: 2\n")
    result = CliRunner().invoke(cli, ["facts", "--request", str(path)])
    assert result.exit_code == 0, result.output
    assert "parallel.nodes = 2" in result.output and "parallel.node_devices = 4" in result.output
    path.write_text("model: qwen3.5-35b\nnodes: 0\n")
    result = CliRunner().invoke(cli, ["facts", "--request", str(path)])
    assert result.exit_code == 1 and "request.yaml:2: nodes: 0 is out of range: give an integer from 1 to 1024" in result.output


# --------------------------------------------------------------------------- rules that read the layout


RISKS = {
    "moe-shared-expert-sidestream-ar": "Across nodes the EP group's dispatch/combine",
    "waterfall-hccl-aiv": "CANN 8.0.0's environment-variable reference",
}


@pytest.mark.parametrize("fields, recipe, applies", [
    (dict(), "moe-shared-expert-sidestream-ar", False),
    (TWO_NODES, "moe-shared-expert-sidestream-ar", True),
    ({**TWO_NODES, "ep": False}, "moe-shared-expert-sidestream-ar", False),
    (TWO_NODES, "waterfall-hccl-aiv", False),
    (dict(target="910b", mtp=False, tp=2, dp=8), "waterfall-hccl-aiv", True),
    (dict(target="910b", mtp=False, tp=2, dp=4), "waterfall-hccl-aiv", False),
], ids=["sidestream-one-node", "sidestream-two-nodes", "sidestream-no-ep", "aiv-910c-two-nodes", "aiv-910b-two-nodes",
        "aiv-910b-one-node"])
def test_multi_node_risks_apply_only_across_nodes(fields, recipe, applies):
    result = plan(Request(**{**FLAGSHIP, **fields}), WORKSPACE)
    risks = [r.text for r in WORKSPACE.catalog[recipe].risks
             if r.when is not None and compiled(r.when).evaluate(result.facts.values)]
    assert any(text.startswith(RISKS[recipe]) for text in risks) == applies


def test_a_multi_node_plan_has_no_baseline_and_says_why():
    (estimate, *_) = plan(Request(**{**FLAGSHIP, **TWO_NODES}), WORKSPACE).estimates
    assert estimate.baseline_ms is None and estimate.estimate_ms is None
    assert "measured on one 910c card, and this plan runs on 2 nodes" in estimate.basis


# --------------------------------------------------------------------------- the model page's node counts (issue 25)
# Qwen3.5-397B-A17B.md (0.30.0rc2 :27-28, :264): 2 Atlas 800 A2 nodes for W8A8, 4 for BF16; fit before launch
# (optkit.resolve.fit) refuses one node and names the page's node counts as its DP change.


@pytest.mark.parametrize("fields, refused", [
    (dict(tp=8, quantization="w8a8"), r"does not fit 910b at TP 8 × DP 1: .*Smallest changes first: --max-model-len 2048 \(the workload's longest "
                                        r"request is 1536 tokens; .*\); --tp 16; --dp 2 --nodes 2 "),
    (dict(tp=8), r"does not fit 910b at TP 8 × DP 1: .*Smallest changes first: --quantization w4a8 .*; --dp 4 --nodes 4 "),
    (dict(tp=8, dp=2, quantization="w8a8"), None),  # the page's own MP deployment: one DP rank of TP8 per node
], ids=["w8a8-one-a2-node", "bf16-one-a2-node", "w8a8-two-a2-nodes"])
def test_the_397b_page_node_count_on_a2_is_kept(fields, refused):
    request = Request(model="qwen3.5-397b", target="910b", **fields)
    if refused is None:
        assert plan(request, WORKSPACE).layout.nodes == 2
    else:
        with pytest.raises(RequestError, match=refused):
            plan(request, WORKSPACE)
