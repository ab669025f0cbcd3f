"""Compute the facts a request is judged on: typed in, looked up, and derived.

Derived facts are computed here and nowhere else, so every recipe and explanation sees the same
numbers: decode rows per step = ceil(concurrency / DP) × (1 + k); capture sizes = the same per
concurrency (the article's [5, 20, 40] for c1/c4/c8 with k = 4); async spec decode = MTP with
async scheduling on (vLLM 0.23.0's default).
"""

from __future__ import annotations

from math import ceil
from typing import Any

from packaging.version import Version

from optkit.errors import RequestError
from optkit.catalog.factspec import FACTS
from optkit.resolve.layout import NodeLayout, node_layout
from optkit.resolve.page_rules import plan_advice
from optkit.resolve.pd import pd_layout
from optkit.resolve.request_record import DEFAULT_VLLM_ASCEND, RequestRecord
from optkit.resolve.context_parallel import check_decode_context_parallel, check_prefill_context_parallel
from optkit.resolve.pipeline import check_pipeline_parallel
from optkit.resolve.engram import check_engram
from optkit.versions.architectures import support as native_architecture
from optkit.resolve.sharding import check_sharding
from optkit.resolve.quantization import kv_cache_quantized
from optkit.value import valueclass


@valueclass(frozen=True)
class Facts:
    """All facts of one request, by name (every name in ``FACTS``)."""

    values: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def keys(self):
        return self.values.keys()


def parse_version(text: str, flag: str) -> Version:
    """A PEP 440 version, or a RequestError naming the flag."""
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or a number too long for int()
        raise RequestError(f"{flag} {text!r} is not a version (e.g. 0.23.0)") from None


def ascend_version(request: RequestRecord, release=None) -> Version:
    """The vllm-ascend version of a request: the release's (a --tree's, or the known release the flag
    names: ``0.23`` is 0.23.0), else the flag's, else 0.23.0. A flag that disagrees with the tree is
    refused; without a tree, a flag that names no known release is (``release_named``)."""
    if release is not None:
        if release.tree is not None and request.vllm_ascend_version is not None:
            given = parse_version(request.vllm_ascend_version, "--vllm-ascend-version")
            if given != release.version:
                raise RequestError(f"--vllm-ascend-version {given} but --tree {release.tree} is vllm-ascend "
                                   f"{release.version}; drop one of them")
        return release.version
    given = parse_version(request.vllm_ascend_version or DEFAULT_VLLM_ASCEND, "--vllm-ascend-version")
    if request.tree:
        return given  # the tree's own version decides; checked against it once it is read
    from optkit.versions.releases import release_named

    return Version(release_named(given, flag="--vllm-ascend-version"))


def paired_vllm(release) -> Version:
    """The vLLM a vllm-ascend release pairs with (its A3 Dockerfile's VLLM_TAG)."""
    if release.data.vllm is None:
        raise RequestError(f"{release.label} names no paired vLLM version; give --vllm-version")
    return parse_version(release.data.vllm.value, f"{release.label}: its paired vLLM")


def decode_rows(concurrency: int, dp: int, k: int) -> int:
    """Tokens one decode step runs per DP rank: ceil(concurrency / DP) × (1 + k)."""
    return ceil(concurrency / dp) * (1 + k)


def decode_rows_at_load(request: RequestRecord) -> list[int]:
    """Decode rows per step at each requested concurrency (``decode_rows``), sorted."""
    return sorted({decode_rows(c, request.dp, request.k) for c in request.concurrency})


def objective_facts(request: RequestRecord) -> dict[str, Any]:
    """The goal and the SLO's bounds as facts (a bound the SLO does not set is 0)."""
    from optkit.resolve.slo import parse_slo

    slo = parse_slo(request.slo) if request.slo else None
    bound = {m: (slo.bound(m) if slo else None) for m in ("tpot", "ttft")}
    return {"objective.goal": request.objective_goal, "objective.slo": slo.text() if slo else "",
            "objective.tpot_limit_ms": bound["tpot"].limit_ms if bound["tpot"] else 0.0,
            "objective.ttft_limit_ms": bound["ttft"].limit_ms if bound["ttft"] else 0.0}


def length_facts(request: RequestRecord, decode_rows_max: int) -> dict[str, Any]:
    """The workload's lengths as facts: the mix (``optkit.resolve.length_mix``), its extremes and means, and what
    one step must hold to prefill the longest input beside the full decode batch."""
    mix = request.lengths
    return {"workload.length_mix": request.length_mix or "", "workload.length_classes": len(mix.classes),
            "workload.input_len_max": mix.input_len_max, "workload.output_len_max": mix.output_len_max,
            "workload.total_len_max": mix.total_len_max, "workload.input_len_mean": mix.input_len_mean,
            "workload.output_len_mean": mix.output_len_mean,
            "workload.prefill_step_tokens_max": mix.input_len_max + decode_rows_max}


