"""How many parameters a model profile has, where they sit, and what they weigh on one device.

The count follows the module shapes of vLLM 0.30.0 (``vllm/model_executor/models``), per part:

- embeddings and lm_head: ``vocab × hidden`` each, lm_head only unless ``tie_word_embeddings``
  (``VocabParallelEmbedding`` / ``ParallelLMHead``: split over TP);
- softmax attention (full and sliding-window layers): q ``hidden × heads × head_dim`` (twice that with the
  output gate of ``qwen3_next.py``/``qwen3_5.py``, ``attn_output_gate``, default true there), k and v
  ``hidden × kv_heads × head_dim`` each, o ``heads × head_dim × hidden``;
- Gated DeltaNet (``qwen3_next.py`` ``Qwen3NextGatedDeltaNet``): in_proj_qkvz ``hidden × (2·K + 2·V)``,
  in_proj_ba ``hidden × 2·Hv``, out_proj ``V × hidden`` (K, V: key/value heads × 128, the head dims of
  ``transformers_utils/configs/qwen3_5_moe.py``, ``linear_key_head_dim``/``linear_value_head_dim``), conv1d
  ``(2·K + V) × 4`` (``linear_conv_kernel_dim``), A_log and dt_bias ``Hv``;
- FFN: dense ``3 × hidden × intermediate_size`` (gate, up, down); routed experts ``num_experts × 3 × hidden
  × moe_intermediate_size`` (``moe_latent_size`` in place of hidden for a latent MoE, whose experts read a
  projection of the stream, plus that projection and its way back, ``2 × hidden × moe_latent_size``); shared expert ``3 × hidden × shared_expert_intermediate_size`` plus its gate;
  router ``hidden × num_experts``;
- MTP layers: one decoder layer each (full attention and the FFN of the model) plus ``fc`` ``2·hidden × hidden``
  (``qwen3_5_mtp.py``);
- multi-head latent attention (``deepseek_v2.py``) needs ``q_lora_rank``, ``qk_nope_head_dim`` and
  ``v_head_dim``, which profiles do not carry: an MLA model is weighed from its ``params_b`` instead, said so;
  without ``params_b``, from everything but its attention (``count_without_attention``): a lower bound, said so.

A vision tower is not counted: its size is ``params_b`` minus the text count (catalog profiles only), and
without ``params_b`` it is left out, said so.

Bytes per parameter by weight format (``QUANTIZATIONS``): msModelSlim checkpoints quantize the decoder's
linear layers and keep embeddings, lm_head, norms, the router and the Gated DeltaNet conv/decay parameters
in bf16 (vllm-ascend 0.30.0rc2 ``vllm_ascend/quantization/methods/w8a8/w8a8_static.py``: int8 ``weight`` of
``output × input``; the other parameters of a layer are per-output-channel scales and offsets, a few bytes a
row, left out here: under 0.5 % of a layer 2048 wide). W4A8 packs the experts' weights two to a byte
(``w4a8/w4a8.py``: int8 ``[moe_intermediate_size // 2, hidden]``) and keeps the other linear layers W8A8;
the mx formats carry one 8-bit scale per 32 values (OCP microscaling).
"""

from __future__ import annotations

from optkit.value import valueclass

GDN_HEAD_DIM = 128
"""Key and value head dimension of the Gated DeltaNet layers (vLLM 0.30.0 Qwen3.5 configs' default, the value of
every Qwen3.5/3.6 checkpoint); profiles carry the head counts only."""
GDN_CONV_KERNEL = 4
"""``linear_conv_kernel_dim`` of the same configs."""
GATED_ATTENTION_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_moe")
"""Model types whose full-attention q projection also produces the output gate (``attn_output_gate``)."""

LINEAR_BYTES = {"bf16": 2.0, "w8a8": 1.0, "w8a8c8": 1.0, "w8a8sc": 1.0, "w8a8-mxfp8": 1 + 1 / 32,
                "w4a8": 1.0, "w4a8c8": 1.0, "w4a4": 0.5, "w4a4-mxfp4": 0.5 + 1 / 32, "fp8": 1.0, "fp8-fp4": 1.0}
