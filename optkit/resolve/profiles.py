"""Model and target profiles: the facts a plan is computed from (the pydantic schema).

A ``ModelProfile`` describes one checkpoint's architecture (layers, GDN/full-attention split,
MoE shape, MTP, vision tower); a ``Target`` describes one Ascend NPU generation (SoC names,
dies per card, devices per node). Both come from the YAML catalogs in ``models/`` and
``targets/`` (loaded by ``optkit.resolve.profile_catalog``, frozen into the records of
``optkit.resolve.profile_records``, where ``names()`` and ``facts()`` are); a model profile can
also be derived from a user's own Hugging Face ``config.json`` (``optkit.resolve.hf_config``).
``facts()`` turns either into the flat ``name -> value`` mapping that recipe conditions read.
"""

from __future__ import annotations

import re
import typing
from typing import Literal, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from optkit.resolve.profile_records import ModelProfileBehaviour, ModelProfileRecord, TargetBehaviour, TargetRecord

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
Name = typing.Annotated[str, StringConstraints(pattern=NAME_PATTERN)]

QUANTIZATIONS = ("bf16", "w8a8", "w8a8c8", "w8a8-mxfp8", "w4a8", "w4a8c8", "w4a4", "w4a4-mxfp4", "w8a8sc")
"""Weight formats a checkpoint is published in, as upstream's tutorials name them ("W8A8", "W4A8",
"W8A8C8": KV cache in int8 too; "mxfp": the A5 microscaling formats; "w8a8sc": sparse-compressed).
Every format but bf16 is served with ``--quantization ascend`` (msModelSlim's output)."""
Quantization = Literal["bf16", "w8a8", "w8a8c8", "w8a8-mxfp8", "w4a8", "w4a8c8", "w4a4", "w4a4-mxfp4", "w8a8sc"]


