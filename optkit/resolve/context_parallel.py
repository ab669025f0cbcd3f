"""Whether a decode context parallel size splits the model's KV cache as vLLM splits it.

Decode context parallelism (DCP, ``--decode-context-parallel-size``) reuses the TP ranks: the KV cache of a
sequence is split over ``dcp`` of them instead of being duplicated (vllm-ascend 0.30.0rc2
docs/source/user_guide/feature_guide/context_parallel.md, "DCP reuses the TP devices and does not increase
the world size"). A size vLLM refuses makes ``vllm serve`` fail at start-up, so it is refused here, naming the
sizes that work. The rules, as vLLM 0.30.0 enforces them and the guide states them (its "Constraints"):

- MLA: ``tp % dcp == 0`` (vllm/config/parallel.py, "tp_size=… must be divisible by dcp_size=…");
- GQA: ``tp > num_kv_heads``, ``dcp <= tp // num_kv_heads`` and ``(tp // num_kv_heads) % dcp == 0``, and the
  query heads per KV head divisible by dcp (vllm/config/model.py, ``verify_with_parallel_config``).

Prefill context parallelism (PCP, ``--prefill-context-parallel-size``, request field ``pcp``) adds ranks: each DP
rank runs TP × PCP devices (vLLM's world size is PP × TP × PCP: vllm/config/parallel.py:776-780 in 0.23.0; the
guide's "world_size_with_pcp"), a long prompt's tokens split over the PCP ranks (the guide: it "reduce[s] TTFT ...
by amortizing the computation time of the prefill", 0.23.0 context_parallel.md:9-12), and the KV cache of a
sequence over PCP × DCP ranks (vLLM's ``total_cp_world_size = pcp_world_size * dcp_world_size``,
vllm/config/parallel.py:345-346 in 0.23.0). ``optkit.resolve.layout`` places the TP × PCP group, the EP group spans
TP × PCP × DP (``optkit.resolve.sharding``) and the fit divides the KV cache by PCP × DCP. What optkit plans, and
refuses before launch (``check_prefill_context_parallel``):

- vllm-ascend below 0.27.1rc1 (0.23.0's line): PCP with DP 1 only ("PCP ... and DP ... cannot be enabled
  simultaneously", vllm_ascend/platform.py:351-358 in 0.23.0, :340 in 0.24.0rc1);
- from 0.27.1rc1 PCP runs only under ModelRunner V2 (``VLLM_USE_V2_MODEL_RUNNER=1``; platform.py:1514 in 0.27.1rc1,
  :1643 in 0.30.0rc2 refuse it otherwise): not planned there, optkit's recipes are read on the V1 model runner;
- A2 and A3 only (the guide's CP table, 0.23.0 context_parallel.md:22-25: 950 experimental);
- no Gated DeltaNet layers (the guide's backends are MLA, GQA, SFA and DSA attention);
- no ``--pd`` (the guide's PCP runs on prefill nodes only, :94-103; optkit gives both roles one shape).

Speculative decoding is not refused with PCP: the guide's "Speculative Decoding + CP" column (P/D disaggregation
only) is about DCP (its legend: "Combining the feature with DCP"), and MiniMax-M2.md's long-context adjustment
(0.23.0 :224-235) runs PCP 2 with eagle3; with DCP above 1 the DCP rule holds (context-parallel-long-context).

Upstream's one PCP command (Qwen3-235B-A22B.md:866-884 in 0.23.0, "Single-node PD Hybrid — Long Context": TP 8,
PCP 2, DCP 2 on one A3 node) is planned exactly; the guide measured its TTFT at 120k input 33.9 s → 22.7 s
(0.23.0 context_parallel.md:101-103, PD prefill nodes), a number not measured here.
"""

from __future__ import annotations

from optkit.errors import RequestError

PCP_NEEDS_MODEL_RUNNER_V2 = "0.27.1rc1"
"""The first vllm-ascend release that refuses PCP without ModelRunner V2 (vllm_ascend/platform.py:1514)."""
PCP_GENERATIONS = ("A2", "A3")


