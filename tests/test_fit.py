"""Fit before launch (optkit.resolve.fit, optkit.resolve.weights): the parameter count against the model cards,
the fewest nodes against the tutorials' hardware tables (tests/fit_cases.yaml), the plan's refusal and its changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from optkit.errors import RequestError
from optkit.resolve.fit import DEFAULT_UTILIZATION, FitInputs, fewest_nodes, gdn_state_bytes, kv_bytes_per_token, measure
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.resolve.weights import count_parameters

CASES = yaml.safe_load((Path(__file__).parent / "fit_cases.yaml").read_text())
A3_OR_A2 = {"910c": "a3", "910b": "a2"}


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


NOT_CROSS_CHECKED: dict[str, str] = {}
"""Profiles whose architecture the profile cannot express in full: their count is not held to params_b (none since
Qwen3.8-Flash-Next's n-gram tables are counted, ``ngram_embedding_params``)."""
LOOSER: dict[str, float] = {}
"""Profiles whose count is held to params_b more loosely than 3 %, with why (none since DeepSeek-V4's low-rank
attention is counted from its ranks: V4-Flash 290.8 B against 284, V4-Pro 1598.4 B against 1600)."""
VISION_TOWERS = {"internvl3_5-38b": 0.15}
"""Vision models whose tower is more than a tenth of the card's total: InternVL3.5-38B's InternViT-6B beside its
32.8 B Qwen3-32B language model (the name's 38 B)."""


def test_the_count_is_within_a_few_percent_of_params_b_for_every_catalog_profile(workspace):
    counted = {mid: count_parameters(m) for mid, m in workspace.models.items() if m.params_b}
    assert counted, "no catalog profile states params_b"
    for mid, count in sorted(counted.items()):
        model = workspace.models[mid]
        if count is None:  # MLA: weighed from params_b itself, nothing to cross-check
            assert model.kv_lora_rank, f"{mid}: only MLA profiles are weighed from params_b"
            continue
        if mid in NOT_CROSS_CHECKED:
            continue
        # the text count includes the MTP layers, which model cards leave out of their rounded totals; a vision
        # model's card counts its vision tower too, which the text count leaves out
        # n-gram embedding tables sit in params_b and outside the transformer's count
        ratio = (count.text + (model.ngram_embedding_params or 0)) / (model.params_b * 1e9) - 1
        low = -VISION_TOWERS.get(mid, 0.10) if model.is_vl else -LOOSER.get(mid, 0.03)
        assert low < ratio < LOOSER.get(mid, 0.03), f"{mid}: {count.text / 1e9:.2f} B against params_b {model.params_b}"


def _case_id(case) -> str:
    return f"{case['model']}-{case['quantization']}-{case['target']}"


@pytest.mark.parametrize("case", CASES["cases"], ids=_case_id)
def test_fewest_nodes_agrees_with_the_page(case, workspace):
    load = CASES["pages"][case["page"]][A3_OR_A2[case["target"]]]
    model, target = workspace.models[case["model"]], workspace.targets[case["target"]]
    assert any(c.quantization == case["quantization"] for c in model.checkpoints), \
        f"{case['page']}:{case['line']}: the profile lists no {case['quantization']} checkpoint"
    inputs = FitInputs(tp=1, dp=1, ep=True, quantization=case["quantization"], seqs=1,
                       tokens=load["max_model_len"], max_model_len=load["max_model_len"],
                       hccl_buffsize_mb=load["hccl_buffsize_mb"], spec_tokens=load["spec_tokens"],
                       utilization=load.get("utilization", DEFAULT_UTILIZATION))
    found = fewest_nodes(model, target, inputs)
    assert found is not None
    expected = case.get("optkit_nodes", case["nodes"])
    assert found[0] == expected, f"{case['page']}:{case['line']}: optkit {found}, page {case['nodes']} nodes"
    if "optkit_nodes" in case:
        assert case["optkit_nodes"] != case["nodes"] and case["why"].strip()


def test_the_kv_cache_follows_the_attention_kind(workspace):
    m = workspace.models["qwen3.5-397b-a17b"]
    # 15 full-attention layers, 2 KV heads of 256: one head per rank from TP 2 up (replicated beyond 2)
    assert kv_bytes_per_token(m, 2, "bf16", 0) == 15 * 2 * 1 * 256 * 2
    assert kv_bytes_per_token(m, 16, "bf16", 0) == kv_bytes_per_token(m, 2, "bf16", 0)
    assert kv_bytes_per_token(m, 1, "bf16", 0) == 2 * kv_bytes_per_token(m, 2, "bf16", 0)
    assert kv_bytes_per_token(m, 2, "w8a8c8", 0) == kv_bytes_per_token(m, 2, "bf16", 0) / 2  # int8 KV cache
    assert kv_bytes_per_token(m, 2, "bf16", 3) == 16 / 15 * kv_bytes_per_token(m, 2, "bf16", 0)  # the MTP layer
    assert kv_bytes_per_token(m, 2, "bf16", 0, cp=2) == kv_bytes_per_token(m, 2, "bf16", 0) / 2
    # the plan's --kv-cache-dtype over the weight format: 8-bit kinds one byte, 16-bit ones two
    for said in ("int8", "fp8", "fp8_e4m3"):
        assert kv_bytes_per_token(m, 2, "bf16", 0, kv_cache_dtype=said) == kv_bytes_per_token(m, 2, "w8a8c8", 0)
    assert kv_bytes_per_token(m, 2, "w8a8c8", 0, kv_cache_dtype="bfloat16") == kv_bytes_per_token(m, 2, "bf16", 0)
    assert kv_bytes_per_token(m, 2, "w8a8c8", 0, kv_cache_dtype="auto") == kv_bytes_per_token(m, 2, "w8a8c8", 0)
    # Gated DeltaNet state per sequence (45 layers): conv (2·16 + 64)·128/TP × 3, recurrent 64/TP × 128 × 128, bf16
    assert gdn_state_bytes(m, 8, 0) == 45 * ((2 * 16 + 64) * 128 / 8 * 3 + 8 * 128 * 128) * 2


def test_a_load_beyond_the_cache_is_reported_not_refused(workspace):
    m, a3 = workspace.models["qwen3.5-35b-a3b"], workspace.targets["910c"]
    small = measure(m, a3, FitInputs(2, 1, True, "bf16", 8, 1536, 262144))
    big = measure(m, a3, FitInputs(2, 1, True, "bf16", 256, 262144, 262144))
    assert small.fits and small.holds_load and small.weights_gib == big.weights_gib
    assert big.fits and not big.holds_load  # vLLM starts and queues what the cache cannot hold
    assert big.load_seqs_max == big.max_seqs_at_max_len and 1 <= big.load_seqs_max < 256
    assert big.line().endswith(f"; the load's 256 sequences per DP engine do not all fit, {big.load_seqs_max} do at "
                               f"once (vLLM queues or preempts the rest; --concurrency {big.load_seqs_max} would fit)")


def test_a_plan_at_a_load_beyond_the_cache_is_planned_and_says_so(workspace):
    result = plan(Request(model="qwen3.5-35b", target="910c", concurrency=[1024], goal="throughput"), workspace)
    assert result.fit.fits and not result.fit.holds_load
    assert "do not all fit" in result.fit.line()


@pytest.mark.parametrize("fields, changes", [
    # BF16 on one A3 node: the page asks for two (Qwen3.5-397B-A17B.md:27); the W8A8 checkpoint fits one (:28), and
    # so does the BF16 weights' KV for one sequence of the workload's length instead of the page's 133000 tokens
    (dict(tp=16), ["--quantization w8a8 (the checkpoint Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp, vllm-ascend 0.30.0rc2 "
                   "docs/source/tutorials/models/Qwen3.5-397B-A17B.md:28)",
                   "--max-model-len 2048 (the workload's longest request is 1536 tokens; the server's --max-model-len "
                   "is 133000)",
                   "--dp 2 --nodes 2 (more DP ranks spread the experts)"]),
    # half a node: neither W8A8 nor TP 16 alone is enough for BF16 weights; the W4A8 checkpoint (:29) or four
    # times the ranks are
    (dict(tp=8), ["--quantization w4a8 (the checkpoint Eco-Tech/Qwen3.5-397B-A17B-w4a8-mtp, vllm-ascend 0.30.0rc2 "
                  "docs/source/tutorials/models/Qwen3.5-397B-A17B.md:29)",
                  "--dp 4 --nodes 2 (more DP ranks spread the experts)"]),
], ids=["tp16-bf16", "tp8-bf16"])
def test_a_plan_that_does_not_fit_is_refused_with_the_smallest_changes(fields, changes, workspace):
    with pytest.raises(RequestError) as caught:
        plan(Request(model="qwen3.5-397b", target="910c", **fields), workspace)
    text = str(caught.value)
    assert text.startswith(f"qwen3.5-397b-a17b does not fit 910c at TP {fields['tp']} × DP 1: Fit per device:")
    assert text.endswith("Smallest changes first: " + "; ".join(changes))


def test_a_plan_that_fits_carries_its_fit(workspace):
    result = plan(Request(model="qwen3.5-35b", target="910c"), workspace)
    assert result.fit.fits and result.fit.inputs.tp == 2 and result.fit.inputs.quantization == "bf16"
    assert result.fit.line().startswith("Fit per device: weights ")


def test_the_fit_reads_the_plans_kv_cache_dtype(workspace):
    from optkit.resolve.fit import plan_fit_inputs
    from optkit.resolve.settings import Setting

    result = plan(Request(model="qwen3.5-35b", target="910c"), workspace)
    assert plan_fit_inputs(result).kv_cache_dtype == ""
    result.serve_args.append(Setting("--kv-cache-dtype int8", None, "page:X.md:1"))
    inputs = plan_fit_inputs(result)
    assert inputs.kv_cache_dtype == "int8"
    a3 = workspace.targets["910c"]
    assert measure(result.model, a3, inputs).kv_gib < result.fit.kv_gib


GPT_OSS = dict(model="gpt-oss-120b", target="910b", tp=4, concurrency=[4], vllm_ascend_version="0.30.0rc2")
"""gpt-oss-120b.md:117 (vllm-ascend 0.30.0rc2): TP 4 with expert parallelism, bf16, 4 sequences of 4096 tokens, on an
A2 or A3 node: its 54.4 GiB of weights leave less than optkit's assumed activation reserve of a 57.6 GiB budget."""


def test_the_page_running_the_plans_layout_bounds_the_activation_reserve(workspace):
    from optkit.resolve.fit import ACTIVATION_RESERVE_GIB

    result = plan(Request(**GPT_OSS), workspace)
    fit = result.fit
    assert fit.fits and fit.holds_load
    assert 0 < fit.inputs.activation_gib < ACTIVATION_RESERVE_GIB
    assert "gpt-oss-120b.md:117 (vllm-ascend 0.30.0rc2)" in fit.line() and "its 4 sequences" in fit.line()
    # what the page proves: its budget holds weights, HCCL buffers, its KV cache and this much activation
    i = fit.inputs
    assert fit.weights_gib + fit.reserve_gib + fit.kv_gib <= fit.budget_gib + 1e-9
    assert fit.reserve_gib == pytest.approx(i.activation_gib + 2 * 2 * 512 / 1024)  # TP and EP groups, 512 MB


@pytest.mark.parametrize("change", [
    dict(tp=2),  # another layout: the page proves nothing for it
    dict(goal="throughput", set_values="max-num-batched-tokens=8192"),  # a larger step than the page's 4096
])
def test_the_page_is_evidence_only_for_its_own_layout_and_step(change, workspace):
    with pytest.raises(RequestError) as caught:
        plan(Request(**{**GPT_OSS, **change}), workspace)
    assert "does not fit" in str(caught.value) and "optkit's assumed 6 GiB" in str(caught.value)


def test_page_evidence_needs_the_same_weights_and_context_parallelism(workspace):
    from optkit.resolve.fit import page_evidence, plan_fit_inputs
    from optkit.value import replace

    result = plan(Request(**GPT_OSS), workspace)
    inputs = replace(plan_fit_inputs(result), activation_gib=6.0, activation_basis="")
    bound, basis = page_evidence(result, inputs)
    assert 0 < bound < 6 and "gpt-oss-120b.md:117" in basis
    assert page_evidence(result, replace(inputs, quantization="w8a8")) is None  # the page serves bf16 weights
    assert page_evidence(result, replace(inputs, cp=2)) is None  # the page splits no sequence's KV cache


def test_a_page_whose_layout_optkit_cannot_hold_names_the_contradiction(workspace, monkeypatch):
    """Where even no activation reserve leaves the page's own command without room, the profile's figures
    contradict the page: the refusal says so instead of bending the reserve."""
    import optkit.resolve.weights as weights

    real = weights.weight_bytes_per_device
    monkeypatch.setattr("optkit.resolve.fit.weight_bytes_per_device",
                        lambda *a: (real(*a)[0] * 1.2, real(*a)[1]))
    with pytest.raises(RequestError) as caught:
        plan(Request(**GPT_OSS), workspace)
    text = str(caught.value)
    assert "Note: the model's page runs this layout and weights at gpt-oss-120b.md:117" in text
    assert "likely over-counted" in text and "HCCL buffers and KV cache" in text


def test_an_mla_profile_without_params_b_is_weighed_from_its_other_shapes_as_a_lower_bound(workspace):
    """Before, DeepSeek-V3.1, GLM-5.3-Flash, Kimi-K3 and Dots3 Note planned with 0 GiB of weights. Everything but the
    MLA attention is counted now, and said to be a lower bound: below params_b where a profile of the same
    architecture states it (DeepSeek-V3.2's 671 B), and Kimi-K3's latent MoE at its 3584-wide expert input."""
    from optkit.resolve.weights import count_without_attention, weight_bytes_per_device

    for mid in ("deepseek-v3.1", "glm-5.3-flash", "kimi-k3", "dots3-note-prev"):
        model = workspace.models[mid]
        assert model.kv_lora_rank and not model.params_b
        held, how = weight_bytes_per_device(model, "bf16", 16, 16)
        assert held > 0 and how.endswith("a lower bound") and how.startswith("at least ")
    v32 = workspace.models["deepseek-v3.2"]
    assert count_without_attention(workspace.models["deepseek-v3.1"]).text <= 1.001 * v32.params_b * 1e9
    kimi = workspace.models["kimi-k3"]
    latent = count_without_attention(kimi).experts
    assert latent == pytest.approx(kimi.num_experts * 3 * 3584 * kimi.moe_intermediate_size * (kimi.num_layers - 1))


def test_the_dots3_note_bound_is_below_the_weights_its_page_measured(workspace):
    """Dots3-Note.md (0.30.0rc2 :227): 36.26 GB of weights per worker at TP 16 with EP, text-only."""
    from optkit.resolve.weights import weight_bytes_per_device

    held, _ = weight_bytes_per_device(workspace.models["dots3-note-prev"], "bf16", 16, 16)
    assert 0.85 * 36.26e9 < held < 36.26e9


def test_n_gram_tables_are_in_host_memory_not_the_vision_tower(workspace):
    """Qwen3.8-Flash-Next.md (0.30.0rc2 :29, :128): the W8A8 checkpoint runs on one A3 node at TP 8. Its 51.2 B
    n-gram table was counted as a 53 B vision tower held on every device (113 GiB each), refusing the page's
    command; vLLM keeps the table in pinned host memory by default (EngramConfig.cpu_offload)."""
    from optkit.resolve.weights import weight_bytes_per_device

    model = workspace.models["qwen3.8-flash-next"]
    assert model.ngram_embedding_params == 1 * 20_000_000 * 2560  # ple_layer_ids [2], base rows, ple_embed_dim
    count = count_parameters(model)
    assert 0 < count.vision < 2e9 and "n-gram tables" in count.note
    held, how = weight_bytes_per_device(model, "w8a8", 8, 8)
    assert held < 20 * 2 ** 30 and "pinned host memory" in how
    fit = plan(Request(model="qwen3.8-flash-next", target="910c", tp=8, quantization="w8a8", mtp=True,
                       max_model_len=135168), workspace).fit
    assert fit.fits, fit