def check_request(request: RequestRecord, target) -> NodeLayout:
    """Request-level consistency that no recipe could fix; the request's node layout."""
    check_speculation(request)
    shortest = min(c.input_len for c in request.lengths.classes)
    if request.shared_prefix_len >= shortest:
        raise RequestError(f"--shared-prefix-len {request.shared_prefix_len} (request field shared_prefix_len): the "
                           f"shared prefix is part of each prompt, so it must be shorter than the shortest input "
                           f"({shortest} tokens); give at most {shortest - 1}, or longer inputs")
    pd_layout(request, target)  # a PD plan's layout is one instance's: on one node, or its DP ranks across nodes
    layout = node_layout(request, target)
    if request.variant and request.variant not in {v.id for v in target.variants}:
        known = ", ".join(v.id for v in target.variants) or "none"
        raise RequestError(f"--variant {request.variant!r} is not a variant of {target.id} (known: {known})")
    return layout


DRAFTED = ("eagle3", "dflash")
"""The speculative methods that draft with a separate model (``--draft-model``, the --speculative-config model)."""


def check_speculation(request: RequestRecord) -> None:
    """The speculative decoding a request asks for is one whole method: k and a draft model only with a method
    that takes them, eagle3 and dflash with their draft model, suffix decoding without async scheduling."""
    method = request.speculative_method
    if request.num_speculative_tokens is not None and not method:
        raise RequestError("--num-speculative-tokens needs --mtp or --spec-method (speculative decoding is off)")
    if request.draft_model and method not in DRAFTED:
        raise RequestError(f"--draft-model {request.draft_model} is the draft model of --spec-method eagle3 or "
                           f"dflash (speculative decoding is {method or 'off'}); drop it, or give one of them")
    if method == "eagle3" and not request.draft_model:
        raise RequestError("--spec-method eagle3 drafts with an EAGLE-3 model trained for the target: give "
                           "--draft-model HF_ID_OR_PATH (the --speculative-config model, e.g. "
                           "lightseekorg/kimi-k2.5-eagle3 on vllm-ascend 0.30.0rc2's Kimi-K2.5.md:150)")
    if method == "dflash" and not request.draft_model:
        raise RequestError("--spec-method dflash drafts with a DFlash model trained for the target: give "
                           "--draft-model HF_ID_OR_PATH (the --speculative-config model, e.g. z-lab/Kimi-K2.5-DFlash "
                           "on vllm-ascend 0.30.0rc2's Kimi-K2.6.md:185)")
    if method == "suffix" and request.async_scheduling:
        raise RequestError("--spec-method suffix runs without async scheduling: vLLM turns it off for suffix "
                           "decoding (only EAGLE/MTP, draft-model and ngram_gpu methods keep it; vllm/config/vllm.py:"
                           "957-978 in vLLM 0.23.0, :1450-1458 in 0.30.0); add --no-async-scheduling")


def _served(request: RequestRecord, model, weights):
    """The weights the plan serves (``weights``, decided by ``plan.request_weights``); a caller without them (a test
    of facts alone) gets those ``served_weights`` gives: MODEL naming one of ``model``'s checkpoints, else the
    profile's checkpoint of the format."""
    from optkit.resolve.quantization import served_weights

    if weights is None:
        named = next((c for c in model.checkpoints or () if request.model and c.id.lower() == request.model.lower()),
                     None)
        weights = served_weights(request, model, named)
    return weights


def default_ep(model, page_ep: str) -> bool:
    """Expert parallelism when the request does not say (``--ep``/``--no-ep``): as the model's own page runs it
    for the plan's layout (``page.expert_parallel``: its row's EP column or its command's flag), else on for a
    MoE model (the article's setup)."""
    return model.is_moe and page_ep != "off"