"""Bytes per parameter of the decoder's linear layers other than experts, per weight format (w8a8sc, sparse
-compressed, is weighed as plain int8: an upper bound; ``NATIVE_FORMATS`` fp8 with its 128 × 128 block scales, a
4-byte scale per 16384 values, not counted)."""
EXPERT_BYTES = {**LINEAR_BYTES, "w4a8": 0.5, "w4a8c8": 0.5, "fp8-fp4": 0.5 + 1 / 32}
"""Bytes per parameter of the routed experts' linear layers: W4A8 packs them two to a byte, and so does a
published checkpoint's fp4 (``fp8-fp4``: DeepSeek-V4's experts, one e8m0 scale per 32 values)."""
NATIVE_FORMATS = ("fp8", "fp8-fp4")
"""The formats a published checkpoint stores its own weights in (``ModelProfile.native_weights``; a test holds the
profile's choices to these): fp8 linear layers, and fp8 with fp4 routed experts."""
NATIVE_GENERATIONS = ("A5",)
"""Where a checkpoint's own fp8/fp4 weights are served as published: the A5 (Ascend 950) tabs ("The original
DeepSeek-V4-Flash weights used on Ascend 950DT do not require this option", DeepSeek-V4-Flash.md:327 in 0.23.0).
The A2/A3 tabs serve such models as msModelSlim W8A8/W4A8 checkpoints; bf16 there is a bf16 copy."""
FLOAT_BYTES = 2.0
"""Embeddings, lm_head, norms, router, conv/decay parameters: bf16 in every format."""


@valueclass(frozen=True)
class ParameterCount:
    """A model's parameters by where they sit on the devices."""

    embedding: int  # embeddings and lm_head: split over TP, bf16
    attention: int  # linear layers of attention and Gated DeltaNet: split over TP (KV heads up to their count)
    kv_projection: int  # the part of ``attention`` that is k/v projections: replicated beyond kv_heads ranks
    dense_ffn: int  # dense FFN and shared experts: split over TP
    experts: int  # routed experts: split over the EP group, else over TP
    small_float: int  # router, norms, GDN conv and decay: bf16, replicated (negligible)
    vision: int  # the vision tower (params_b minus the text count; 0 when unknown)
    note: str = ""  # what was estimated rather than counted

    @property
    def text(self) -> int:
        return (self.embedding + self.attention + self.dense_ffn + self.experts + self.small_float)

    @property
    def total(self) -> int:
        return self.text + self.vision


def _attention_layer(m) -> tuple[int, int]:
    """(all linear parameters, the k/v part) of one softmax-attention layer; DeepSeek-V4's low-rank form where the
    profile gives its ranks (vLLM 0.30.0 ``models/deepseek_v4/attention.py``: ``fused_wqa_wkv`` hidden →
    q_lora_rank + head_dim, one KV head serving as K and V; ``wq_b`` q_lora_rank → heads × head_dim; ``wo_a``
    heads × head_dim / o_groups → o_groups × o_lora_rank; ``wo_b`` o_groups × o_lora_rank → hidden; the indexer's
    ``wq_b`` q_lora_rank → index heads × index_head_dim and ``weights_proj`` hidden → index heads; the KV
    compressors' small projections are not counted)."""
    gate = 2 if m.text_model_type.removesuffix("_text") in GATED_ATTENTION_TYPES else 1
    heads, head_dim, hidden = m.num_attention_heads, m.head_dim, m.hidden_size
    q_lora, o_lora, groups = (getattr(m, f, None) for f in ("q_lora_rank", "o_lora_rank", "o_groups"))
    q = hidden * q_lora + q_lora * heads * head_dim * gate if q_lora else hidden * heads * head_dim * gate
    latent = bool(q_lora and o_lora)  # V4: the one KV head is both K and V
    kv = (1 if latent else 2) * hidden * m.num_kv_heads * head_dim
    o = heads * head_dim * o_lora + groups * o_lora * hidden if o_lora and groups else heads * head_dim * hidden
    index_heads = getattr(m, "index_n_heads", None)
    indexer = q_lora * index_heads * m.index_head_dim + hidden * index_heads \
        if q_lora and index_heads and m.index_head_dim else 0
    return q + kv + o + indexer, kv


