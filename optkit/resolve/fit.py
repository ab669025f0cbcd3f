"""Fit before launch: do the weights and the KV cache of a plan fit one device's memory, and if not, the smallest change.

Per device, as vLLM sizes it (vLLM 0.30.0 ``vllm/v1/worker/gpu_worker.py``: the KV cache gets
``total × gpu_memory_utilization`` minus the weights and the peak of a profile run):

- budget: ``hbm_gib_per_device × gpu-memory-utilization`` (the plan's, else vLLM's default 0.92, which the pages'
  "The default value is 0.9" misstates; the Qwen3.5-397B-A17B page's A2/A3 commands set 0.9);
- weights: ``optkit.resolve.weights`` (TP splits attention and dense FFN, expert parallelism splits the routed
  experts over TP × DP, DP replicates the rest);
- reserve: the HCCL buffers, ``2 × HCCL_BUFFSIZE`` MB for each communicator a rank is in (CANN's HCCL_BUFFSIZE
  reference: "Each communicator occupies 2 × HCCL_BUFFSIZE memory"; default 200 MB; the TP, DP and EP groups
  of size > 1), plus ``ACTIVATION_RESERVE_GIB`` for activations, graphs and the runtime: optkit's assumption,
  bounded by the page where the model's own tutorial page runs the plan's layout (``page_evidence``);
- KV: per full-attention layer (and MTP layer with MTP on) ``2 × max(kv_heads / TP, 1) × head_dim × bytes``
  per token, split over context-parallel ranks; MLA ``(kv_lora_rank + qk_rope_head_dim) × bytes`` per token,
  not split by TP; sliding-window layers at most the window; Gated DeltaNet a fixed state per sequence
  (vLLM 0.30.0 ``mamba_utils.gated_delta_net_state_shape``: conv ``(2·K + V) / TP × (kernel − 1 + k)`` and
  recurrent ``Hv / TP × 128 × 128``, in the model dtype); one byte per value where the plan's ``--kv-cache-dtype``
  is an 8-bit type (fp8, int8) or the weights are a c8 format, else bf16.

A plan fits when the budget holds weights, reserve and the KV cache of one sequence of ``max_model_len``:
vLLM refuses to start otherwise (``vllm/v1/core/kv_cache_utils.py``, "To serve at least one request with the
models's max seq len"), so a plan that does not fit is refused. Its load — ``seqs`` sequences of ``tokens``
each per DP engine — need not fit: vLLM pages the cache and queues or preempts what it cannot hold, so a load
beyond the cache is reported (how many of its sequences fit at once, and the concurrency that would), not
refused; nor need ``max-num-seqs × max-model-len`` be resident at once.
"""

from __future__ import annotations

from math import ceil, floor

from optkit.resolve.weights import GDN_CONV_KERNEL, GDN_HEAD_DIM, weight_bytes_per_device, weight_format
from optkit.value import field, valueclass

GIB = 2 ** 30
DEFAULT_UTILIZATION = 0.92
"""vLLM's default ``--gpu-memory-utilization``: ``gpu_memory_utilization: float = Field(default=0.92, …)`` in
vLLM 0.23.0 ``vllm/config/cache.py:67`` and 0.30.0 ``:103`` (read in the installed vLLM). The tutorials' parameter
notes say "The default value is 0.9" (Qwen3.5-27B-Qwen3.6-27B.md:310 in vllm-ascend 0.30.0rc2); vLLM's own value
is the one a server without the flag runs."""
DEFAULT_HCCL_BUFFSIZE_MB = 200
"""CANN's default ``HCCL_BUFFSIZE`` (MB per direction and communicator)."""
ACTIVATION_RESERVE_GIB = 6.0
"""optkit's assumption: memory for activations, graph pools and the NPU runtime beside weights, KV and HCCL buffers.
vLLM measures it at start-up (its profile run); optkit cannot before launch. 6 GiB is set so that the arithmetic
agrees with the Qwen3.5-397B-A17B page's hardware table (tests/fit_cases.yaml), not measured."""


