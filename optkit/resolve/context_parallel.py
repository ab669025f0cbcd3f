"""Whether a decode context parallel size splits the model's KV cache as vLLM splits it.

Decode context parallelism (DCP, ``--decode-context-parallel-size``) reuses the TP ranks: the KV cache of a
sequence is split over ``dcp`` of them instead of being duplicated (vllm-ascend 0.30.0rc2
docs/source/user_guide/feature_guide/context_parallel.md, "DCP reuses the TP devices and does not increase
the world size"). A size vLLM refuses makes ``vllm serve`` fail at start-up, so it is refused here, naming the
sizes that work. The rules, as vLLM 0.30.0 enforces them and the guide states them (its "Constraints"):

- MLA: ``tp % dcp == 0`` (vllm/config/parallel.py, "tp_size=… must be divisible by dcp_size=…");
- GQA: ``tp > num_kv_heads``, ``dcp <= tp // num_kv_heads`` and ``(tp // num_kv_heads) % dcp == 0``, and the
  query heads per KV head divisible by dcp (vllm/config/model.py, ``verify_with_parallel_config``).

Prefill context parallelism (PCP) is not planned: it multiplies the world size (TP × PCP ranks per DP group,
the guide's "world_size_with_pcp"), which optkit's layouts do not place, and needs ModelRunner V2.
"""

from __future__ import annotations

from optkit.errors import RequestError


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


__all__ = ["check_decode_context_parallel", "dcp_problem", "dcp_sizes"]
