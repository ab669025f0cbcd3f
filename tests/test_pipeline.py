"""Pipeline parallelism (``--pp``, ``--prefill-pp``; optkit.resolve.pipeline): the layout of a pipeline's stages,
its launch, its fit, its refusals from vllm-ascend's guide, and a PD prefiller of its own pipeline with the
connector's shapes, as GLM5.md's A3 PD pair runs it (vllm-ascend 0.30.0rc2 :1066-1128)."""

from __future__ import annotations

import json

import pytest

from argv_support import flag_value
from optkit.bundle.launch import Launch
from optkit.bundle.pd import RoleLaunch
from optkit.errors import RequestError
from optkit.resolve.layout import layout_of, layout_problem
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

GLM5 = dict(model="glm-5", target="910c", quantization="w8a8c8", vllm_ascend_version="0.30.0rc2")
GLM5_PD = dict(GLM5, pd="1:1", tp=4, dp=8, prefill_tp=16, prefill_dp=1, prefill_pp=2, mtp=True)


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def test_a_pipeline_larger_than_a_node_puts_a_stage_on_each():
    layout = layout_of(16, 1, 2, pp=2)
    assert (layout.kind, layout.nodes, layout.node_devices, layout.dp_local) == ("pp-across-nodes", 2, 16, 1)
    assert layout.summary == "TP16 PP2 DP1 on 2 nodes (the pipeline's 2 stages span the nodes, 1 stage of 16 ranks per node)"
    assert layout_of(4, 2, 1, pp=2).kind == "single-node"  # MiniMax-M3.md's A3 prefiller: TP4 PP2 DP2, 16 devices
    assert layout_problem(16, 1, 3, 16, pp=3) == ""  # three stages on three nodes
    assert layout_problem(4, 1, 2, 8, pp=3) == "its 3 pipeline stages do not split evenly over 2 nodes"
    assert "planned with DP 1 only" in layout_problem(16, 2, 4, 16, pp=2)


def test_a_pipeline_across_nodes_launches_as_the_guide_runs_it(workspace):
    result = plan(Request(**GLM5, tp=16, pp=2), workspace)
    argv = Launch(result, workspace).argv
    assert result.facts["parallel.pp"] == 2 and result.facts["parallel.layout"] == "pp-across-nodes"
    assert result.facts["parallel.cards"] == 16  # 32 dies of two A3 nodes
    assert flag_value(argv, "--pipeline-parallel-size") == "2"
    assert (flag_value(argv, "--nnodes"), flag_value(argv, "--distributed-executor-backend")) == ("2", "mp")
    assert flag_value(argv, "--node-rank") == "$NODE_RANK"


def test_each_stage_holds_its_layers_weights_and_kv_cache(workspace):
    one = plan(Request(**GLM5, tp=16), workspace).fit
    two = plan(Request(**GLM5, tp=16, pp=2), workspace).fit
    assert two.weights_gib == pytest.approx(one.weights_gib / 2)
    per_token = [fit.kv_gib / fit.inputs.max_model_len for fit in (one, two)]  # the pages' commands differ in it
    assert per_token[1] == pytest.approx(per_token[0] / 2)
    assert "split over 2 pipeline stages" in two.weights_basis
    assert two.reserve_gib > one.reserve_gib  # the PP communicator's HCCL buffers


@pytest.mark.parametrize("fields, message", [
    (dict(tp=8, pp=2, pcp=2, vllm_ascend_version="0.26.0rc1"), r"--pp 2 \(request field pp\): PP cannot be combined with prefill context parallelism "
                              r"\(.*pipeline_parallel.md:301, :426\)"),
    (dict(tp=16, pp=2, pd="1:1"), r"--pp 2 with --pd 1:1: --pp would size the decode instances, which run PP 1 .*give "
                                  r"the prefill instances' pipeline with --prefill-pp alone"),
    (dict(tp=8, dp=2, pp=2), r"PP and DP together across nodes fail for a MoE model .*:431-433"),
])
def test_what_the_guide_says_pp_does_not_stack_with_is_refused(workspace, fields, message):
    with pytest.raises(RequestError, match=message):
        plan(Request(**{**GLM5, **fields}), workspace)


def test_eagle3_with_pp_is_minimax_m3s_only(workspace):
    with pytest.raises(RequestError, match=r"EAGLE-3 with PP is supported only for MiniMax-M3 .*:298"):
        plan(Request(model="qwen3-235b-a22b", target="910c", tp=8, pp=2, spec_method="eagle3", draft_model="d/e",
                     vllm_ascend_version="0.30.0rc2"), workspace)


def test_a_prefill_pipeline_without_pd_is_refused(workspace):
    with pytest.raises(RequestError, match=r"--prefill-pp without --pd"):
        plan(Request(**GLM5, tp=16, prefill_pp=2), workspace)


def test_pp_with_pd_is_refused_even_where_it_equals_the_prefill_pipeline(workspace):
    """--pp would size the decode instances, which run PP 1 (pipeline_parallel.md:307, :431); before, --pp 2 with
    --prefill-pp 2 passed the check meant for the prefill role's own plan, and the decoders ran PP 2."""
    with pytest.raises(RequestError, match=r"^--pp 2 with --pd 1:1: .*the Decode node must use PP1.*--prefill-pp alone"):
        plan(Request(**{**GLM5_PD, "pp": 2}), workspace)