def compute_facts(request: RequestRecord, model, target, release=None, weights=None) -> Facts:
    """Every fact in ``optkit.catalog.factspec.FACTS`` for this request, on ``release`` (an
    ``optkit.versions.onrelease.ReleaseView``; default: the data of the requested version), serving ``weights``
    (``optkit.resolve.quantization.Weights``, as the plan decided them). Fields the
    request leaves open (``--dp auto``, no ``--[no-]flashcomm1``) read as their defaults: ``plan`` fills them
    in by the catalog's rules first (``optkit.resolve.choices.choose``)."""
    from optkit.resolve.choices import at_defaults
    from optkit.resolve.quantization import check_method, dspark_weights, quantization_method

    request = at_defaults(request)  # fields left open read as their defaults; plan() fills them by rule first
    layout = check_request(request, target)
    served = _served(request, model, weights)
    check_decode_context_parallel(model, request.tp, request.dcp or 1)
    if release is None:
        from pathlib import Path

        from optkit.versions.onrelease import release_view

        release = release_view(ascend_version(request), Path(request.tree) if request.tree else None)
    ascend = ascend_version(request, release)
    check_method(served, ascend)
    pcp = request.pcp or 1
    vllm = parse_version(request.vllm_version, "--vllm-version") if request.vllm_version else paired_vllm(release)
    # the page's command of exactly this layout, where the page runs one (PageAdvice.for_layout)
    page = plan_advice(model, target, ascend, request.objective_goal).for_layout(
        request.tp, request.dp, layout.nodes, request.max_model_len, request.weight_format, pcp,
        request.speculative_method, request.pp or 1).facts()
    ep = request.ep if request.ep is not None else default_ep(model, page["page.expert_parallel"])
    check_prefill_context_parallel(request, model, target, ascend)
    check_pipeline_parallel(request, model, layout.nodes)
    check_engram(request, model, ascend)
    check_sharding(model, request.tp, request.dp, ep, pcp)
    sizes = decode_rows_at_load(request)
    rows = max(sizes)
    values: dict[str, Any] = {**target.facts(request.variant), **model.facts()}
    values.update({
        "parallel.tp": request.tp,
        "parallel.dp": request.dp,
        "parallel.ep": ep,
        "parallel.ep_size": request.tp * pcp * request.dp if ep else 1,
        "parallel.context_parallel": request.context_parallel or (request.dcp or 1) > 1 or pcp > 1,
        "parallel.dcp": request.dcp or 1,
        "parallel.pcp": pcp,
        "parallel.pp": request.pp or 1,
        "parallel.flashcomm1": request.flashcomm1,
        "parallel.cards": ceil(request.tp * pcp * (request.pp or 1) * request.dp / target.dies_per_card),
        "parallel.nodes": layout.nodes,
        "parallel.node_devices": layout.node_devices,
        "parallel.layout": layout.kind,
        "versions.vllm_ascend": ascend,
        "versions.vllm": vllm,
        "versions.native_architecture": native_architecture(model.architecture, str(vllm), str(ascend))[0],
        "runtime.dtype": request.dtype,
        "runtime.quantization": request.weight_format,
        "runtime.quantized": request.quantized,
        "runtime.quantization_method": quantization_method(served),
        "runtime.kv_cache_quantized": kv_cache_quantized(request.weight_format),
        "runtime.enforce_eager": request.enforce_eager,
        "runtime.lora": request.lora,
        "workload.concurrency": list(request.concurrency),
        "workload.concurrency_max": max(request.concurrency),
        "workload.input_len": request.input_len,
        "workload.output_len": request.output_len,
        "workload.greedy": request.sampling == "greedy",
        "workload.logprobs": request.logprobs,
        "workload.penalties": request.penalties,
        "workload.min_tokens": request.min_tokens,
        "workload.structured_output": request.structured_output,
        "workload.prefix_caching": request.prefix_caching,
        "workload.shared_prefix_len": request.shared_prefix_len,
        "workload.async_scheduling": request.async_scheduling,
        "workload.decode_rows": sizes,
        "workload.decode_rows_max": rows,
        "workload.decode_rows_per_rank_max": ceil(rows / request.tp),
        **length_facts(request, rows),
        **objective_facts(request),
        "spec.mtp": request.mtp,
        "spec.method": request.speculative_method or "none",
        "spec.speculative": request.speculative_method is not None,
        "spec.draft_model": request.draft_model or "",
        "spec.dspark_weights": dspark_weights(served, model),
        "spec.num_speculative_tokens": request.k,
        # vLLM keeps async scheduling with EAGLE/MTP drafters (use_async_spec_decode: async and k > 0); suffix
        # decoding runs without it (check_speculation)
        "spec.async_spec_decode": request.speculative_method is not None and request.async_scheduling,
    })
    values.update(page)
    missing = sorted(set(FACTS) - set(values))
    if missing:
        from optkit.errors import InternalError

        raise InternalError(f"facts without a value: {', '.join(missing)}")
    return Facts({name: values[name] for name in sorted(values)})
