"""The layer kinds of a config.json's language model, as vLLM reads them: Gated DeltaNet vs full attention
(``layer_types`` or ``full_attention_interval``), Kimi Delta Attention vs full attention (Kimi-Linear's
``linear_attn_config``, GLM-5.3-Flash's ``layer_types``). A mixin of ``optkit.resolve.hf_config``'s reader,
read through its ``lm``, ``keys``, ``integer``, ``value``, ``_path``, ``_bad`` and ``_line``."""

from __future__ import annotations

from typing import Any

from optkit.errors import Location, Problem

LAYER_TYPES_KDA = ("glm5_next",)
"""Top-level ``model_type`` whose Kimi Delta Attention layers vLLM reads from ``layer_types`` (not from
``linear_attn_config``'s 1-based lists, as for Kimi-Linear)."""


class LayerKinds:
    """The layer-kind counts of ``optkit.resolve.hf_config``'s reader (``_layer_split``)."""

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


def shown(value: Any) -> str:
    """A value for a message, shortened (a 5000-digit integer is not repeated in full)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["LayerKinds", "LAYER_TYPES_KDA", "shown"]