def dcp_sizes(model, tp: int) -> list[int]:
    """Every decode context parallel size above 1 vLLM accepts for ``model`` at TP ``tp``."""
    return [dcp for dcp in range(2, tp + 1) if not dcp_problem(model, tp, dcp)]


def dcp_problem(model, tp: int, dcp: int) -> str:
    """Why vLLM refuses DCP ``dcp`` for ``model`` at TP ``tp`` ('' when it accepts it)."""
    if dcp == 1:
        return ""
    if model.kv_lora_rank:  # MLA: the latent KV is not split by TP, DCP splits the sequence over TP ranks
        return "" if tp % dcp == 0 else f"an MLA model needs TP divisible by the DCP size (TP {tp})"
    kv = model.num_kv_heads
    if tp <= kv:
        return f"GQA needs TP ({tp}) above the model's {kv} KV heads, so that ranks hold copies of a head to split"
    if (tp // kv) % dcp or dcp > tp // kv:
        return f"GQA needs the DCP size to divide TP // KV heads = {tp // kv}"
    if (model.num_attention_heads // kv) % dcp:
        return f"the {model.num_attention_heads // kv} query heads per KV head must divide by the DCP size"
    return ""


def check_decode_context_parallel(model, tp: int, dcp: int) -> None:
    """Refuse a DCP size vLLM would refuse at start-up (``RequestError`` naming the flag and the sizes that work)."""
    problem = dcp_problem(model, tp, dcp)
    if problem:
        sizes = dcp_sizes(model, tp)
        way_out = (f"sizes that work at TP {tp}: " + ", ".join(f"--dcp {d}" for d in sizes) if sizes else
                   f"no DCP size works at TP {tp}: raise --tp or leave --dcp out")
        raise RequestError(f"--dcp {dcp} (request field dcp) with --tp {tp}: {problem}; {way_out}")


def pcp_problem(request, model, target, ascend) -> str:
    """Why optkit does not plan the request's prefill context parallel size on ``target`` and vllm-ascend ``ascend``
    (a ``packaging`` Version); '' when it does (or PCP is off)."""
    from packaging.version import Version

    pcp = request.pcp or 1
    if pcp == 1:
        return ""
    if ascend >= Version(PCP_NEEDS_MODEL_RUNNER_V2):
        return (f"vllm-ascend {ascend} runs PCP only under ModelRunner V2 (VLLM_USE_V2_MODEL_RUNNER=1; "
                "vllm_ascend/platform.py refuses it otherwise: :1514 in 0.27.1rc1, :1643 in 0.30.0rc2), which optkit's "
                "recipes were not read on: plan it on a release below 0.27.1rc1, or use --dcp alone")
    if request.dp > 1:
        return (f"vllm-ascend {ascend} refuses PCP with DP above 1 (vllm_ascend/platform.py:351-358 in 0.23.0): "
                "give --dp 1, or leave --pcp out")
    if target.device_generation not in PCP_GENERATIONS:
        return (f"{target.id} is an {target.device_generation} target: vllm-ascend's context-parallel guide supports "
                "CP on Atlas A2 and A3 (0.23.0 docs/source/user_guide/feature_guide/context_parallel.md:22-25)")
    if model.gdn_layers:
        return (f"{model.id} has Gated DeltaNet layers: the guide's context parallelism is for MLA, GQA, SFA and DSA "
                "attention (context_parallel.md's table)")
    if request.pd is not None:
        return ("the guide runs PCP on PD prefill nodes only (context_parallel.md:94-103) and optkit gives both roles "
                "of --pd one shape: leave --pcp out of a --pd plan")
    return ""


def check_prefill_context_parallel(request, model, target, ascend) -> None:
    """Refuse a prefill context parallel size optkit does not plan (``pcp_problem``), naming the flag."""
    problem = pcp_problem(request, model, target, ascend)
    if problem:
        raise RequestError(f"--pcp {request.pcp} (request field pcp): {problem}")


__all__ = ["check_decode_context_parallel", "check_prefill_context_parallel", "dcp_problem", "dcp_sizes",
           "pcp_problem"]
