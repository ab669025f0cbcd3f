"""Numerics of the L2-norm-in-kernel change on CPU: reference_gdn against itself and vllm-ascend's golden.

Tolerances come from kernels/gdn-l2norm-recurrent/kernel.yaml (reference.tolerances). Case (c) of
the kernel spec, the article's c8 regression, is a speed question and has no test here.
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from optkit.catalog.paths import project_root  # noqa: E402
from optkit.catalog.kernels import load_kernel  # noqa: E402
from reference_gdn import (fused_path, l2norm_fwd, l2norm_in_kernel, make_inputs,  # noqa: E402
                           recurrent_gated_delta_rule, upstream_path)
from ub_budget import host_tiling, kernel_ub_bytes  # noqa: E402

TOL = load_kernel(project_root() / "kernels" / "gdn-l2norm-recurrent")[0].reference.tolerances
BF16_ROUNDING = {"atol": 1e-3, "rtol": 1.6e-2}  # vLLM 0.23.0's bf16 op tolerance (vllm/ir/tolerances.py:23)

CASES = [pytest.param(b, n, sd, scale, id=f"b{b}-t{n}-{str(sd)[6:]}-s{scale}")
         for b, n, sd, scale in itertools.product([1, 4, 8], [1, 5], [torch.float32, torch.bfloat16], [0.1, 1.0])]


def close(actual, expected, tolerance):
    torch.testing.assert_close(actual.float(), expected.float(), atol=tolerance.atol, rtol=tolerance.rtol)


def golden(query, key, value, state, beta, scale, seq_lengths, ssm_state_indices, g, num_accepted_tokens):
    """vllm-ascend 0.23.0's golden (tests/e2e/nightly/single_node/ops/singlecard_ops/
    test_recurrent_gated_delta_rule.py:17-80), one head and one token at a time, state kept in fp32."""
    q, k, v = query.float() * scale, key.float(), value.float()
    states = state.clone().float()
    n_v, n_k = v.shape[1], q.shape[1]
    out = torch.empty(v.shape)
    start = 0
    for i, length in enumerate(int(n) for n in seq_lengths):
        first = start + (int(num_accepted_tokens[i]) - 1 if num_accepted_tokens is not None else 0)
        init = states[int(ssm_state_indices[first])].clone()
        for head in range(n_v):
            s = init[head]
            for t in range(start, start + length):
                kh = head // (n_v // n_k)
                s = s * g[t][head].float().exp()
                y = (v[t][head] - (s * k[t][kh].unsqueeze(-2)).sum(-1)) * beta[t][head].float()
                s = s + y[:, None] * k[t][kh][None, :]
                states[int(ssm_state_indices[t])][head] = s
                out[t][head] = (s * q[t][kh].unsqueeze(-2)).sum(-1)
        start += length
    return out.to(torch.bfloat16), states.to(state.dtype)


@pytest.mark.parametrize("batch,tokens", [(1, 1), (3, 1), (2, 5)], ids=["decode-b1", "decode-b3", "mtp-b2"])
def test_reference_matches_vllm_ascend_golden(batch, tokens):
    inputs = make_inputs(batch, tokens, n_k=2, n_v=4, d_k=32, d_v=16, seed=7, mtp_accepted=tokens > 1)
    inputs["query"], inputs["key"] = l2norm_fwd(inputs["query"]), l2norm_fwd(inputs["key"])
    out, state = recurrent_gated_delta_rule(**inputs)
    want_out, want_state = golden(**inputs)
    torch.testing.assert_close(out.float(), want_out.float(), **BF16_ROUNDING)
    torch.testing.assert_close(state, want_state, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("batch,tokens,state_dtype,state_scale", CASES)
def test_in_kernel_norm_matches_prenormalised(batch, tokens, state_dtype, state_scale):
    inputs = make_inputs(batch, tokens, state_dtype=state_dtype, seed=batch + tokens, mtp_accepted=tokens > 1,
                         state_scale=state_scale)
    want_out, want_state = upstream_path(**inputs)
    out, state = fused_path(**inputs)
    close(out, want_out, TOL["fused_vs_prenormalised_out"])
    close(state, want_state, TOL["fused_vs_prenormalised_state"])


def test_in_kernel_norm_is_not_bit_identical():
    """fp32 after the Cast vs l2norm_fwd's bf16 rounding: equal within tolerance, not bitwise."""
    inputs = make_inputs(4, 1, seed=1)
    assert not torch.equal(fused_path(**inputs)[0], upstream_path(**inputs)[0])


@pytest.mark.parametrize("tokens", [1, 5], ids=["decode", "mtp"])
def test_double_normalisation_is_only_wasted_work(tokens):
    inputs = make_inputs(4, tokens, seed=3, mtp_accepted=tokens > 1, state_scale=1.0)
    inputs["query"], inputs["key"] = l2norm_fwd(inputs["query"]), l2norm_fwd(inputs["key"])
    once_out, once_state = recurrent_gated_delta_rule(**inputs)
    twice_out, twice_state = recurrent_gated_delta_rule(**inputs, use_qk_l2norm_in_kernel=True)
    close(twice_out, once_out, TOL["double_normalisation"])
    close(twice_state, once_state, TOL["double_normalisation"])


def test_l2norm_is_idempotent():
    x = make_inputs(8, 5, seed=5)["query"].float()
    once = l2norm_in_kernel(x)
    close(l2norm_in_kernel(once), once, TOL["idempotence_fp32"])


def test_zero_rows_stay_zero():
    x = torch.zeros(3, 128)
    assert torch.equal(l2norm_in_kernel(x), x)
    assert torch.equal(l2norm_fwd(x.to(torch.bfloat16)).float(), x)


def test_l2norm_fwd_is_the_kernel_norm_rounded_to_bf16():
    x = make_inputs(8, 1, seed=9)["key"]
    torch.testing.assert_close(l2norm_fwd(x).float(), l2norm_in_kernel(x.float()), **BF16_ROUNDING)


UB_SHAPES = [pytest.param(nv, dk, sb, id=f"nv{nv}-dk{dk}-state{8 * sb}")
             for nv, dk, sb in itertools.product([8, 16, 32, 64], [64, 128, 256], [4, 2])]


@pytest.mark.parametrize("nv,dk,state_bytes", UB_SHAPES)
@pytest.mark.parametrize("use_l2norm", [False, True], ids=["plain", "l2norm"])
def test_kernel_buffers_fit_the_host_budget(nv, dk, state_bytes, use_l2norm):
    tiling = host_tiling(nv, dk, dk, state_bytes, use_l2norm)
    assert tiling is not None
    queues, carved = kernel_ub_bytes(nv, dk, dk, state_bytes, use_l2norm, tiling)
    assert carved <= tiling.ub_rest_bytes, "tmpBuff is too small for what InitLocalBuffers carves out of it"
    assert queues + tiling.ub_rest_bytes <= 196608 - 128, "queues + tmpBuff exceed the UB"


@pytest.mark.parametrize("nv", [8, 16, 32])
@pytest.mark.parametrize("state_bytes", [4, 2], ids=["fp32-state", "bf16-state"])
def test_l2norm_buffer_leaves_the_v_tile_alone_at_qwen35_shapes(nv, state_bytes):
    plain, fused = host_tiling(nv, 128, 128, state_bytes, False), host_tiling(nv, 128, 128, state_bytes, True)
    assert (fused.v_step, fused.repeat, fused.state_out_buffers, fused.attn_out_buffers) == \
        (plain.v_step, plain.repeat, plain.state_out_buffers, plain.attn_out_buffers)