class Checkpoint(BaseModel):
    """One published checkpoint of a model (its weights in one format), as a tutorial's weight table lists it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    id: str = Field(min_length=1, description="What `vllm serve` loads: the repo id, e.g. 'Eco-Tech/Qwen3.5-397B-A17B-w8a8'.")
    quantization: Quantization = Field(description="Weight format: " + ", ".join(QUANTIZATIONS) + ".")
    source: str = Field(min_length=1, description="Where the checkpoint is named: a tutorial file:line of a release.")
    draft: Optional[Literal["dspark"]] = Field(
        None, description="Draft weights the checkpoint ships beside its own: 'dspark' (DeepSeek-V4's DSpark stages; "
        "its page says so, or its config declares dspark_block_size); null when none.")
    draft_source: str = Field("", description="Where the draft weights are stated (a tutorial file:line, or the config).")
    method: Literal["ascend", "mxfp8"] = Field(
        "ascend", description="What `--quantization` loads the checkpoint with: 'ascend' (msModelSlim weights, the "
        "default) or 'mxfp8' (a ModelOpt MXFP8 checkpoint, quant_method mxfp8: vllm-ascend registers it from "
        "0.27.1rc1, vllm_ascend/quantization/configs/modelopt_mxfp8_config.py:32 in 0.30.0rc2).")
    method_source: str = Field("", description="Where the page names that method (a tutorial file:line); required "
                                               "for any method but 'ascend'.")

    @model_validator(mode="after")
    def _method_cited(self):
        if self.method != "ascend" and not self.method_source:
            raise ValueError(f"checkpoint {self.id}: method {self.method!r} needs method_source, the page line that "
                             "names it")
        return self


class ModelProfile(ModelProfileBehaviour, BaseModel):
    """Architecture facts of one model checkpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    id: str = Field(pattern=NAME_PATTERN, description="Catalog id, lowercase, e.g. 'qwen3.5-35b-a3b'.")
    aliases: list[Name] = Field(default_factory=list, description="Other accepted names (lowercase).")
    hf_id: str = Field(
        default="", description="What `vllm serve` loads: the Hugging Face repo id (e.g. 'Qwen/Qwen3.5-35B-A3B') "
        "or, for a profile derived from config.json, the name given with --model-id or in the config.")
    hf_model_type: str = Field(description="Top-level `model_type` of config.json, e.g. 'qwen3_5_moe'.")
    text_model_type: str = Field(
        description="`model_type` of the language model (text_config); equals hf_model_type for text-only configs."
    )
    architecture: str = Field(description="First entry of config.json `architectures`.")
    family: str = Field(pattern=NAME_PATTERN, description="Recipe family: 'qwen3.5-moe', 'qwen3.6-dense', 'custom'.")
    num_layers: int = Field(gt=0, description="Decoder layers (`num_hidden_layers`), MTP layers excluded.")
    gdn_layers: int = Field(ge=0, description="Layers whose token mixer is Gated DeltaNet (`linear_attention`).")
    full_attention_layers: int = Field(ge=0, description="Layers with softmax full attention (`full_attention`).")
    kda_layers: int = Field(
        0, ge=0, description="Layers whose token mixer is Kimi Delta Attention (Kimi-Linear's "
        "`linear_attn_config.kda_layers`, Kimi-K3): a gated delta rule with its own recurrent state, not Gated DeltaNet.")
    hidden_size: int = Field(gt=0, description="Model (residual stream) width.")
    vocab_size: int = Field(gt=0, description="Vocabulary size (rows of the embedding / lm_head).")
    num_attention_heads: int = Field(gt=0, description="Query heads of the full-attention layers.")
    num_kv_heads: int = Field(gt=0, description="Key/value heads of the full-attention layers (GQA).")
    head_dim: int = Field(gt=0, description="Per-head dimension of the full-attention layers.")
    linear_key_heads: Optional[int] = Field(
        None, gt=0, description="Key heads of the Gated DeltaNet layers (`linear_num_key_heads`); null without them.")
    linear_value_heads: Optional[int] = Field(
        None, gt=0, description="Value heads of the Gated DeltaNet layers (`linear_num_value_heads`); null without them.")
    is_moe: bool = Field(description="True if the FFN is a routed mixture of experts.")
    num_experts: int = Field(ge=0, description="Routed experts per MoE layer; 0 for dense models.")
    experts_per_token: int = Field(ge=0, description="Routed experts each token activates (top-k); 0 for dense.")
    shared_experts: bool = Field(description="True if each MoE layer also has an always-on shared expert.")
    mtp_layers: Optional[int] = Field(
        ge=0, description="Multi-token-prediction layers the checkpoint ships, counted as vLLM counts them "
        "(`mtp_num_hidden_layers`, `num_nextn_predict_layers`); 0 if none; null if config.json cannot tell.")
    is_vl: bool = Field(description="Config carries `vision_config` (makes vllm-ascend's is_vl_model() True).")
    kv_lora_rank: Optional[int] = Field(
        None, gt=0, description="Multi-head latent attention: rank of the compressed KV (`kv_lora_rank`); null "
        "without MLA. The KV cache holds kv_lora_rank + qk_rope_head_dim values per token and layer.")
    qk_rope_head_dim: Optional[int] = Field(
        None, gt=0, description="Multi-head latent attention: rotary part of each head (`qk_rope_head_dim`); null without MLA.")
    index_head_dim: Optional[int] = Field(
        None, gt=0, description="DeepSeek sparse attention (DSA, DeepSeek-V3.2; V4's compressed layers): width of "
        "the lightning indexer's key (`index_head_dim`), cached per token and layer beside the attention KV; null "
        "without an indexer.")
    sliding_window: Optional[int] = Field(
        None, gt=0, description="Sliding-window attention span in tokens (`sliding_window`); null without one.")
    sliding_window_layers: int = Field(
        0, ge=0, description="Layers whose attention is the sliding window (`layer_types` 'sliding_attention').")
    intermediate_size: Optional[int] = Field(None, gt=0, description="Dense FFN width (`intermediate_size`).")
    moe_intermediate_size: Optional[int] = Field(None, gt=0, description="Width of one routed expert (`moe_intermediate_size`).")
    q_lora_rank: Optional[int] = Field(
        None, gt=0, description="A low-rank query projection's rank (`q_lora_rank`: hidden → rank → heads × head_dim, "
        "DeepSeek-V4's wq_a/wq_b); counted only where the attention is not MLA (kv_lora_rank null).")
    o_lora_rank: Optional[int] = Field(
        None, gt=0, description="A grouped low-rank output projection's rank (`o_lora_rank`, DeepSeek-V4's wo_a/wo_b).")
    o_groups: Optional[int] = Field(
        None, gt=0, description="The groups of that output projection (`o_groups`).")
    index_n_heads: Optional[int] = Field(
        None, gt=0, description="The sparse-attention indexer's heads (`index_n_heads`), beside `index_head_dim`.")
    dspark_block_size: Optional[int] = Field(
        None, gt=0, description="Tokens one DSpark round drafts (`dspark_block_size`): the config declares DeepSeek-V4's "
        "DSpark draft stages in the checkpoint; null when it declares none.")
    ngram_embedding_params: Optional[int] = Field(
        None, gt=0, description="Parameters of the n-gram embedding tables (Qwen4-Exp's PLE: `ple_layer_ids` layers "
        "of (`ngram_size` - 1) x `heads_per_ngram` heads, each about `ngram_vocab_size_base` rows of `ple_embed_dim` / "
        "heads wide): held in pinned host memory by default, not on the devices (vLLM 0.30.0 EngramConfig.cpu_offload, "
        "VLLM_PLE_CPU_OFFLOAD=1); null without such tables.")
    native_weights: Optional[Literal["fp8", "fp8-fp4"]] = Field(
        None, description="The format the published checkpoint's own weights are stored in when not bf16 "
        "(`quantization_config.quant_method` fp8; `expert_dtype` fp4: its routed experts in fp4, DeepSeek-V4's): "
        "weights served as published (no --quantization) are weighed in it; null for bf16 weights.")
    config_code: Optional[str] = Field(
        None, description="The checkpoint's own config class, as config.json's `auto_map.AutoConfig` names it "
        "(`configuration_internvl_chat.InternVLChatConfig`): code shipped with the weights, which vLLM runs only with "
        "--trust-remote-code, and without which it refuses a checkpoint whose `model_type` neither it nor transformers "
        "registers; the launch passes --trust-remote-code for such a checkpoint, as its tutorials do. Null when "
        "config.json names none.")
    moe_latent_size: Optional[int] = Field(
        None, gt=0, description="A latent MoE's expert input width (`routed_expert_hidden_size`: Kimi-K3's experts "
        "read a projection of the hidden state, not the hidden state); null when the experts read the hidden state.")
    shared_expert_intermediate_size: Optional[int] = Field(
        None, gt=0, description="Width of the shared expert(s) (`shared_expert_intermediate_size`, or "
        "`n_shared_experts` × `moe_intermediate_size`); null without shared experts.")
    first_dense_layers: int = Field(
        0, ge=0, description="Leading decoder layers with a dense FFN in a MoE model (`first_k_dense_replace`).")
    max_position_embeddings: Optional[int] = Field(
        None, gt=0, description="Longest context the config declares (`max_position_embeddings`).")
    tie_word_embeddings: bool = Field(False, description="lm_head shares the embedding's weights (`tie_word_embeddings`).")
    kv_compression_layers: dict[int, int] = Field(
        default_factory=dict, description="DeepSeek-V4 compressed attention: decoder layers per KV compression "
        "ratio (`compress_ratios`, its first num_hidden_layers entries), e.g. {0: 2, 4: 21, 128: 20}: a layer of "
        "ratio r keeps one head_dim-wide KV entry per r tokens beside its sliding window (0: the window only); "
        "empty without compressed attention.")
    dtype: str = Field(description="Checkpoint dtype (`torch_dtype`/`dtype`), e.g. 'bfloat16'; 'unknown' if unset.")
    source: Literal["catalog", "config.json"] = Field(
        default="catalog", description="Where the profile came from: the YAML catalog or a user's config.json."
    )
    sources: list[str] = Field(
        default_factory=list, description="Provenance of the numbers, one note each; uncertain ones say so."
    )
    params_b: Optional[float] = Field(
        None, gt=0, description="Total parameters in billions, as the model card states (catalog only; the "
        "weights' size for fit-before-launch). Null: unknown, counted from the architecture.")
    checkpoints: list[Checkpoint] = Field(
        default_factory=list, description="Published checkpoints per weight format, from the tutorials' weight tables "
        "(catalog only).")
    tutorials: list[str] = Field(
        default_factory=list, description="Upstream tutorial pages about this model (file names under "
        "docs/source/tutorials/models/, catalog only): the pages whose rules apply to it.")

    @field_validator("full_attention_layers")
    @classmethod
    def _layers_fit(cls, value: int, info: ValidationInfo) -> int:
        layers, gdn = info.data.get("num_layers"), info.data.get("gdn_layers")
        if layers is not None and gdn is not None and gdn + value > layers:
            raise ValueError(f"gdn_layers + full_attention_layers = {gdn + value} exceeds num_layers {layers}")
        return value

    @field_validator("kda_layers")
    @classmethod
    def _kda_fits(cls, value: int, info: ValidationInfo) -> int:
        return _within_layers(value, info, "KDA")

    @field_validator("sliding_window_layers")
    @classmethod
    def _sliding_fits(cls, value: int, info: ValidationInfo) -> int:
        return _within_layers(value, info, "sliding-window")

    @field_validator("kv_compression_layers")
    @classmethod
    def _compression_covers_layers(cls, value: dict[int, int], info: ValidationInfo) -> dict[int, int]:
        layers = info.data.get("num_layers")
        if value and layers is not None and sum(value.values()) != layers:
            raise ValueError(f"counts {sum(value.values())} layers but num_layers is {layers}")
        if any(ratio < 0 or count <= 0 for ratio, count in value.items()):
            raise ValueError("ratios must be >= 0 and counts > 0")
        return value

    @field_validator("num_experts")
    @classmethod
    def _experts_match_moe(cls, value: int, info: ValidationInfo) -> int:
        is_moe = info.data.get("is_moe")
        if is_moe is not None and is_moe != (value > 0):
            raise ValueError(f"must be > 0 exactly when is_moe is true (is_moe is {str(is_moe).lower()})")
        return value

    @field_validator("experts_per_token")
    @classmethod
    def _top_k_fits(cls, value: int, info: ValidationInfo) -> int:
        experts = info.data.get("num_experts")
        if experts is not None and value > experts:
            raise ValueError(f"exceeds num_experts ({experts})")
        return value

    @field_validator("shared_experts")
    @classmethod
    def _shared_needs_moe(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("is_moe") is False:
            raise ValueError("a shared expert needs is_moe: true")
        return value


def _within_layers(value: int, info: ValidationInfo, kind: str) -> int:
    """``value`` layers of ``kind`` fit beside the GDN and full-attention layers in num_layers."""
    layers = info.data.get("num_layers")
    counted = value + (info.data.get("gdn_layers") or 0) + (info.data.get("full_attention_layers") or 0)
    if layers is not None and counted > layers:
        raise ValueError(f"gdn + full-attention + {kind} layers = {counted} exceed num_layers {layers}")
    return value


class TargetVariant(BaseModel):
    """One named SKU of a target (same SoC family, different bin or clocks)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    id: str = Field(pattern=NAME_PATTERN, description="Variant id, lowercase, e.g. '752t'.")
    description: str = Field(description="What the variant is and where it is referenced.")
    hbm_gib_per_device: Optional[int] = Field(
        None, gt=0, description="HBM per device (die) in GiB where the variant differs from its target "
        "(Atlas 800I A2 32GB × 8 beside the 64GB × 8 node); None: the target's.")
    soc_version: Optional[str] = Field(
        None, description="SOC_VERSION of the variant where it differs from the target's default (one of the "
        "target's soc_versions; 950PR: ascend950pr_9599); None: the target's default_soc_version.")


class Interconnect(BaseModel):
    """How a target's NPU devices talk to each other, as upstream's pages name the links."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    within_node: Literal["hccs", "ub", "pcie"] = Field(
        description="Link between the devices of one node: 'hccs' (Huawei Cache Coherence System), 'ub' "
        "(the 950's UnifiedBus, 'Device UB'), 'pcie' (cards that only meet over the host's PCIe).")
    across_nodes: Literal["hccs", "roce", "ub", "unknown"] = Field(
        description="Link between nodes: 'hccs' (A3 SuperPoD fabric), 'roce' (RDMA over Ethernet), 'ub', or "
        "'unknown' when no page runs the target on more than one node.")