def _gdn_layer(m) -> tuple[int, int]:
    """(linear parameters, conv and decay parameters) of one Gated DeltaNet layer."""
    key, value = m.linear_key_heads * GDN_HEAD_DIM, m.linear_value_heads * GDN_HEAD_DIM
    linear = m.hidden_size * (2 * key + 2 * value) + m.hidden_size * 2 * m.linear_value_heads + value * m.hidden_size
    return linear, (2 * key + value) * GDN_CONV_KERNEL + 2 * m.linear_value_heads + GDN_HEAD_DIM


def _ffn(m, moe: bool) -> tuple[int, int, int]:
    """(dense and shared-expert parameters, routed-expert parameters, router parameters) of one layer's FFN."""
    if not moe:
        return 3 * m.hidden_size * (m.intermediate_size or 0), 0, 0
    shared = 3 * m.hidden_size * (m.shared_expert_intermediate_size or 0) + (m.hidden_size if m.shared_experts else 0)
    width = getattr(m, "moe_latent_size", None) or m.hidden_size  # a latent MoE's experts read its projection
    experts = m.num_experts * 3 * width * (m.moe_intermediate_size or 0)
    if width != m.hidden_size:  # the down and up projections to and from the latent width, with the dense part
        shared += 2 * m.hidden_size * width
    return shared, experts, m.hidden_size * m.num_experts


def count_parameters(m) -> ParameterCount | None:
    """The parameters of profile ``m``, or None when its attention is MLA (shapes the profile lacks)."""
    if m.kv_lora_rank:
        return None
    return _count(m, attention=True)


def count_without_attention(m) -> ParameterCount:
    """The parameters of profile ``m`` but its attention layers': all an MLA profile's shapes give (embeddings, dense
    FFN, shared and routed experts, router, norms, MTP layers' FFN and fc). A lower bound of its count."""
    return _count(m, attention=False)


def _count(m, attention: bool) -> ParameterCount:
    attention_layers = m.full_attention_layers + m.sliding_window_layers
    mtp = m.mtp_layers or 0
    attn, kv = _attention_layer(m) if attention else (0, 0)
    gdn_linear, gdn_small = _gdn_layer(m) if m.gdn_layers and attention else (0, 0)
    dense_layers = m.first_dense_layers if m.is_moe else m.num_layers
    moe_layers = m.num_layers - dense_layers if m.is_moe else 0
    dense, _, _ = _ffn(m, False)
    shared, experts, router = _ffn(m, True) if m.is_moe else (0, 0, 0)
    ffn_layers = moe_layers + mtp if m.is_moe else 0  # an MTP layer has the model's MoE FFN
    embedding = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)
    norms = 2 * m.hidden_size * (m.num_layers + mtp) + m.hidden_size
    count = ParameterCount(
        embedding=embedding,
        attention=(attention_layers + mtp) * attn + m.gdn_layers * gdn_linear + mtp * 2 * m.hidden_size ** 2,
        kv_projection=(attention_layers + mtp) * kv,
        dense_ffn=dense * (dense_layers + (0 if m.is_moe else mtp)) + shared * ffn_layers,
        experts=experts * ffn_layers,
        small_float=router * ffn_layers + m.gdn_layers * gdn_small + norms,
        vision=0)
    return _with_vision(m, count) if attention else count