@valueclass(frozen=True)
class FitInputs:
    """What a fit is computed for: the layout, the weights, the load."""

    tp: int
    dp: int
    ep: bool
    quantization: str  # one of QUANTIZATIONS, or the published checkpoint's own format (weights.NATIVE_FORMATS)
    seqs: int  # sequences each DP engine runs at once
    tokens: int  # tokens each of them holds (prompt plus output)
    max_model_len: int  # --max-model-len (vLLM's default: the model's max_position_embeddings)
    utilization: float = DEFAULT_UTILIZATION
    hccl_buffsize_mb: int = DEFAULT_HCCL_BUFFSIZE_MB
    spec_tokens: int = 0  # k with MTP (its layers hold KV; GDN conv states grow by k)
    cp: int = 1  # decode context parallel ranks the KV cache of a sequence is split over (--dcp)
    pcp: int = 1  # prefill context parallel ranks: more ranks per DP group, the KV cache split over PCP × DCP
    pp: int = 1  # pipeline stages: more ranks per DP group, each holding its stage's layers (weights and KV cache)
    variant: str | None = None  # the target's SKU (--variant): its HBM per device where it differs (A2 32 GB)
    kv_cache_dtype: str = ""  # the plan's --kv-cache-dtype ('' or 'auto': by the weight format)
    activation_gib: float = ACTIVATION_RESERVE_GIB  # activations, graphs and runtime (page_evidence may bound it)
    activation_basis: str = ""  # where activation_gib comes from ('': optkit's assumption)


@valueclass(frozen=True)
class FitReport:
    """Memory per device of one plan, and whether it fits."""

    inputs: FitInputs
    budget_gib: float
    weights_gib: float
    reserve_gib: float
    kv_gib: float  # KV cache of the load (or of one max_model_len sequence when that is more)
    kv_sized_by: str  # what the KV figure holds: the load, or one sequence of max_model_len
    free_gib: float  # budget − weights − reserve − KV
    fits: bool  # weights, reserve and one sequence of max_model_len fit: vLLM starts
    holds_load: bool  # the KV cache also holds the load's sequences at once
    load_seqs_max: int  # sequences of ``tokens`` the KV cache holds at once
    max_seqs_at_max_len: int  # sequences of max_model_len the KV cache can hold at once (0: not even one)
    weights_basis: str
    changes: list[str] = field(default_factory=list)  # the smallest changes that make it fit, smallest first
    contradiction: str = ""  # the model's page runs this plan's layout, which optkit's figures say cannot fit

    def line(self) -> str:
        """The fit in one line, as the plan report and explain print it."""
        i = self.inputs
        verdict = "fits" if self.fits else "DOES NOT FIT"
        load = "" if self.holds_load or not self.fits else (
            f"; the load's {i.seqs} sequences per DP engine do not all fit, {self.load_seqs_max} do at once (vLLM "
            f"queues or preempts the rest; --concurrency {max(self.load_seqs_max, 1) * i.dp} would fit)")
        return (f"Fit per device: weights {self.weights_gib:.1f} GiB ({i.quantization}) + reserve "
                f"{self.reserve_gib:.1f} GiB + KV {self.kv_gib:.1f} GiB ({self.kv_sized_by}) of "
                f"{self.budget_gib:.1f} GiB ({i.utilization:g} × HBM): {verdict}, {self.free_gib:.1f} GiB free; "
                f"{self.max_seqs_at_max_len} sequences of --max-model-len {i.max_model_len} fit at once{load}"
                + (f"; activation reserve {i.activation_gib:.1f} GiB: {i.activation_basis}" if i.activation_basis
                   else ""))


