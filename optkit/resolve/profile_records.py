"""The record classes of model and target profiles, and the behaviour they share with the models.

``optkit.resolve.profiles`` validates (pydantic); ``freeze`` (``optkit.catalog.frozen``) turns a
validated profile into one of these. Each behaviour is a mixin that the pydantic model and its
record class both inherit, so ``names`` and ``facts`` are written once.
"""

from __future__ import annotations

from optkit.catalog.frozen import Record
from optkit.errors import UnknownName


class ModelProfileBehaviour:
    """What a model profile answers: its names and the model facts conditions read."""

    __slots__ = ()

    def names(self) -> list[str]:
        """The id and every alias."""
        return [self.id, *self.aliases]

    def facts(self) -> dict[str, object]:
        """The model facts recipe conditions may read, keyed by fact name."""
        return {
            "model.id": self.id,
            "model.family": self.family,
            "model.hf_model_type": self.hf_model_type,
            "model.text_model_type": self.text_model_type,
            "model.architecture": self.architecture,
            "model.num_layers": self.num_layers,
            "model.gdn_layers": self.gdn_layers,
            "model.full_attention_layers": self.full_attention_layers,
            "model.hidden_size": self.hidden_size,
            "model.vocab_size": self.vocab_size,
            "model.is_moe": self.is_moe,
            "model.num_experts": self.num_experts,
            "model.moe.shared_experts": self.shared_experts,
            "model.mtp_head": mtp_head(self.mtp_layers),
            "model.is_vl": self.is_vl,
            "model.remote_code": self.config_code is not None,
            "model.dtype": self.dtype,
            "model.attention": attention_kind(self),
        }


def attention_kind(profile) -> str:
    """The ``model.attention`` fact: how the model's attention layers keep their KV cache.

    'gdn-hybrid': Gated DeltaNet layers beside full attention (Qwen3.5/3.6, Qwen3-Next); 'kda-hybrid': Kimi
    Delta Attention layers beside (MLA) full attention (Kimi-K3); 'csa-hybrid':
    DeepSeek-V4's sliding window plus compressed KV (``kv_compression_layers``; vLLM 0.30.0 runs it as MLA
    with head_dim-wide entries); 'mla': multi-head latent attention (``kv_lora_rank``: DeepSeek-V3.x,
    Kimi-K2.x); 'sliding-hybrid': sliding-window layers beside full attention; 'gqa': full attention
    with key/value heads (MHA and MQA included). The values are the fact's choices in
    ``optkit.catalog.factspec``.
    """
    if profile.gdn_layers:
        return "gdn-hybrid"
    if profile.kda_layers:
        return "kda-hybrid"
    if profile.kv_compression_layers:
        return "csa-hybrid"
    if profile.kv_lora_rank:
        return "mla"
    return "sliding-hybrid" if profile.sliding_window_layers else "gqa"


def mtp_head(mtp_layers: int | None) -> str:
    """The ``model.mtp_head`` fact: 'present', 'absent', or 'unknown' (config.json cannot tell)."""
    if mtp_layers is None:
        return "unknown"
    return "present" if mtp_layers > 0 else "absent"


class TargetBehaviour:
    """What a target answers: its names, its variants and the target facts conditions read."""

    __slots__ = ()

    def names(self) -> list[str]:
        """The id and every alias."""
        return [self.id, *self.aliases]

    def variant(self, name: str):
        """The variant called ``name`` (case-insensitive); ``UnknownName`` otherwise."""
        for variant in self.variants:
            if variant.id == name.lower():
                return variant
        raise UnknownName(f"variant of target {self.id}", name, [v.id for v in self.variants])

    def hbm_gib(self, variant: str | None = None) -> int:
        """HBM per device (die) in GiB on ``variant`` (the target's own figure when the variant has none)."""
        override = self.variant(variant).hbm_gib_per_device if variant else None
        return self.hbm_gib_per_device if override is None else override

    def soc_version(self, variant: str | None = None) -> str:
        """SOC_VERSION to build with on ``variant`` (the target's default when the variant names none)."""
        override = self.variant(variant).soc_version if variant else None
        return self.default_soc_version if override is None else override

    def serving_dtype(self, asked: str | None) -> str:
        """The dtype a plan serves on this target: ``asked`` (``--dtype``) where the SoC serves it, else a
        ``RequestError`` naming the dtypes it serves and where that is read; unasked, the first it serves
        (bfloat16 where the target names none: every dtype vLLM offers)."""
        from optkit.errors import RequestError

        served = list(self.serving_dtypes or ("bfloat16", "float16", "float32"))
        if asked is None:
            return served[0]
        if asked not in served:
            source = next((s for s in self.sources if "serving_dtypes" in s.facts), None)
            said = f" ({source.release} {source.where}: \"{source.quote}\")" if source else ""
            raise RequestError(f"--dtype {asked}: {self.title} serves {' and '.join(served)} only{said}; pass "
                               f"--dtype {served[0]}, or leave --dtype out")
        return asked

    def facts(self, variant: str | None = None) -> dict[str, object]:
        """The target facts recipe conditions may read; ``target.variant`` is '' if not given."""
        return {
            "target.id": self.id,
            "target.soc_family": self.soc_family,
            "target.soc_version": self.soc_version(variant),
            "target.generation": self.device_generation,
            "target.dies_per_card": self.dies_per_card,
            "target.devices_per_node": self.devices_per_node,
            "target.variant": self.variant(variant).id if variant else "",
            "target.hbm_gib_per_device": self.hbm_gib(variant),
            "target.interconnect.within_node": self.interconnect.within_node,
            "target.interconnect.across_nodes": self.interconnect.across_nodes,
        }


class ModelProfileRecord(ModelProfileBehaviour, Record):
    """A validated model profile (``optkit.resolve.profiles.ModelProfile``)."""

    __slots__ = ()


class TargetRecord(TargetBehaviour, Record):
    """A validated target (``optkit.resolve.profiles.Target``)."""

    __slots__ = ()
