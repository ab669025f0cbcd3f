"""The named facts that recipe conditions may read, with their types.

This registry is the contract between recipes and the resolver: a condition that names a fact
not listed here, or compares it with a value of the wrong type, is rejected when the catalog
loads. ``optkit.resolve.facts`` computes the values for a request.
"""

from __future__ import annotations

from optkit.value import valueclass


# Fact types: bool, int, float, str, version (PEP 440), list[int].

QUANTIZATION_CHOICES = ("bf16", "w8a8", "w8a8c8", "w8a8-mxfp8", "w4a8", "w4a8c8", "w4a4", "w4a4-mxfp4", "w8a8sc")
"""``runtime.quantization``'s values: optkit.resolve.profiles.QUANTIZATIONS (a test holds them equal; the catalog
stage may not import the resolver)."""


@valueclass(frozen=True)
class FactSpec:
    """One fact: its type, meaning, and (for strings) the values it can take."""

    name: str
    type: str
    description: str
    choices: tuple[str, ...] = ()
    flag: str = ""  # the request flag that turns a boolean fact on, for hints ("drop --mtp")


def _f(name: str, type_: str, description: str, choices: tuple[str, ...] = (), flag: str = "") -> FactSpec:
    return FactSpec(name, type_, description, choices, flag)


_SPECS = [
    # target
    _f("target.id", "str", "Target id from targets/ (e.g. 910c, 910b)."),
    _f("target.soc_family", "str", "SoC family as vllm-ascend's build lists name it.",
       ("ascend310p", "ascend910_93", "ascend910b", "ascend950")),
    _f("target.soc_version", "str", "Full SoC name used for kernel builds (e.g. ascend910_9391)."),
    _f("target.generation", "str", "Atlas generation (vllm-ascend's AscendDeviceType).", ("A2", "A3", "A5", "310P")),
    _f("target.dies_per_card", "int", "NPU dies per card (910C: 2)."),
    _f("target.devices_per_node", "int", "NPU devices (dies) per node."),
    _f("target.variant", "str", "Hardware variant (e.g. 752t, 560t; 32g of 910b; 950pr), or '' if none."),
    _f("target.hbm_gib_per_device", "int", "HBM per device (die) in GiB on the requested variant."),
    _f("target.interconnect.within_node", "str", "Link between the devices of one node.", ("hccs", "pcie", "ub")),
    _f("target.interconnect.across_nodes", "str", "Link between nodes ('unknown': no page runs the target on "
       "more than one node).", ("hccs", "roce", "ub", "unknown")),
    # model
    _f("model.id", "str", "Model profile id."),
    _f("model.family", "str", "Profile family label (qwen3.5-moe, qwen3.6-dense, custom): a name, not an "
       "architecture; lint refuses conditions on it (and on model.id)."),
    _f("model.hf_model_type", "str", "Hugging Face config model_type (top level, e.g. qwen3_5, qwen3_5_moe)."),
    _f("model.text_model_type", "str", "model_type of the language model (text_config), e.g. qwen3_5_text."),
    _f("model.architecture", "str", "First entry of the HF config's architectures."),
    _f("model.num_layers", "int", "Decoder layers."),
    _f("model.gdn_layers", "int", "Gated-DeltaNet (linear attention) layers."),
    _f("model.full_attention_layers", "int", "Full-attention layers."),
    _f("model.hidden_size", "int", "Hidden size."),
    _f("model.vocab_size", "int", "Vocabulary size."),
    _f("model.is_moe", "bool", "Mixture-of-experts model."),
    _f("model.num_experts", "int", "Routed experts (0 for dense)."),
    _f("model.moe.shared_experts", "bool", "MoE layers have a shared expert."),
    _f("model.mtp_head", "str", "Whether the checkpoint ships an MTP head vLLM can draft with; 'unknown' when "
       "config.json does not say (e.g. Qwen3-Next: no num_nextn_predict_layers).",
       ("present", "absent", "unknown")),
    _f("model.is_vl", "bool", "Config carries vision_config (vllm-ascend is_vl_model() is True)."),
    _f("model.remote_code", "bool", "config.json's auto_map names the checkpoint's own config class (config_code): "
       "the launch passes --trust-remote-code."),
    _f("model.dtype", "str", "Checkpoint dtype (bfloat16, float16, …)."),
    _f("model.attention", "str", "How the attention layers keep KV: gdn-hybrid (Gated DeltaNet beside full "
       "attention), kda-hybrid (Kimi Delta Attention beside MLA), csa-hybrid (DeepSeek-V4: sliding window + compressed KV), mla (latent KV, kv_lora_rank), "
       "sliding-hybrid (sliding-window beside full-attention layers), gqa (full attention, MHA/MQA included).",
       ("gdn-hybrid", "kda-hybrid", "csa-hybrid", "mla", "sliding-hybrid", "gqa")),
    # parallelism
    _f("parallel.tp", "int", "Tensor-parallel size."),
    _f("parallel.dp", "int", "Data-parallel size."),
    _f("parallel.ep", "bool", "Expert parallelism on (--enable-expert-parallel)."),
    _f("parallel.ep_size", "int", "Expert-parallel group size (tp × pcp × dp when EP is on, else 1)."),
    _f("parallel.context_parallel", "bool", "Prefill/decode context parallelism in use (--context-parallel, or a "
       "decode or prefill context parallel size above 1).", flag="--context-parallel"),
    _f("parallel.dcp", "int", "Decode context parallel size: TP ranks the KV cache of a sequence is split over (1: off).",
       flag="--dcp"),
    _f("parallel.pcp", "int", "Prefill context parallel size: ranks a long prompt's tokens are split over, each DP "
       "rank running TP × PCP devices (1: off).", flag="--pcp"),
    _f("parallel.pp", "int", "Pipeline-parallel size: the layers split into this many stages, each DP rank running "
       "TP × PCP × PP devices (1: off).", flag="--pp"),
    _f("parallel.flashcomm1", "bool",
       "FlashComm1 (sequence-parallel MoE/dense, additional_config.enable_flashcomm1) on in the deployment.",
       flag="--flashcomm1"),
    _f("parallel.cards", "int", "Cards used on all nodes together (devices / dies per card, rounded up)."),
    _f("parallel.nodes", "int", "Nodes the TP × DP ranks run on (--nodes, else the fewest that hold them)."),
    _f("parallel.node_devices", "int", "NPU devices each node runs (TP × DP / nodes)."),
    _f("parallel.layout", "str", "How the ranks sit on nodes (optkit.resolve.layout): all on one node, whole TP "
       "groups of the DP ranks spread over nodes, one TP group spanning nodes, or a pipeline's stages spanning "
       "nodes.",
       ("single-node", "dp-across-nodes", "tp-across-nodes", "pp-across-nodes")),
    # versions
    _f("versions.vllm_ascend", "version", "vllm-ascend version of the tree/host."),
    _f("versions.vllm", "version", "vLLM version."),
    _f("versions.native_architecture", "str", "Whether the paired vLLM's model registry or vllm-ascend's own "
       "registrations hold the model's architecture (optkit.versions.architectures): yes; no (vLLM serves it only "
       "through its Transformers backend); unknown (optkit holds no list of that vLLM's registry).",
       ("yes", "no", "unknown")),
    # runtime
    _f("runtime.dtype", "str", "Serving dtype.", ("bfloat16", "float16", "float32")),
    _f("runtime.quantization", "str", "Weight format served (bf16, or a quantization served with --quantization "
       "as runtime.quantization_method says; optkit.resolve.quantization).", QUANTIZATION_CHOICES,
       flag="--quantization"),
    _f("runtime.quantized", "bool", "Weights are quantized (any format but bf16).", flag="--quantization"),
    _f("runtime.quantization_method", "str", "What --quantization loads the weights with: 'ascend' (msModelSlim), "
       "'mxfp8' (a ModelOpt MXFP8 checkpoint whose page says so, Checkpoint.method); '' for bf16.",
       ("", "ascend", "mxfp8"), flag="--quantization"),
    _f("runtime.kv_cache_quantized", "bool", "The KV cache is int8 too (the C8 formats w8a8c8 and w4a8c8, turned on "
       "by the checkpoint's quant description).", flag="--quantization"),
    _f("runtime.enforce_eager", "bool", "Graph mode off (--enforce-eager).", flag="--enforce-eager"),
    _f("runtime.lora", "bool", "LoRA adapters enabled.", flag="--lora"),
    # workload
    _f("workload.concurrency", "list[int]", "Requested concurrency levels."),
    _f("workload.concurrency_max", "int", "Highest requested concurrency."),
    _f("workload.input_len", "int", "Input tokens per request (with a length mix: its longest input)."),
    _f("workload.output_len", "int", "Output tokens per request (with a length mix: its longest output)."),
    # the length mix (optkit.resolve.length_mix; one class of input_len/output_len without one)
    _f("workload.length_mix", "str", "The length mix in its canonical text ('' for one input and one output length)."),
    _f("workload.length_classes", "int", "Length classes of the workload (1 without a length mix)."),
    _f("workload.input_len_max", "int", "Longest input of the workload, in tokens."),
    _f("workload.output_len_max", "int", "Longest output of the workload, in tokens."),
    _f("workload.total_len_max", "int", "Longest request, input plus output (what --max-model-len must hold)."),
    _f("workload.input_len_mean", "int", "Mean input over the length mix by weight, rounded up."),
    _f("workload.output_len_mean", "int", "Mean output over the length mix by weight, rounded up."),
    _f("workload.greedy", "bool", "All requests greedy (temperature 0)."),
    _f("workload.logprobs", "bool", "Requests ask for logprobs.", flag="--logprobs"),
    _f("workload.penalties", "bool", "Requests use presence/frequency/repetition penalties.", flag="--penalties"),
    _f("workload.min_tokens", "bool", "Requests set min_tokens.", flag="--min-tokens"),
    _f("workload.structured_output", "bool", "Requests use structured output / grammars.", flag="--structured-output"),
    _f("workload.prefix_caching", "bool", "Prefix caching on.", flag="--prefix-caching"),
    _f("workload.shared_prefix_len", "int", "Tokens at the start of every prompt that all prompts share (part of each "
       "input; 0: none).", flag="--shared-prefix-len"),
    _f("workload.async_scheduling", "bool", "Async scheduling on (vLLM turns it on with MTP).", flag="--async-scheduling"),
    _f("workload.decode_rows", "list[int]",
       "Decode rows per step at each requested concurrency, sorted: ceil(concurrency / dp) × (1 + k) (what a "
       "graph must hold to run that step; the launch's capture list is the plan's, in its compilation_config)."),
    _f("workload.decode_rows_max", "int",
       "Largest decode rows per step: ceil(concurrency / dp) × (1 + k)."),
    _f("workload.decode_rows_per_rank_max", "int", "Decode rows per step per TP rank (rows / tp)."),
    _f("workload.prefill_step_tokens_max", "int",
       "Tokens a step must hold to prefill the longest input at once beside the full decode batch: "
       "input_len_max + decode_rows_max (vLLM schedules decodes first, prefill chunks in what is left)."),
    # the objective (optkit.resolve.slo; the goal's default in optkit.resolve.request_record)
    _f("objective.goal", "str", "What the plan optimizes: latency (the article's c <= 8 work; the default up to "
       "c8) or throughput (the default above).", ("latency", "throughput")),
    _f("objective.slo", "str", "The service-level objective in its canonical text ('' when none)."),
    _f("objective.tpot_limit_ms", "float", "The tightest bound the SLO puts on TPOT, in ms (0 when it has none)."),
    _f("objective.ttft_limit_ms", "float", "The tightest bound the SLO puts on TTFT, in ms (0 when it has none)."),
    # the model's tutorial page (optkit.resolve.page_rules): what it advises for the goal's scenario on this tab
    _f("page.present", "bool", "A tutorial page advises this request's scenario: the model's own, or (page.own false) "
       "the nearest page by architecture, optkit's generalization."),
    _f("page.model_pages", "str", "The model's own tutorial pages (its profile's tutorials:, comma-separated, sorted; "
       "'' for a model without one): rules read on one page key on it."),
    _f("page.own", "bool", "The advice is the model's own page's, on this hardware tab (not optkit's generalization)."),
    _f("page.scenario", "str", "The scenario row read ('high throughput', 'low latency'; '' without a page)."),
    _f("page.max_num_seqs", "int", "Sequences per DP group the page runs for the scenario (0: not stated as a number)."),
    _f("page.max_num_batched_tokens", "int", "--max-num-batched-tokens the page runs for the scenario (0: not stated "
       "as one number)."),
    _f("page.num_speculative_tokens", "int", "MTP draft tokens the page runs for the scenario (0: off or not stated)."),
    _f("page.sequence_parallel", "str", "Whether the page's row runs sequence parallelism (FlashComm1).",
       ("on", "off", "unstated")),
    _f("page.prefix_caching", "str", "Whether the page's row runs prefix caching.", ("on", "off", "unstated")),
    _f("page.async_scheduling", "str", "Whether the page's row names async scheduling.", ("on", "off", "unstated")),
    _f("page.command_max_num_batched_tokens", "int", "--max-num-batched-tokens of the model's own page's command "
       "of exactly the plan's layout (TP, DP, nodes) on the plan's tab, in the plan's release, other than the "
       "scenario's own command; in a PD role's plan, the page's command for that role (0: none; never another "
       "model's page)."),
    _f("page.command_capture_sizes_max", "int", "The largest cudagraph_capture_sizes entry of the model's own page's "
       "command of exactly the plan's layout (TP, DP, nodes; its scenario's own command included) or PD role, on the "
       "plan's tab, in the plan's release (0: none sets it; never another model's page)."),
    _f("page.expert_parallel", "str", "Whether the model's own page runs expert parallelism for the plan: its "
       "scenario row's EP column, else the command it carries (its scenario's or its layout's, on the plan's tab and "
       "release: the flag, or its absence); 'unstated' for another page's advice.", ("on", "off", "unstated")),
    _f("page.role", "str", "With --pd, in one role's plan: the role whose command on the model's own page (of the "
       "plan's instance shape, tab and release) gives that role's page facts and settings ('' none: a plan, or a "
       "role the page runs no command for).", ("", "prefill", "decode")),
    _f("page.fused_mc2", "str", "Whether the model's own page's command the plan carries (its scenario's, or its "
       "command of exactly the plan's layout, on the plan's tab and release) turns fused MC2 on or off "
       "(enable_fused_mc2, or VLLM_ASCEND_ENABLE_FUSED_MC2).", ("on", "off", "unstated")),
    _f("page.fused_mc2_level", "int", "The fused MC2 level that command sets: 1 dispatch_ffn_combine, 2 "
       "dispatch_gmm_combine_decode (W8A8 decode nodes; vllm-ascend's envs.py); 0 when it sets none or sets it off."),
    _f("page.static_kernel", "str", "Whether the model's own page's command the plan carries (its scenario's, or its "
       "command of exactly the plan's layout, on the plan's tab and release) sets "
       "ascend_compilation_config.enable_static_kernel.", ("on", "off", "unstated")),
    _f("page.npugraph_ex", "str", "Whether that command sets ascend_compilation_config.enable_npugraph_ex (the graph "
       "engine static kernels compile under).", ("on", "off", "unstated")),
    # speculative decoding
    _f("spec.mtp", "bool", "MTP speculative decoding on.", flag="--mtp"),
    _f("spec.method", "str", "Speculative decoding method ('none' when off).",
       ("none", "mtp", "eagle3", "suffix", "dspark", "dflash"), flag="--spec-method"),
    _f("spec.dspark_weights", "str", "Whether the weights served carry DSpark draft stages (a checkpoint its page says "
       "ships them, or config.json's dspark_block_size on the profile's own weights); 'unknown' for weights optkit "
       "cannot name.", ("present", "absent", "unknown")),
    _f("spec.speculative", "bool", "Speculative decoding on, by any method (decode steps verify 1 + k tokens per "
       "request through the rejection sampler).", flag="--spec-method"),
    _f("spec.draft_model", "str", "eagle3's or dflash's draft model, an HF id or path ('' without one).", flag="--draft-model"),
    _f("spec.num_speculative_tokens", "int", "k, draft tokens per step (0 when off)."),
    _f("spec.async_spec_decode", "bool", "Async scheduling with spec decode (CPU state optimistic)."),
]

FACTS: dict[str, FactSpec] = {spec.name: spec for spec in _SPECS}
RENAMED = {"compile.cudagraph_capture_sizes": "workload.decode_rows",
           "compile.capture_size_max": "workload.decode_rows_max"}
"""Facts that had another name, old → new: the old names looked like launch values (the capture list a bundle
runs is the plan's compilation_config, not a fact)."""


def unknown_fact_hint(name: str, known=FACTS) -> str:
    """What to write instead of the unknown fact ``name``: its new name, a near miss, or ''."""
    from optkit.errors import did_you_mean

    if name in RENAMED:
        return f"it is called {RENAMED[name]!r} now"
    return did_you_mean(name, known)
