"""Which catalog models are kin to a model without a page of its own: the nearest pages by architecture.

A model with no tutorial page gets the nearest page's rules, labelled as optkit's generalization with its source
(``optkit.resolve.page_rules``); ``nearest_models`` orders the candidates, ``kinship`` says why one is kin.
"""

from __future__ import annotations


def nearest_models(model, catalog_models) -> list:
    """Catalog models with a page, nearest to ``model`` by architecture first: the same ``model_type`` (family),
    else the same attention kind and MoE shape; nearer expert counts and widths before farther; none of another
    kind."""
    def kin(other) -> int | None:
        if other.hf_model_type == model.hf_model_type:
            return 0
        if _attention(other) == _attention(model) and _moe(other) == _moe(model):
            return 1
        return None

    near = [m for m in catalog_models if m.tutorials and m.id != model.id and kin(m) is not None]
    return sorted(near, key=lambda m: (kin(m), abs(m.num_experts - model.num_experts),
                                       abs(m.hidden_size - model.hidden_size), m.id))


def _attention(model) -> str:
    if getattr(model, "kv_lora_rank", None):
        return "MLA"
    if model.gdn_layers:
        return "GDN hybrid"
    return "sliding window" if getattr(model, "sliding_window", None) else "full attention"


def _moe(model) -> tuple:
    return (model.is_moe, model.is_moe and model.shared_experts)


def kinship(model, near) -> str:
    """Why ``near`` is kin to ``model``, as a generalization's label says it."""
    if near.hf_model_type == model.hf_model_type:
        return f"the same model_type, {model.hf_model_type}"
    shape = "MoE with shared experts" if model.shared_experts else ("MoE" if model.is_moe else "dense")
    return f"the same attention ({_attention(model)}) and shape ({shape})"


__all__ = ["kinship", "nearest_models"]