class TargetSource(BaseModel):
    """Where one fact of a target file is read: a line of an upstream tree, or a public page."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    facts: list[str] = Field(min_length=1, description="The target fields it supports, dotted for nested "
                             "ones (e.g. 'hbm_gib_per_device', 'interconnect.within_node', 'variants.32g').")
    release: str = Field("", description="vllm-ascend release whose tree holds ``where`` ('' for a public page).")
    where: str = Field(min_length=1, description="'path:line' in that tree, or the page's URL.")
    quote: str = Field(min_length=1, description="Words found on that line (or page), as written there.")


class Target(TargetBehaviour, BaseModel):
    """One Ascend NPU generation that plans are made for."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # see catalog.schema._Strict

    id: str = Field(pattern=NAME_PATTERN, description="Target id, lowercase, e.g. '910c'.")
    aliases: list[Name] = Field(default_factory=list, description="Other accepted names (lowercase).")
    title: str = Field(description="Human-readable name of the hardware.")
    soc_family: str = Field(description="SoC family used by build_aclnn.sh, e.g. 'ascend910_93'.")
    soc_versions: list[str] = Field(min_length=1, description="Full SoC names valid as SOC_VERSION for builds.")
    default_soc_version: str = Field(description="SOC_VERSION to build with when none is detected.")
    dies_per_card: int = Field(gt=0, description="NPU dies (devices seen by torch_npu) per physical card.")
    devices_per_node: int = Field(gt=0, description="NPU devices (dies) in one standard server node.")
    variants: list[TargetVariant] = Field(default_factory=list, description="Named SKUs of this target.")
    device_generation: Literal["A2", "A3", "A5", "310P"] = Field(
        description="vllm-ascend device type: 'A2' (910B), 'A3' (910C), 'A5' (950), '310P' (Atlas 300I DUO).")
    hbm_gib_per_device: int = Field(gt=0, description="HBM per device (die) in GiB (a variant may differ).")
    interconnect: Interconnect = Field(description="Links within a node and across nodes.")
    sources: list[TargetSource] = Field(min_length=1, description="Where each fact of this file is read.")
    npu_smi_name_pattern: str = Field(description="Regex searched in `npu-smi info` chip names to detect the target.")
    serving_dtypes: list[Literal["bfloat16", "float16", "float32"]] | None = Field(
        None, min_length=1, description="The dtypes the SoC serves, where it serves fewer than vLLM offers, the default "
        "first ('float16' alone on Atlas 300I DUO); unset: all of them, bfloat16 by default. A target that sets it "
        "cites where it is read.")

    @field_validator("npu_smi_name_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @field_validator("default_soc_version")
    @classmethod
    def _default_is_listed(cls, value: str, info: ValidationInfo) -> str:
        listed = info.data.get("soc_versions")
        if listed is not None and value not in listed:
            raise ValueError(f"{value!r} is not one of soc_versions")
        return value

    @field_validator("variants")
    @classmethod
    def _unique_variants(cls, value: list[TargetVariant]) -> list[TargetVariant]:
        ids = [v.id for v in value]
        if len(ids) != len(set(ids)):
            raise ValueError("variant ids must be unique")
        return value


    @model_validator(mode="after")
    def _every_fact_sourced(self) -> "Target":
        overridden = [f"variants.{v.id}" for v in self.variants
                      if v.hbm_gib_per_device is not None or v.soc_version is not None]
        strays = [v.soc_version for v in self.variants if v.soc_version not in (None, *self.soc_versions)]
        if strays:
            raise ValueError(f"variant soc_version {strays[0]!r} is not one of soc_versions")
        known = set(SOURCED_TARGET_FACTS) | {f"variants.{v.id}" for v in self.variants} | {"serving_dtypes"}
        named = {fact for source in self.sources for fact in source.facts}
        unknown = sorted(named - known)
        if unknown:
            raise ValueError(f"sources name {', '.join(map(repr, unknown))}, not a target fact "
                             f"(known: {', '.join(sorted(known))})")
        narrowed = ["serving_dtypes"] if self.serving_dtypes is not None else []
        missing = [fact for fact in [*SOURCED_TARGET_FACTS, *overridden, *narrowed] if fact not in named]
        if missing:
            raise ValueError(f"no entry of sources cites {', '.join(missing)}: add where each is read")
        return self


SOURCED_TARGET_FACTS = ("soc_family", "soc_versions", "default_soc_version", "dies_per_card", "devices_per_node",
                        "device_generation", "hbm_gib_per_device", "interconnect.within_node",
                        "interconnect.across_nodes")
"""The target fields every target file must cite a source for (a variant that overrides one: ``variants.<id>``)."""


# The record class each model is frozen into (``optkit.catalog.frozen``); TargetVariant becomes a plain record.
RECORDS = {ModelProfile: ModelProfileRecord, Target: TargetRecord}
