"""Whether a model's weights split over the request's TP × DP ranks, as vLLM splits them.

A TP size or an expert-parallel group the model cannot be split over makes ``vllm serve`` fail at
start-up; a plan for it would be a bundle that cannot start, so it is refused here, naming the
model's sizes and the sizes that work. The rules, as vLLM 0.23.0 enforces them:

- attention heads: ``num_attention_heads % tp == 0`` (``ModelConfig.verify_with_parallel_config``);
- KV heads: split when ``num_kv_heads % tp == 0``, replicated when ``tp % num_kv_heads == 0``
  (``Qwen3NextAttention``: either holds, or the layer asserts);
- Gated DeltaNet heads: ``linear_num_key_heads`` and ``linear_num_value_heads`` both divisible by
  tp (``QwenGatedDeltaNetAttention``: ``num_k_heads // tp`` groups, ``divide(num_v_heads, tp)``);
- routed experts with expert parallelism: divisible by the EP size, TP × DP.
"""

from __future__ import annotations

from math import gcd

from optkit.errors import RequestError


def _name(model) -> str:
    """The model as people write it: the last part of its Hugging Face id, else its catalog id."""
    return (model.hf_id or model.id).rstrip("/").split("/")[-1]


def _gdn_heads(model) -> tuple[int, int] | None:
    """(key heads, value heads) of the Gated DeltaNet layers, or None if the profile has none."""
    if model.gdn_layers and model.linear_key_heads and model.linear_value_heads:
        return model.linear_key_heads, model.linear_value_heads
    return None


def tp_fits(model, tp: int) -> bool:
    """Whether every attention layer of ``model`` splits over ``tp`` ranks."""
    kv = model.num_kv_heads
    heads_ok = model.num_attention_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)
    gdn = _gdn_heads(model)
    return heads_ok and (gdn is None or (gdn[0] % tp == 0 and gdn[1] % tp == 0))


def tp_sizes(model) -> list[int]:
    """Every TP size the model's attention layers split over (all divide the attention heads)."""
    return [tp for tp in range(1, model.num_attention_heads + 1) if tp_fits(model, tp)]


def _tp_message(model, tp: int) -> str:
    sizes = tp_sizes(model)
    gdn = _gdn_heads(model)
    has = f"{model.num_attention_heads} attention heads and {model.num_kv_heads} KV heads"
    if gdn is not None:
        has += f", and {gdn[0]} key and {gdn[1]} value heads in its Gated DeltaNet layers"
    common = gcd(model.num_attention_heads, *(gdn or ()))
    rule = f"--tp must divide {common}"
    if len(sizes) != sum(1 for n in range(1, common + 1) if common % n == 0):  # the KV heads rule out some
        rule += f" and divide, or be a multiple of, the {model.num_kv_heads} KV heads"
    return f"--tp {tp} (request field tp): {_name(model)} has {has}; {rule}: {', '.join(map(str, sizes))}"


def _ep_message(model, tp: int, dp: int, pcp: int = 1) -> str:
    group = tp * pcp
    dps = [d for d in range(1, model.num_experts + 1) if model.num_experts % (group * d) == 0]
    with_ = f"--tp {tp}" + (f" --pcp {pcp}" if pcp > 1 else "")
    way_out = f"with {with_}, --dp {', '.join(map(str, dps))} work" if dps else f"no --dp works with {with_}"
    flags, fields, ranks = ((f"--tp {tp} × --pcp {pcp} × --dp {dp}", "tp, pcp, dp", "TP × PCP × DP") if pcp > 1
                            else (f"--tp {tp} × --dp {dp}", "tp, dp", "TP × DP"))
    return (f"{flags} (request fields {fields}) with expert parallelism: {_name(model)} has "
            f"{model.num_experts} routed experts, which the {group * dp} EP ranks ({ranks}) must split evenly; "
            f"{way_out}, or turn expert parallelism off (--no-ep, ep: false)")


def check_sharding(model, tp: int, dp: int, ep: bool, pcp: int = 1) -> None:
    """Refuse a TP size, or with expert parallelism a TP × PCP × DP (vLLM's EP group spans the TP, PCP and DP ranks:
    vllm/config/parallel.py:536-537 in 0.30.0), that ``model`` cannot be split over (``RequestError`` naming the
    flags, the model's sizes and the sizes that work)."""
    if not tp_fits(model, tp):
        raise RequestError(_tp_message(model, tp))
    if ep and model.is_moe and model.num_experts % (tp * pcp * dp):
        raise RequestError(_ep_message(model, tp, dp, pcp))


__all__ = ["check_sharding", "tp_fits", "tp_sizes"]