def _with_vision(m, count: ParameterCount) -> ParameterCount:
    """``count`` with the vision tower sized from ``params_b`` (what the card states beyond the text count)."""
    if not m.is_vl:
        return count
    if not m.params_b:
        return _replace(count, note="vision tower not counted (no params_b)")
    ngram = getattr(m, "ngram_embedding_params", None) or 0  # in params_b, not in the text count, not on a device
    vision = round(m.params_b * 1e9) - count.text - ngram
    if vision <= 0:  # the card's rounded total is no larger than the text count: the tower is within its rounding
        return _replace(count, note=f"vision tower not counted: params_b {m.params_b:g} B is within rounding of the text count")
    minus = "the text count and the n-gram tables" if ngram else "the text count"
    return _replace(count, vision=vision, note=f"vision tower {vision / 1e9:.2f} B: params_b minus {minus}")


def _replace(count: ParameterCount, **changes) -> ParameterCount:
    from optkit.value import replace

    return replace(count, **changes)


def weight_format(m, quantization: str, generation: str) -> str:
    """The format the weights are weighed in: the request's, except that weights served as published (``bf16``:
    no --quantization) on a ``generation`` that runs them are the checkpoint's own where it stores them otherwise
    (``native_weights``)."""
    native = getattr(m, "native_weights", None)
    return native if quantization == "bf16" and native and generation in NATIVE_GENERATIONS else quantization


def weight_bytes_per_device(m, quantization: str, tp: int, experts_over: int) -> tuple[float, str]:
    """Bytes of weights one device holds, and how they were counted. ``experts_over``: the ranks the routed
    experts are split over (TP × DP with expert parallelism, else TP)."""
    count = count_parameters(m)
    if count is None:
        if not m.params_b:  # what the profile's shapes give, without the MLA attention: a lower bound, said so
            part = count_without_attention(m)
            held = (part.dense_ffn + part.attention) / tp * LINEAR_BYTES[quantization] \
                + part.experts / experts_over * EXPERT_BYTES[quantization] \
                + (part.embedding / tp + part.small_float) * FLOAT_BYTES
            return held, (f"at least {part.text / 1e9:.1f} B parameters: the profile's embedding, FFN and expert shapes "
                          "counted, its MLA attention and any vision tower not (no params_b; the profile lacks MLA's "
                          "shapes): a lower bound")
        total = m.params_b * 1e9
        experts = 0.0
        if m.is_moe and m.moe_intermediate_size:  # the routed experts' shapes are in the profile: split over EP
            _, per_layer, _ = _ffn(m, True)
            experts = min(per_layer * (m.num_layers - m.first_dense_layers + (m.mtp_layers or 0)), 0.98 * total)
        held = (total - experts) * LINEAR_BYTES[quantization] / tp + experts / experts_over * EXPERT_BYTES[quantization]
        return (held, f"{m.params_b:g} B parameters (params_b; MLA shapes are not in the profile): the routed "
                      f"experts ({experts / 1e9:.0f} B, from the profile's MoE shapes) split over {experts_over} ranks, "
                      "the rest over TP")
    kv_ranks = min(tp, m.num_kv_heads)  # k/v heads are replicated beyond their count
    linear = (count.attention - count.kv_projection) / tp + count.kv_projection / kv_ranks + count.dense_ffn / tp
    held = (linear * LINEAR_BYTES[quantization] + count.experts / experts_over * EXPERT_BYTES[quantization]
            + (count.embedding / tp + count.small_float + count.vision) * FLOAT_BYTES)
    how = f"{count.total / 1e9:.1f} B parameters counted from the architecture" + (f" ({count.note})" if count.note else "")
    if getattr(m, "ngram_embedding_params", None):
        how += (f"; the {m.ngram_embedding_params / 1e9:.1f} B n-gram embedding tables in pinned host memory, not on the "
                "devices (vLLM 0.30.0 EngramConfig.cpu_offload, on by default: VLLM_PLE_CPU_OFFLOAD=1)")
    return held, how


__all__ = ["ParameterCount", "count_parameters", "count_without_attention", "weight_bytes_per_device", "weight_format",
           "NATIVE_FORMATS", "LINEAR_BYTES",
           "EXPERT_BYTES"]
