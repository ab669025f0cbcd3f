"""Decode context parallelism (recipe context-parallel-long-context, optkit.resolve.context_parallel): the sizes
vLLM refuses are refused at plan time, the recipe applies where upstream's guide says, and the fit splits the KV."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from optkit.errors import PlanImpossible, RequestError
from optkit.resolve.context_parallel import check_decode_context_parallel, dcp_sizes
from optkit.resolve.fit import kv_bytes_per_token
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

LLAMA = "tests/fixtures/hf/llama_dense/config.json"  # GQA: 32 query heads, 4 KV heads, no Gated DeltaNet
RECIPE = "context-parallel-long-context"
MLA = SimpleNamespace(kv_lora_rank=512, num_kv_heads=1, num_attention_heads=128)
GQA = SimpleNamespace(kv_lora_rank=None, num_kv_heads=4, num_attention_heads=32)


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


@pytest.mark.parametrize("model, tp, dcp, message", [
    (GQA, 8, 3, "--dcp 3 (request field dcp) with --tp 8: GQA needs the DCP size to divide TP // KV heads = 2; "
                "sizes that work at TP 8: --dcp 2"),
    (GQA, 4, 2, "--dcp 2 (request field dcp) with --tp 4: GQA needs TP (4) above the model's 4 KV heads, so that "
                "ranks hold copies of a head to split; no DCP size works at TP 4: raise --tp or leave --dcp out"),
    (MLA, 8, 3, "--dcp 3 (request field dcp) with --tp 8: an MLA model needs TP divisible by the DCP size (TP 8); "
                "sizes that work at TP 8: --dcp 2, --dcp 4, --dcp 8"),
    (GQA, 8, 2, None), (GQA, 16, 4, None), (MLA, 16, 16, None), (MLA, 2, 1, None),
], ids=["gqa-not-dividing", "gqa-tp-at-kv-heads", "mla-not-dividing", "gqa-tp8-dcp2", "gqa-tp16-dcp4",
        "mla-tp16-dcp16", "off"])
def test_a_dcp_size_vllm_refuses_is_refused(model, tp, dcp, message):
    if message is None:
        check_decode_context_parallel(model, tp, dcp)
        assert dcp == 1 or dcp in dcp_sizes(model, tp)
    else:
        with pytest.raises(RequestError) as caught:
            check_decode_context_parallel(model, tp, dcp)
        assert str(caught.value) == message


def test_a_gqa_model_gets_the_flag_and_half_the_kv_cache(workspace):
    fields = dict(model_config=LLAMA, target="910c", tp=8, input_len=65536, output_len=1024)
    with_dcp, without = plan(Request(dcp=2, **fields), workspace), plan(Request(**fields), workspace)
    assert with_dcp.resolution.decisions[RECIPE].status.value == "selected"
    assert [s.key for s in with_dcp.serve_args if "context-parallel" in s.key] == ["--decode-context-parallel-size 2"]
    # tokens per rank before the next: vllm-ascend's KV block size, as the guide's DCP command and upstream's pages
    assert [s.key for s in with_dcp.serve_args if "interleave" in s.key] == ["--cp-kv-cache-interleave-size 128"]
    assert not [s.key for s in without.serve_args if "interleave" in s.key]
    assert with_dcp.facts["parallel.context_parallel"] and with_dcp.facts["parallel.dcp"] == 2
    assert with_dcp.fit.inputs.cp == 2 and without.fit.inputs.cp == 1
    assert with_dcp.fit.kv_gib == pytest.approx(without.fit.kv_gib / 2)
    assert with_dcp.fit.weights_gib == without.fit.weights_gib  # DCP reuses the TP ranks: weights unchanged


@pytest.mark.parametrize("fields, reason", [
    (dict(model="qwen3.5-397b", target="910c", tp=16, quantization="w8a8", dcp=8), "the model has Gated DeltaNet layers"),
    (dict(model_config=LLAMA, target="910c", tp=8, dcp=2, mtp=True), "not in a PD-mixed deployment"),
], ids=["gdn-hybrid", "with-mtp"])
def test_where_the_guide_does_not_support_it_dcp_is_refused_with_the_way_out(fields, reason, workspace):
    with pytest.raises(PlanImpossible) as caught:
        plan(Request(**fields), workspace)
    text = str(caught.value)
    assert reason in text and "drop --dcp (it implies context-parallel-long-context)" in text


def test_without_dcp_the_recipe_does_not_apply(workspace):
    result = plan(Request(model_config=LLAMA, target="910c", tp=8), workspace)
    assert result.resolution.decisions[RECIPE].status.value == "excluded"  # its first precondition: no --dcp
    assert not any("context-parallel" in s.key for s in result.serve_args) and result.fit.inputs.cp == 1


def test_the_kv_cache_of_an_mla_model_is_not_split_by_tp_but_by_dcp():
    mla = SimpleNamespace(kv_lora_rank=512, qk_rope_head_dim=64, full_attention_layers=61, mtp_layers=1)
    assert kv_bytes_per_token(mla, 1, "bf16", 0) == kv_bytes_per_token(mla, 16, "bf16", 0) == 61 * 576 * 2
    assert kv_bytes_per_token(mla, 16, "bf16", 0, cp=16) == 61 * 576 * 2 / 16
    assert kv_bytes_per_token(mla, 16, "w8a8c8", 1) == 62 * 576  # the MTP layer; an int8 cache


# ----------------------------------------------------------------------------------------- prefill context parallel

QWEN235_PCP = {"model": "qwen3-235b-a22b", "target": "910c", "vllm_ascend_version": "0.23.0", "tp": 8, "pcp": 2,
               "dcp": 2, "quantization": "w8a8", "max_model_len": 135000, "concurrency": [32]}
"""Qwen3-235B-A22B.md's long-context command in 0.23.0 (:871-890): TP 8, PCP 2, DCP 2 on one A3 node."""