def _value_bytes(quantization: str, kv_cache_dtype: str = "") -> int:
    """Bytes of one cached K or V value: one for an 8-bit ``--kv-cache-dtype`` (vLLM's fp8 kinds, vllm-ascend's
    int8) or a c8 weight format, two for a 16-bit one or else (bf16)."""
    said = kv_cache_dtype.lower()
    if said.startswith(("fp8", "int8")):
        return 1
    if said in ("bfloat16", "float16", "half"):
        return 2
    return 1 if quantization.endswith("c8") else 2


def _gqa_layer_bytes(m, tp: int, quantization: str, kv_cache_dtype: str = "") -> float:
    """K and V of one token in one softmax-attention layer on one rank (KV heads replicated beyond their count)."""
    return 2 * max(m.num_kv_heads // tp, 1) * m.head_dim * _value_bytes(quantization, kv_cache_dtype)


def kv_bytes_per_token(m, tp: int, quantization: str, spec_tokens: int, cp: int = 1,
                       kv_cache_dtype: str = "") -> float:
    """KV-cache bytes per token of one sequence on one device, over the full-attention (and, with MTP, the MTP)
    layers; ``kv_bytes`` adds the sliding-window layers and the Gated DeltaNet state."""
    if m.kv_lora_rank:
        per_layer = (m.kv_lora_rank + (m.qk_rope_head_dim or 0)) * _value_bytes(quantization, kv_cache_dtype)
    else:
        per_layer = _gqa_layer_bytes(m, tp, quantization, kv_cache_dtype)
    compressed = getattr(m, "kv_compression_layers", None) or {}
    if compressed:  # DeepSeek-V4: a layer of ratio r keeps one head_dim-wide entry per r tokens (0: its window only)
        per_layer = m.head_dim * _value_bytes(quantization, kv_cache_dtype)
        layers = sum(count / ratio for ratio, count in compressed.items() if ratio)
        layers += (m.full_attention_layers - sum(compressed.values())) + ((m.mtp_layers or 0) if spec_tokens else 0)
        return layers * per_layer / cp
    layers = m.full_attention_layers + ((m.mtp_layers or 0) if spec_tokens else 0)
    return layers * per_layer / cp


def kv_bytes(m, tp: int, quantization: str, spec_tokens: int, tokens: int, cp: int = 1,
             kv_cache_dtype: str = "") -> float:
    """KV-cache bytes of one sequence of ``tokens`` on one device: attention, sliding window, GDN state."""
    full = kv_bytes_per_token(m, tp, quantization, spec_tokens, cp, kv_cache_dtype) * tokens
    sliding = 0.0
    if m.sliding_window_layers and m.sliding_window:
        sliding = (m.sliding_window_layers * _gqa_layer_bytes(m, tp, quantization, kv_cache_dtype)
                   * min(tokens, m.sliding_window) / cp)
    return full + sliding + gdn_state_bytes(m, tp, spec_tokens)


def gdn_state_bytes(m, tp: int, spec_tokens: int) -> float:
    """The Gated DeltaNet layers' fixed state of one sequence on one device (model dtype, bf16)."""
    if not (m.gdn_layers and m.linear_key_heads and m.linear_value_heads):
        return 0.0
    conv_dim = GDN_HEAD_DIM * (2 * m.linear_key_heads + m.linear_value_heads)
    conv = conv_dim / tp * (GDN_CONV_KERNEL - 1 + spec_tokens)
    recurrent = m.linear_value_heads / tp * GDN_HEAD_DIM * GDN_HEAD_DIM
    return m.gdn_layers * (conv + recurrent) * 2


def reserve_bytes(m, i: FitInputs) -> float:
    """HCCL buffers of the rank's communicators plus the activation reserve."""
    return hccl_bytes(m, i) + i.activation_gib * GIB


def hccl_bytes(m, i: FitInputs) -> float:
    """``2 × HCCL_BUFFSIZE`` for each communicator of size > 1 the rank is in: TP, DP, PCP, PP and (MoE) EP."""
    groups = [i.tp > 1, i.dp > 1, i.pcp > 1, i.pp > 1, i.ep and m.is_moe and i.tp * i.pcp * i.dp > 1]
    return sum(groups) * 2 * i.hccl_buffsize_mb * 2 ** 20


def measure(m, target, i: FitInputs) -> FitReport:
    """The memory of ``i`` on one device of ``target``, without the changes (``plan_fit`` adds them)."""
    budget = target.hbm_gib(i.variant) * GIB * i.utilization
    ep_ranks = i.tp * i.pcp * i.dp if i.ep and m.is_moe else i.tp  # PCP ranks hold the TP shards again, not more
    weights, basis = weight_bytes_per_device(m, i.quantization, i.tp, ep_ranks)
    if i.pp > 1:  # a stage holds its layers: the weights and the KV cache split over the stages by layer count
        weights /= i.pp
        basis += (f"; split over {i.pp} pipeline stages by layers (the embedding on the first, lm_head on the last "
                  "stage, counted evenly)")
    reserve = reserve_bytes(m, i)
    cp = i.cp * i.pcp  # vLLM's total_cp_world_size: a sequence's KV cache over PCP × DCP ranks
    load = i.seqs * kv_bytes(m, i.tp, i.quantization, i.spec_tokens, i.tokens, cp, i.kv_cache_dtype) / i.pp
    one_long = kv_bytes(m, i.tp, i.quantization, i.spec_tokens, i.max_model_len, cp, i.kv_cache_dtype) / i.pp
    kv, sized_by = ((load, f"{i.seqs} × {i.tokens} tokens per DP engine") if load >= one_long else
                    (one_long, f"one sequence of --max-model-len {i.max_model_len}, more than {i.seqs} × {i.tokens}"))
    free = budget - weights - reserve - kv
    room = budget - weights - reserve
    per_seq = load / i.seqs if i.seqs else 0
    return FitReport(i, budget / GIB, weights / GIB, reserve / GIB, kv / GIB, sized_by, free / GIB,
                     room >= one_long, free >= 0, max(floor(room / per_seq), 0) if per_seq else 0,
                     max(floor(room / one_long), 0) if one_long else 0, basis)


def _fits(m, target, inputs: FitInputs) -> bool:
    return measure(m, target, inputs).fits


def _splits(m, tp: int, dp: int, ep: bool, per_node: int, nodes: int | None = None, pcp: int = 1,
            pp: int = 1) -> bool:
    """Whether TP × PCP × DP is a layout optkit plans (``layout``) and the model splits over it (``sharding``)."""
    from optkit.errors import RequestError
    from optkit.resolve.layout import layout_problem
    from optkit.resolve.sharding import check_sharding

    try:
        check_sharding(m, tp, dp, ep, pcp)
    except RequestError:
        return False
    return not layout_problem(tp, dp, nodes or ceil(tp * pcp * pp * dp / per_node), per_node, pcp, pp)


def smallest_changes(m, target, i: FitInputs, checkpoints=(), allowed_tp: tuple[int, ...] | None = None) -> list[str]:
    """The changes that make ``i`` fit, smallest first, each as the option of ``optkit plan`` to pass: a quantized
    checkpoint the profile lists, a shorter ``--max-model-len`` (what must fit to start is one sequence of it: the
    workload's longest request, rounded up to 1024, where that fits), a larger TP (of ``allowed_tp`` where the release
    bounds them: DeepSeek-V4.1's Engram, ``optkit.resolve.engram.tp_sizes``), more DP ranks (and nodes).
    Fewer sequences do not: one sequence of ``max_model_len`` must fit whatever the load.)"""
    from optkit.value import replace

    out = []
    from optkit.resolve.profiles import QUANTIZATIONS

    order = {q: n for n, q in enumerate(QUANTIZATIONS)}  # bf16 first, then the 8-bit formats, then the 4-bit ones
    for checkpoint in sorted(checkpoints, key=lambda c: (order.get(c.quantization, len(order)), c.id)):
        quantization = checkpoint.quantization
        if quantization == "bf16" or i.quantization != "bf16":  # quantized weights: the smallest change from bf16
            continue
        if "mxfp" in quantization and target.device_generation != "A5":
            continue  # the microscaling formats are the A5 tabs' (the pages' weight tables)
        if _fits(m, target, replace(i, quantization=quantization)):
            out.append(f"--quantization {quantization} (the checkpoint {checkpoint.id}, {checkpoint.source})")
            break
    shorter = ceil(i.tokens / 1024) * 1024
    if shorter < i.max_model_len and _fits(m, target, replace(i, max_model_len=shorter)):
        out.append(f"--max-model-len {shorter} (the workload's longest request is {i.tokens} tokens; the server's "
                   f"--max-model-len is {i.max_model_len})")
    per_node = target.devices_per_node
    tp = next((t for t in _tp_sizes(m) if t > i.tp and (allowed_tp is None or t in allowed_tp)
               and _splits(m, t, i.dp, i.ep, per_node, pcp=i.pcp, pp=i.pp)
               and _fits(m, target, replace(i, tp=t))), None)
    if tp:
        out.append(f"--tp {tp}")
    dp = next((d for d in range(i.dp + 1, 8 * per_node + 1) if i.pcp == 1 and i.pp == 1
               and _splits(m, i.tp, d, i.ep, per_node)
               and _fits(m, target, replace(i, dp=d))), None)  # vllm-ascend runs PCP with DP 1 only
    if dp:
        nodes = ceil(i.tp * dp / per_node)
        out.append(f"--dp {dp}" + (f" --nodes {nodes}" if nodes > 1 else "") + " (more DP ranks spread the experts)")
    return out


def _tp_sizes(m) -> list[int]:
    from optkit.resolve.sharding import tp_sizes

    return tp_sizes(m)


def fewest_nodes(m, target, i: FitInputs, max_nodes: int = 8) -> tuple[int, int, int] | None:
    """The fewest whole nodes of ``target`` on which the load of ``i`` fits, as (nodes, tp, dp): every TP size
    the model splits over (the largest within one node first, as the pages lay them out), DP filling the nodes,
    the layouts optkit plans. None within ``max_nodes``."""
    from optkit.value import replace

    per_node = target.devices_per_node
    sizes = sorted(_tp_sizes(m), key=lambda tp: (tp > per_node, -tp))
    for nodes in range(1, max_nodes + 1):
        devices = nodes * per_node
        for tp in sizes:
            if devices % (tp * i.pcp):
                continue
            dp = devices // (tp * i.pcp)
            if i.pcp > 1 and dp > 1:
                continue  # vllm-ascend runs PCP with DP 1 only (optkit.resolve.context_parallel)
            if _splits(m, tp, dp, i.ep, per_node, nodes, i.pcp) and _fits(m, target, replace(i, tp=tp, dp=dp)):
                return nodes, tp, dp
    return None


def serve_value(plan, flag: str) -> str | None:
    """The value the plan gives ``flag`` on its serve line: a selected recipe's, the page's carried setting or the
    request's own flag (None when none sets it)."""
    for setting in [*plan.serve_args, *plan.launch_flags]:
        name, _, value = setting.key.partition(" ")
        if name == flag and value:
            return value
    return None


def plan_fit_inputs(plan) -> FitInputs:
    """What ``plan`` runs, as a fit reads it: its layout and weights, ``--max-num-seqs`` (else the highest concurrency
    per DP engine) sequences of its longest request, the KV cache split over its context parallel ranks
    (``--decode-context-parallel-size`` × ``--prefill-context-parallel-size``), its ``--kv-cache-dtype``, and vLLM's defaults for
    what it leaves unset (``--max-model-len``: the model's context; ``--gpu-memory-utilization`` 0.92; HCCL_BUFFSIZE
    200)."""
    r, facts = plan.request, plan.facts
    seqs = serve_value(plan, "--max-num-seqs")
    tokens = facts["workload.total_len_max"]
    max_len = serve_value(plan, "--max-model-len") or plan.model.max_position_embeddings or tokens
    utilization = serve_value(plan, "--gpu-memory-utilization")
    hccl = next((s.value for s in plan.env if s.key == "HCCL_BUFFSIZE"), None)
    return FitInputs(tp=r.tp, dp=r.dp, ep=bool(facts["parallel.ep"]), quantization=weight_format(plan.model, r.weight_format, plan.target.device_generation),
                     seqs=int(seqs) if seqs else ceil(facts["workload.concurrency_max"] / r.dp), tokens=tokens,
                     max_model_len=int(max_len), utilization=float(utilization or DEFAULT_UTILIZATION),
                     hccl_buffsize_mb=int(hccl or DEFAULT_HCCL_BUFFSIZE_MB), spec_tokens=r.k if r.mtp else 0,
                     cp=int(serve_value(plan, "--decode-context-parallel-size") or 1), pcp=facts["parallel.pcp"],
                     pp=facts["parallel.pp"],
                     variant=r.variant,
                     kv_cache_dtype=(serve_value(plan, "--kv-cache-dtype") or "").strip("'\""))


def serve_int(plan, flag: str) -> int | None:
    """``serve_value`` as an integer (None when the flag is unset or not a number)."""
    value = serve_value(plan, flag)
    return int(value) if value and value.isdigit() else None


def plan_fit(plan) -> FitReport:
    """The fit of ``plan`` on its target, with the smallest changes when it does not fit."""
    from optkit.value import replace

    inputs = plan_fit_inputs(plan)
    report = measure(plan.model, plan.target, inputs)
    if report.fits:
        return report
    evidence = page_evidence(plan, inputs)
    if evidence is not None and evidence[0] > 0:
        inputs = replace(inputs, activation_gib=evidence[0], activation_basis=evidence[1])
        report = measure(plan.model, plan.target, inputs)
        if report.fits:
            return report
    from optkit.resolve.engram import tp_sizes

    report = replace(report, changes=smallest_changes(plan.model, plan.target, inputs, plan.model.checkpoints,
                                                      tp_sizes(plan.model, plan.facts["versions.vllm_ascend"])))
    if evidence is not None and evidence[0] <= 0:
        report = replace(report, contradiction=evidence[1])
    return report


def page_evidence(plan, inputs: FitInputs) -> tuple[float, str] | None:
    """What the model's own page proves of the activation reserve, where it runs the plan's exact layout: (the
    most the reserve can be, its basis), else None.

    The command of the plan's layout (TP, DP, nodes; a PD role's own command) on the plan's hardware tab, in the
    plan's release, serving the plan's weights (``WEIGHTS_SETTING``) with the plan's decode and prefill context
    parallel sizes (``DCP_SETTING``, ``PCP_SETTING``) and no more tokens per step
    (``--max-num-batched-tokens``, what the profile run's activations grow with) than the plan: vLLM started it,
    so its budget held the weights, the HCCL buffers and the KV cache of its own load (``--max-num-seqs`` sequences
    of its ``--max-model-len``, where optkit's figures hold them; else one sequence, what vLLM checks at start-up),
    and whatever is left is the most its activations, graphs and runtime took. That bound replaces optkit's assumed
    ``ACTIVATION_RESERVE_GIB`` where it is lower. A bound at or below zero means optkit's weights or KV figures
    contradict the page: returned (as a negative bound) for the refusal to say so, never applied."""
    from optkit.resolve.page_values import DCP_SETTING, PCP_SETTING, PP_SETTING, WEIGHTS_SETTING
    from optkit.value import replace

    advice = plan.page_advice  # the plan's: for_layout / for_role picked the command of its exact layout, if any
    if advice is None or advice.generalized or not advice.layout_exact or advice.page_release != advice.release:
        return None
    said = {s.key: s for s in advice.settings}
    weights, dcp, pcp, pp = (said.get(k) for k in (WEIGHTS_SETTING, DCP_SETTING, PCP_SETTING, PP_SETTING))
    if weights is None or weights.value != inputs.quantization or (dcp.value if dcp else 1) != inputs.cp \
            or (pcp.value if pcp else 1) != inputs.pcp or (pp.value if pp else 1) != inputs.pp:
        return None

    def value(key: str, default):
        setting = said.get(key)
        return setting.value if setting is not None else default

    step, theirs = serve_int(plan, "--max-num-batched-tokens"), value("serve:--max-num-batched-tokens", None)
    if (step is None) != (theirs is None) or (step is not None and step > int(theirs)):
        return None
    max_len = int(value("serve:--max-model-len", plan.model.max_position_embeddings or inputs.max_model_len))
    seqs = int(value("serve:--max-num-seqs", 1))
    command = replace(inputs, max_model_len=max_len, seqs=seqs, tokens=max_len,
                      utilization=float(value("serve:--gpu-memory-utilization", DEFAULT_UTILIZATION)),
                      hccl_buffsize_mb=int(value("env:HCCL_BUFFSIZE", DEFAULT_HCCL_BUFFSIZE_MB)), activation_gib=0.0)
    held = measure(plan.model, plan.target, command)
    # the page's tuned command holds its own load (--max-num-seqs of --max-model-len) where optkit's figures allow
    # it; else what vLLM checks at start-up, one sequence of --max-model-len
    loaded = held.holds_load and seqs > 1
    if not loaded:
        held = measure(plan.model, plan.target, replace(command, seqs=1))
    bound = held.free_gib
    where = f"{advice.page.removeprefix('models/')}:{weights.source.line} (vllm-ascend {advice.release})"
    if bound <= 0:
        return bound, (f"the model's page runs this layout and weights at {where}, yet optkit's weights "
                       f"({held.weights_gib:.1f} GiB), HCCL buffers and KV cache leave no room even without an "
                       "activation reserve: one of them is likely over-counted for this model (its profile's shapes "
                       "or weights figure)")
    if bound >= inputs.activation_gib:
        return None
    kv = f"its {seqs} sequences" if loaded else "one sequence"
    return bound, (f"at most this, as the model's page runs this layout and weights at {where}: of its "
                   f"{held.budget_gib:.1f} GiB budget, weights, HCCL buffers and the KV cache of {kv} of "
                   f"--max-model-len {max_len} leave {bound:.1f} GiB (optkit assumes {inputs.activation_gib:g} GiB "
                   "where no page runs the layout)")


def refusal(report: FitReport, model_id: str, target_id: str) -> str:
    """Why a plan that does not fit is refused, and what would make it fit (``RequestError`` text)."""
    i = report.inputs
    ways = "; ".join(report.changes) or "no change of load, weights, TP or DP within 8 nodes makes it fit"
    reserve = ("the activation reserve as above" if i.activation_basis else
               f"optkit's assumed {i.activation_gib:g} GiB for activations and graphs")
    against = f". Note: {report.contradiction}" if report.contradiction else ""
    return (f"{model_id} does not fit {target_id} at TP {i.tp} × DP {i.dp}: {report.line()} (weights: "
            f"{report.weights_basis}; reserve: HCCL buffers and {reserve}, optkit.resolve.fit). Smallest changes "
            f"first: {ways}{against}")


__all__ = ["FitInputs", "FitReport", "measure", "kv_bytes", "kv_bytes_per_token", "gdn_state_bytes", "GIB",
           "ACTIVATION_RESERVE_GIB", "DEFAULT_UTILIZATION", "smallest_changes", "fewest_nodes",
           "plan_fit", "plan_fit_inputs", "page_evidence", "hccl_bytes", "refusal"]
