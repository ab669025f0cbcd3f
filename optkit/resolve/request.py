"""A plan request: what the user asks for, from CLI flags or a YAML file (the pydantic schema).

The run-time validates requests with this model's own validator, precompiled, and holds them as
``RequestRecord``s (``optkit.resolve.request_record``, which also reads request files).

Defaults follow the article's setup: Qwen3.5-35B-A3B on one 910C card (TP2, bf16), expert
parallelism on for MoE models, concurrency 1/4/8, random dataset 1024 in / 512 out, greedy,
min_tokens set by clients (the article's production workload), async scheduling on (vLLM 0.23.0's
default), bf16 weights unless MODEL names a quantized checkpoint, MTP with k = 4 when asked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from optkit.resolve.profiles import QUANTIZATIONS, Quantization
from optkit.resolve.request_record import (
    MAX_CONCURRENCY, MAX_PARALLEL, MAX_TOKENS, Bounded, DpSize, RequestBehaviour, RequestRecord, SpecMethod,
    canonical_length_mix, canonical_set_values, canonical_slo, comma_separated, literal_path, pd_shape,
    sorted_levels)


def _bounded(low: int, high: int) -> Any:
    """An int from ``low`` to ``high``; a bool is none (YAML reads ``true`` as one), nor is ``"4"``."""
    return Annotated[int, Field(ge=low, le=high), BeforeValidator(Bounded(low, high))]


class Request(RequestBehaviour, BaseModel):
    """Everything a plan depends on besides the catalog."""

    # strict: a YAML `true` is no TP size and `"4"` no concurrency (lax mode would read them as 1 and 4)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, protected_namespaces=(), strict=True)

    model: Optional[str] = Field(None, description="Model id or alias from models/ (or use model_config).")
    model_config_path: Optional[str] = Field(
        None, alias="model_config", description="Path to a Hugging Face config.json for a user checkpoint.")
    model_id: Optional[str] = Field(
        None, min_length=1, description="With model_config: the model's name (HF repo id or the path vllm "
        "serve loads; also the served name), when config.json has no _name_or_path.")
    target: str = Field("910c", description="Target id or alias from targets/.")
    variant: Optional[str] = Field(None, description="Hardware variant of the target (e.g. 752t, 560t).")
    tp: _bounded(1, MAX_PARALLEL) = Field(2, description="Tensor-parallel size (910C: one card = two dies = TP2).")
    dp: Annotated[Union[Literal["auto"], int], BeforeValidator(DpSize(1, MAX_PARALLEL))] = Field(
        1, description="Data-parallel size, or 'auto': under the throughput goal the rule of a recipe's "
        "'choices' sizes it from the load (optkit.resolve.choices); 1 under the latency goal.")
    nodes: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="Nodes the TP × DP ranks run on; default: the fewest that hold them "
        "(optkit.resolve.layout names the layouts).")
    pd: Annotated[Optional[str], BeforeValidator(pd_shape)] = Field(
        None, description="Prefill/decode disaggregation, 'P:D': P prefill and D decode instances of TP × DP each, "
        "joined by the release's Mooncake connector and proxy (optkit.resolve.pd places them).")
    prefill_tp: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="With --pd: the prefill instances' tensor-parallel size when it differs from the decode "
        "instances' (--tp); default --tp.")
    prefill_dp: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="With --pd: the prefill instances' data-parallel size when it differs from the decode "
        "instances' (--dp); default --dp.")
    prefill_dcp: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="With --pd: the prefill instances' decode context parallel size when it differs from the "
        "decode instances' (--dcp), as GLM5.2.md's A3 pair sizes it per role (DCP 16 on its TP 16 prefillers, 8 on "
        "its TP 8 decoders); default --dcp.")
    prefill_pp: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="With --pd: the prefill instances' pipeline-parallel size (the decode instances run PP 1: "
        "optkit.resolve.pipeline); default 1.")
    ep: Optional[bool] = Field(None, description=(
        "Expert parallelism; default: as the model's own tutorial page runs it for the layout (its scenario row or "
        "command: page.expert_parallel), else on for MoE models."))
    context_parallel: bool = Field(False, description="Prefill/decode context parallelism in use.")
    dcp: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="Decode context parallel size (vLLM's --decode-context-parallel-size): the KV cache of a "
        "sequence is split over this many of the TP ranks (recipe context-parallel-long-context); default 1, off.")
    pcp: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="Prefill context parallel size (vLLM's --prefill-context-parallel-size): each DP rank runs "
        "TP × PCP devices, a long prompt's tokens split over the PCP ranks (optkit.resolve.context_parallel); "
        "default 1, off.")
    pp: Optional[_bounded(1, MAX_PARALLEL)] = Field(
        None, description="Pipeline-parallel size (vLLM's --pipeline-parallel-size): each DP rank runs TP × PP "
        "devices, the layers split into PP stages (optkit.resolve.pipeline); default 1, off.")
    flashcomm1: Optional[bool] = Field(None, description=(
        "FlashComm1 (sequence parallelism: additional_config.enable_flashcomm1 or VLLM_ASCEND_ENABLE_FLASHCOMM1), "
        "turned on by the bundle when true; unset: a recipe's 'choices' rule decides (on under the throughput "
        "goal where the release and the layout have it, optkit.resolve.choices), off otherwise."))
    concurrency: Annotated[list[_bounded(1, MAX_CONCURRENCY)], BeforeValidator(comma_separated),
                           AfterValidator(sorted_levels)] = Field(
        [1, 4, 8], min_length=1, description="Concurrency levels to optimize for: a list, one level, or '1,4,8'.")
    slo: Optional[Annotated[str, AfterValidator(canonical_slo)]] = Field(
        None, description="Service-level objective, e.g. 'tpot_p99<=20ms,ttft_p99<=1s' (optkit.resolve.slo); "
        "kept in its canonical text.")
    goal: Optional[Literal["latency", "throughput"]] = Field(
        None, description="What the plan optimizes under the SLO: latency (the article's c <= 8 work) or "
        "throughput; default latency up to concurrency 8, throughput above.")
    max_model_len: Optional[_bounded(1, MAX_TOKENS)] = Field(None, description=(
        "--max-model-len: the longest sequence the server takes (at least the workload's longest request); "
        "default: the model page's tuned command where it sets one, else vLLM's default, the model's context."))
    input_len: _bounded(1, MAX_TOKENS) = Field(1024, description="Input tokens per request.")
    output_len: _bounded(1, MAX_TOKENS) = Field(512, description="Output tokens per request.")
    length_mix: Optional[Annotated[str, AfterValidator(canonical_length_mix)]] = Field(
        None, description="Several input/output lengths with their shares, e.g. '1024:256:0.7,8192:512:0.3' "
        "(optkit.resolve.length_mix), instead of input_len and output_len; kept in its canonical text.")
    sampling: Literal["greedy", "sampled"] = Field("greedy", description="greedy (temperature 0) or sampled.")
    logprobs: bool = Field(False, description="Requests ask for logprobs.")
    penalties: bool = Field(False, description="Requests use presence/frequency/repetition penalties.")
    min_tokens: bool = Field(True, description="Clients set min_tokens (the article's production workload does).")
    structured_output: bool = Field(False, description="Requests use structured output.")
    prefix_caching: Optional[bool] = Field(None, description=(
        "Prefix caching on (vLLM defaults it off for hybrid models); unset: a recipe's 'choices' rule decides "
        "(on when prompts share a prefix, shared_prefix_len > 0; optkit.resolve.choices), off otherwise."))
    shared_prefix_len: _bounded(0, MAX_TOKENS) = Field(
        0, description="Tokens at the start of every prompt that all prompts share (a system prompt, few-shot "
        "examples): part of each input; bench.sh sends them as vllm bench serve's --random-prefix-len.")
    async_scheduling: bool = Field(True, description="Async scheduling (vLLM 0.23.0 turns it on by default).")
    mtp: bool = Field(False, description="MTP speculative decoding (the spelling of spec_method: mtp).")
    spec_method: Optional[SpecMethod] = Field(None, description=(
        "Speculative decoding method: mtp (the checkpoint's MTP head), eagle3 (an EAGLE-3 draft model, draft_model), "
        "suffix (suffix decoding on the CPU, the arctic-inference package), dspark (the draft stages of a DeepSeek-V4 "
        "checkpoint) or dflash (a DFlash draft model, draft_model); one at a time (optkit.resolve.quantization)."))
    draft_model: Optional[Annotated[str, Field(min_length=1), AfterValidator(literal_path)]] = Field(
        None, description="With spec_method eagle3 or dflash: the EAGLE-3 or DFlash draft model, an HF repo id or path "
        "(the --speculative-config model), as written: serve.sh passes it inside the JSON, unexpanded.")
    num_speculative_tokens: Optional[_bounded(1, 16)] = Field(
        None, description="k; default 4 with MTP (the article's), 3 with eagle3 and suffix, 5 with dspark, 15 with "
        "dflash (upstream's pages).")
    vllm_ascend_version: Optional[str] = Field(
        None, description="vllm-ascend release on the host (default 0.23.0, or the version of --tree).")
    vllm_version: Optional[str] = Field(None, description="vLLM version; default: the one the vllm-ascend release pairs with.")
    tree: Optional[str] = Field(None, description="A vllm-ascend source tree to plan for: knobs and probes read from it.")
    dtype: Literal["bfloat16", "float16", "float32"] | None = Field(
        None, description="Serving dtype; unset: the target's (bfloat16; float16 on Atlas 300I DUO, which serves "
        "no bfloat16: Target.serving_dtypes).")
    quantization: Optional[Quantization] = Field(None, description=(
        "Weight format: " + ", ".join(QUANTIZATIONS) + "; every format but bf16 is served with --quantization "
        "ascend. Unset: the format of the checkpoint MODEL names (a checkpoint id of a profile's checkpoints), "
        "else bf16 (optkit.resolve.quantization)."))
    enforce_eager: bool = Field(False, description="Run without graphs (--enforce-eager).")
    lora: bool = Field(False, description="LoRA adapters enabled.")
    with_recipes: list[str] = Field([], alias="with", description="Recipe ids to force in.")
    without_recipes: list[str] = Field([], alias="without", description="Recipe ids to leave out.")
    set_values: Optional[Annotated[str, BeforeValidator(canonical_set_values)]] = Field(
        None, alias="set", description="Launch values set over the rules, e.g. 'max-num-seqs=48,capture-up-to=48' "
        "(optkit.resolve.overrides: max-num-seqs, max-num-batched-tokens, capture-up-to); kept in its canonical text.")
    set_source: Optional[str] = Field(
        None, description="Where the set values come from (optkit plan --from-tune: the tune and host that measured "
        "them); shown beside each value.")


RECORDS = {Request: RequestRecord}  # what freeze() makes of a validated Request