def test_pcp_adds_ranks_the_layout_places_and_the_ep_group_spans(workspace):
    result = plan(Request(**QWEN235_PCP), workspace)
    assert (result.layout.node_devices, result.layout.summary) == (16, "TP8 PCP2 DP1")
    assert result.facts["parallel.pcp"] == 2 and result.facts["parallel.ep_size"] == 16
    assert result.facts["parallel.cards"] == 8 and result.facts["parallel.context_parallel"]
    flags = [s.key for s in result.launch_flags]
    assert flags[:2] == ["--tensor-parallel-size 8", "--prefill-context-parallel-size 2"]


def test_the_kv_cache_is_split_over_pcp_times_dcp_and_the_experts_over_the_ep_group(workspace):
    from optkit.resolve.fit import measure, plan_fit_inputs
    from optkit.value import replace

    result = plan(Request(**QWEN235_PCP), workspace)
    inputs = plan_fit_inputs(result)
    assert (inputs.cp, inputs.pcp) == (2, 2)
    with_pcp, without = measure(result.model, result.target, inputs), measure(result.model, result.target,
                                                                            replace(inputs, pcp=1))
    assert with_pcp.kv_gib == pytest.approx(without.kv_gib / 2)
    assert with_pcp.weights_gib < without.weights_gib  # the routed experts split over 16 EP ranks, not 8


@pytest.mark.parametrize("fields, said", [
    ({"dp": 2}, "refuses PCP with DP above 1 (vllm_ascend/platform.py:351-358 in 0.23.0)"),
    ({"vllm_ascend_version": "0.30.0rc2"}, "runs PCP only under ModelRunner V2"),
    ({"target": "950"}, "supports CP on Atlas A2 and A3"),
    ({"pd": "1:1"}, "leave --pcp out of a --pd plan"),
], ids=["dp", "model-runner-v2", "a5", "pd"])
def test_pcp_where_vllm_ascend_refuses_it_or_optkit_does_not_plan_it_is_refused(fields, said, workspace):
    with pytest.raises(RequestError) as refused:
        plan(Request(**{**QWEN235_PCP, **fields}), workspace)
    assert str(refused.value).startswith("--pcp 2 (request field pcp): ") and said in str(refused.value)


def test_a_gated_deltanet_model_gets_no_pcp(workspace):
    with pytest.raises(RequestError, match=r"--pcp 2 \(request field pcp\): qwen3.5-35b-a3b has Gated DeltaNet layers"):
        plan(Request(model="qwen3.5-35b", tp=2, pcp=2), workspace)


def test_a_pcp_group_larger_than_a_node_is_refused_with_the_node_counts_that_work(workspace):
    with pytest.raises(RequestError) as refused:
        plan(Request(**{**QWEN235_PCP, "tp": 16, "dcp": 4, "nodes": 1}), workspace)
    assert str(refused.value).startswith(
        "--tp 16 × --pcp 2 × --dp 1 on --nodes 1 of 910c (16 devices each): each node would run 32 devices, but a "
        "node has 16; TP 16 × PCP 2 × DP 1 runs on --nodes 2")


def test_pcp_with_eagle3_and_no_dcp_is_planned_as_minimax_m2s_page_runs_it(workspace):
    """MiniMax-M2.md's long-context adjustment (0.23.0 :224-235): TP 8, PCP 2, DCP 1, eagle3 with k = 1."""
    result = plan(Request(**{**QWEN235_PCP, "dcp": 1, "spec_method": "eagle3", "draft_model": "org/eagle3",
                             "num_speculative_tokens": 1}), workspace)
    assert "--prefill-context-parallel-size 2" in [s.key for s in result.launch_flags]
    assert result.speculative_config["method"] == "eagle3"


def test_a_plan_without_pcp_does_not_take_a_pcp_command_as_its_layouts(workspace):
    """Qwen3-235B-A22B.md (0.23.0) runs TP 8 twice on A3: :871 with PCP 2 (16 devices), :224 without. A TP 8 plan
    with PCP 2 follows :871; one without follows :224, whose --max-model-len (:233) is its own."""
    with_pcp = plan(Request(**QWEN235_PCP), workspace).page_advice
    assert (with_pcp.layout_exact, with_pcp.layout_line) == (True, 871)
    fields = {k: v for k, v in QWEN235_PCP.items() if k not in ("pcp", "max_model_len")}
    without = plan(Request(**fields), workspace)
    assert without.page_advice.layout_line == 224
    assert ("--max-model-len 131072", "page:Qwen3-235B-A22B.md:233") in [(s.key, s.recipe) for s in without.serve_args]