def test_a_pd_prefiller_runs_its_own_pipeline_across_two_nodes(workspace):
    """GLM5.md (0.30.0rc2): the prefiller TP 16 × PP 2 over P0/P1 (:1066, :1128) with VLLM_PP_LAYER_PARTITION
    41,37 (:1057), the decoders TP 4 × DP 8 (:1314); both connectors state the prefiller's pp_size and partition."""
    result = plan(Request(**GLM5_PD), workspace)
    assert result.pd.summary.startswith("1P1D: 1P of TP16 PP2 DP1 (2 nodes each), 1D of TP4 DP8 (2 nodes each)")
    prefill, decode = (RoleLaunch(result, workspace, role) for role in ("prefill", "decode"))
    assert flag_value(prefill.argv, "--pipeline-parallel-size") == "2"
    assert flag_value(prefill.argv, "--nnodes") == "2"
    assert flag_value(decode.argv, "--pipeline-parallel-size") is None
    assert prefill.plan.layout.kind == "pp-across-nodes" and decode.plan.layout.kind == "dp-across-nodes"
    for launch in (prefill, decode):
        shapes = launch.kv_transfer_config(launch.instances[0])["kv_connector_extra_config"]
        assert shapes["prefill"] == {"dp_size": 1, "pp_layer_partition": "41,37", "pp_size": 2, "tp_size": 16}
        assert shapes["decode"] == {"dp_size": 8, "tp_size": 4}
    assert any(e["name"] == "VLLM_PP_LAYER_PARTITION" for e in prefill.env)
    assert not any(e["name"] == "VLLM_PP_LAYER_PARTITION" for e in decode.env)  # the guide: not on a PP1 decoder


@pytest.mark.tree
@pytest.mark.vllm
def test_the_pd_bundle_of_a_prefill_pipeline_passes_its_check(workspace, tmp_path):
    """Both roles' argv of every node through vLLM 0.30.0's parser and engine configuration, the scripts through
    shellcheck: the prefiller's second node headless, a stage of its pipeline."""
    from optkit.bundle.check import check_bundle
    from optkit.bundle.writer import write_bundle
    from vllm_support import paired_python

    write_bundle(plan(Request(**GLM5_PD), workspace), workspace, tmp_path / "b")
    lock = json.loads((tmp_path / "b" / "optkit.lock.json").read_text())
    assert lock["launch"]["pd"]["shapes"]["prefill"] == {"tp": 16, "dp": 1, "pp": 2}
    assert "DP_START_RANK" not in (tmp_path / "b" / "prefill" / "serve.sh").read_text()
    paired_python(lock["versions"]["vllm"])
    report = check_bundle(tmp_path / "b")
    assert [(c.name, c.status) for c in report.checks if c.status == "fail"] == [], report.problems


def test_a_pd_prefiller_sizes_its_own_dcp(workspace):
    """GLM5.2.md's A3 pair (0.30.0rc2): DCP 16 on the TP 16 prefillers (:1496), 8 on the TP 8 decoders (:1510)."""
    result = plan(Request(model="glm-5.2", target="910c", quantization="w8a8", vllm_ascend_version="0.30.0rc2",
                          pd="1:1", tp=8, dp=4, dcp=8, prefill_tp=16, prefill_dp=2, prefill_dcp=16,
                          max_model_len=131072, enforce_eager=True), workspace)
    prefill, decode = (RoleLaunch(result, workspace, role) for role in ("prefill", "decode"))
    assert flag_value(prefill.argv, "--decode-context-parallel-size") == "16"
    assert flag_value(decode.argv, "--decode-context-parallel-size") == "8"
    with pytest.raises(RequestError, match=r"--prefill-dcp without --pd"):
        plan(Request(model="glm-5.2", target="910c", tp=8, prefill_dcp=16), workspace)


@pytest.mark.parametrize("fields, flag", [
    (dict(tp=16), "--tp 16"), (dict(tp=8, pp=2), "--pp 2"), (dict(tp=8, dcp=2), "--dcp 2")],
    ids=["tp16", "pp2", "dcp2"])
def test_deepseek_v41_engram_layouts_vllm_ascend_refuses_are_refused(workspace, fields, flag):
    """vllm-ascend 0.30.0rc2 refuses DeepSeek-V4.1's Engram outside TP 1/2/4/8 with PP and DCP 1 at start-up
    (platform.py:1615-1621); a layout within it plans."""
    base = {"model": "deepseek-v4.1-flash", "target": "910c", "quantization": "w8a8", "vllm_ascend_version": "0.30.0rc2"}
    with pytest.raises(RequestError, match=rf"^{flag}: deepseek-v4.1-flash serves with Engram.*platform.py:1615-1621"):
        plan(Request.model_validate({**base, **fields}), workspace)
    assert plan(Request.model_validate({**base, "tp": 8, "dp": 2}), workspace).request.tp == 8


@pytest.mark.parametrize("target, nodes", [("910c", 2), ("910b", 4)])
def test_a_refusals_smallest_change_is_one_engram_allows(workspace, target, nodes):
    """DeepSeek-V4.1-Flash's bf16 weights do not fit TP 2 on 0.30.0rc2; the fit's smallest changes offered --tp 32,
    which the Engram rule then refused. They now offer only layouts Engram allows, and the first plans."""
    base = {"model": "deepseek-v4.1-flash", "target": target, "vllm_ascend_version": "0.30.0rc2"}
    with pytest.raises(RequestError, match=r"Smallest changes first: --dp 16 --nodes \d") as refused:
        plan(Request.model_validate(base), workspace)
    assert "--tp 16" not in str(refused.value) and "--tp 32" not in str(refused.value)
    assert plan(Request.model_validate({**base, "dp": 16, "nodes": nodes}), workspace).layout.nodes == nodes
