"""What each layer of a config.json's language model is, as vLLM reads it: its attention kind (Gated DeltaNet vs
full attention from ``layer_types`` or ``full_attention_interval``; Kimi Delta Attention vs full attention from
Kimi-Linear's ``linear_attn_config`` or GLM-5.3-Flash's ``layer_types``) and its feed-forward (the MoE shape, the
dense, expert and shared-expert widths, the leading dense layers). A mixin of ``optkit.resolve.hf_config``'s
reader, read through its ``lm``, ``keys``, ``integer``, ``value``, ``_path``, ``_bad`` and ``_line``."""

from __future__ import annotations

from typing import Any

from optkit.errors import Location, Problem

LAYER_TYPES_KDA = ("glm5_next",)
"""Top-level ``model_type`` whose Kimi Delta Attention layers vLLM reads from ``layer_types`` (not from
``linear_attn_config``'s 1-based lists, as for Kimi-Linear)."""


class LayerShapes:
    """The layer kinds (``_layer_split``) and feed-forward shapes (``_moe``, ``_ffn_widths``) of
    ``optkit.resolve.hf_config``'s reader."""

    def _layer_split(self, num_layers: int) -> dict[str, int]:
        """GDN vs full-attention layer counts from ``layer_types`` or ``full_attention_interval``; Kimi
        Delta Attention vs full-attention layers from Kimi-Linear's ``linear_attn_config``."""
        if isinstance(self.lm.get("linear_attn_config"), dict):
            if self.value("model_type", top=True)[1] in LAYER_TYPES_KDA:
                return self._kda_by_layer_types(num_layers)
            return self._kda_split(num_layers)
        layer_types = self.lm.get("layer_types")
        if isinstance(layer_types, list):
            self.keys["gdn_layers"] = self.keys["full_attention_layers"] = self._path("layer_types")
            if num_layers and len(layer_types) != num_layers:
                message = f"has {len(layer_types)} entries but num_hidden_layers is {num_layers}"
                self._bad("layer_types", message)
            return {
                "gdn_layers": layer_types.count("linear_attention"),
                "full_attention_layers": layer_types.count("full_attention"),
            }
        interval = self.integer("full_attention_interval", default=0)
        full = num_layers // interval if interval > 0 else num_layers
        return {"gdn_layers": num_layers - full, "full_attention_layers": full}

    def _kda_by_layer_types(self, num_layers: int) -> dict[str, int]:
        """GLM-5.3-Flash (glm5_next): a Kimi Delta Attention layer is a ``layer_types`` entry 'linear_attention',
        every other entry a full-attention layer (vLLM 0.30.0 transformers_utils/configs/glm5_next.py is_kda_layer;
        its linear_attn_config lists number the layers from 0)."""
        layer_types = self.lm.get("layer_types")
        self.keys["kda_layers"] = self.keys["full_attention_layers"] = self._path("layer_types")
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            self._bad("layer_types", f"must list the kind of each of the {num_layers} layers "
                                     f"(got {shown(layer_types)})")
            return {"gdn_layers": 0, "kda_layers": 0, "full_attention_layers": num_layers}
        kda = layer_types.count("linear_attention")
        return {"gdn_layers": 0, "kda_layers": kda, "full_attention_layers": num_layers - kda}

    def _kda_split(self, num_layers: int) -> dict[str, int]:
        """Kimi-Linear (Kimi-K3): ``linear_attn_config.kda_layers`` and ``full_attn_layers`` list the
        layers, numbered from 1 (vLLM 0.30.0 transformers_utils/configs/kimi_linear.py is_kda_layer)."""
        config, counts = self.lm["linear_attn_config"], {}
        for key, field in (("kda_layers", "kda_layers"), ("full_attn_layers", "full_attention_layers")):
            path = f"{self._path('linear_attn_config')}.{key}"
            self.keys[field] = path
            layers = config.get(key)
            if not isinstance(layers, list) or not all(
                    type(n) is int and 1 <= n <= max(num_layers, 1) for n in layers):
                message = f"must be a list of layer numbers from 1 to {num_layers} (got {shown(layers)})"
                self.problems.append(Problem(Location(self.file, self._line(*path.split(".")), path), message))
                layers = []
            counts[field] = len(set(layers))
        return {"gdn_layers": 0, **counts}


    def _moe(self) -> dict[str, Any]:
        experts = self.integer("num_experts", "num_local_experts", "n_routed_experts", default=0,
                               field="num_experts", limits="experts")
        if experts <= 0:
            return {"is_moe": False, "num_experts": 0, "experts_per_token": 0, "shared_experts": False}
        shared_width = self.integer("shared_expert_intermediate_size", default=0)
        # Kimi-Linear (Kimi-K3) spells these num_shared_experts and num_experts_per_token
        shared = shared_width > 0 or self.integer("n_shared_experts", "num_shared_experts", default=0,
                                                  limits="n_shared_experts") > 0
        return {
            "is_moe": True,
            "num_experts": experts,
            "experts_per_token": self.integer("num_experts_per_tok", "num_experts_per_token", field="experts_per_token",
                                              limits="num_experts_per_tok"),
            "shared_experts": shared,
        }

    def _ffn_widths(self, fields: dict[str, Any], optional) -> tuple[int | None, int | None, int | None]:
        """(dense FFN, one routed expert, the shared experts) widths, None where the model has no such part.

        A MoE config without ``moe_intermediate_size`` writes one expert's width as ``intermediate_size``
        (Mixtral, gpt-oss, MiniMax-M2/M3) and a dense FFN's, if it has dense layers, as
        ``dense_intermediate_size`` (MiniMax-M3); the shared experts' width is
        ``shared_expert_intermediate_size`` (MiniMax-M3: ``shared_intermediate_size``), else
        ``n_shared_experts`` × the expert width."""
        dense_width = optional("intermediate_size", "intermediate_size")
        if not fields.get("is_moe"):
            return dense_width, None, None
        moe_width = optional("moe_intermediate_size", "moe_intermediate_size")
        if moe_width is None and dense_width:
            self.keys["moe_intermediate_size"] = self.keys["intermediate_size"]
            moe_width, dense_width = dense_width, optional("dense_intermediate_size", "intermediate_size")
        if not fields.get("shared_experts"):
            return dense_width, moe_width, None
        shared_width = self.integer("shared_expert_intermediate_size", "shared_intermediate_size", default=0) or None
        if shared_width is None and moe_width:
            shared_width = self.integer("n_shared_experts", default=0) * moe_width or None
        return dense_width, moe_width, shared_width

    def _first_dense_layers(self) -> int:
        """Leading dense-FFN layers of a MoE model: ``first_k_dense_replace``, else the leading dense
        entries of a per-layer list: ``mlp_layer_types`` ``"dense"`` (GLM-5, Hy4) or ``moe_layer_freq`` 0
        (MiniMax-M3; DeepSeek's integer ``moe_layer_freq`` is a stride, not read here)."""
        if self.value("first_k_dense_replace")[1] is None:
            for key, dense in (("mlp_layer_types", "dense"), ("moe_layer_freq", 0)):
                kinds = self.lm.get(key)
                if isinstance(kinds, list):
                    self.keys["first_dense_layers"] = self._path(key)
                    return next((i for i, kind in enumerate(kinds) if kind != dense), len(kinds))
        return self.integer("first_k_dense_replace", default=0, field="first_dense_layers")


def shown(value: Any) -> str:
    """A value for a message, shortened (a 5000-digit integer is not repeated in full)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["LayerShapes", "LAYER_TYPES_KDA", "shown"]
