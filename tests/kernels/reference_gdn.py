"""CPU (torch) reference of ``npu_recurrent_gated_delta_rule``, with and without q/k L2 norm.

The step is the one of vLLM 0.23.0's FLA kernel
``vllm/model_executor/layers/fla/ops/fused_recurrent.py:122-149`` (load q/k/v as fp32, optional
in-kernel ``q / sqrt(sum(q*q) + 1e-6)`` at :127-129, ``q *= scale``, ``h *= exp(g)``,
``v -= h @ k``, ``v *= beta``, ``h += v ⊗ k``, ``o = h @ q``), laid out as the Ascend op takes
its arguments — q/k ``[T, NK, DK]``, v ``[T, NV, DV]``, state ``[S, NV, DV, DK]``, g/beta
``[T, NV]``, one state slot per token, the initial slot chosen through ``num_accepted_tokens``
for MTP — as in vllm-ascend 0.23.0's golden
``tests/e2e/nightly/single_node/ops/singlecard_ops/test_recurrent_gated_delta_rule.py:17-80``.
Like the AscendC kernel, the state stays fp32 across the tokens of one sequence and is rounded to
the state dtype only when stored per token; the output is rounded to bf16.

``l2norm_fwd`` is vLLM 0.23.0's default path (``fla/ops/l2norm.py:78-92``
``l2norm_fwd_kernel2``, selected at :114 unless USE_DEFAULT_FLA_NORM): fp32
``x * rsqrt(sum(x*x) + eps)``, stored in the input dtype (bf16). ``l2norm_in_kernel`` is the
patched Ascend kernel's form: ``x / sqrt(sum(x*x) + eps)`` on the fp32 values, never rounded.
"""

from __future__ import annotations

import torch

L2NORM_EPS = 1e-6


def l2norm_fwd(x: torch.Tensor, eps: float = L2NORM_EPS) -> torch.Tensor:
    """vLLM's ``l2norm_fwd`` over the last dim: computed in fp32, returned in ``x.dtype``."""
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + eps)).to(x.dtype)


def l2norm_in_kernel(x: torch.Tensor, eps: float = L2NORM_EPS) -> torch.Tensor:
    """The patched kernel's normalisation of fp32 rows: ``x / sqrt(sum(x*x) + eps)``, kept fp32."""
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def recurrent_gated_delta_rule(query, key, value, state, beta, scale, seq_lengths, ssm_state_indices,
                               g=None, num_accepted_tokens=None, use_qk_l2norm_in_kernel=False):
    """The op's math on CPU: returns ``(out [T, NV, DV] bf16, new state)``; ``state`` is not changed.

    ``seq_lengths`` are the per-sequence token counts (the op's ``actual_seq_lengths`` minus its
    leading start offset); ``ssm_state_indices[t]`` is the state slot token ``t`` writes.
    """
    q, k, v = query.float(), key.float(), value.float()
    if use_qk_l2norm_in_kernel:
        q, k = l2norm_in_kernel(q), l2norm_in_kernel(k)
    q = q * scale
    n_v, n_k = v.shape[1], q.shape[1]
    q, k = q.repeat_interleave(n_v // n_k, dim=1), k.repeat_interleave(n_v // n_k, dim=1)
    decay = torch.ones(v.shape[:2]) if g is None else g.float().exp()
    beta = torch.ones(v.shape[:2]) if beta is None else beta.float()
    new_state, out = state.clone(), torch.empty(v.shape)
    start = 0
    for i, length in enumerate(int(n) for n in seq_lengths):
        first = start + (int(num_accepted_tokens[i]) - 1 if num_accepted_tokens is not None else 0)
        h = state[int(ssm_state_indices[first])].float()  # [NV, DV, DK]
        for t in range(start, start + length):
            h = h * decay[t][:, None, None]
            delta = (v[t] - (h * k[t][:, None, :]).sum(-1)) * beta[t][:, None]
            h = h + delta[:, :, None] * k[t][:, None, :]
            out[t] = (h * q[t][:, None, :]).sum(-1)
            new_state[int(ssm_state_indices[t])] = h.to(state.dtype)
        start += length
    return out.to(torch.bfloat16), new_state


def upstream_path(query, key, *args, **kwargs):
    """Today's decode path: ``l2norm_fwd`` on q and k (bf16 out), then the op without the flag."""
    return recurrent_gated_delta_rule(l2norm_fwd(query), l2norm_fwd(key), *args, **kwargs)


def fused_path(query, key, *args, **kwargs):
    """The recipe's path: raw q and k, normalised by the op (``use_qk_l2norm_in_kernel=True``)."""
    return recurrent_gated_delta_rule(query, key, *args, use_qk_l2norm_in_kernel=True, **kwargs)


def make_inputs(batch: int, tokens_per_seq: int, n_k: int = 8, n_v: int = 16, d_k: int = 128, d_v: int = 128,
                state_dtype=torch.float32, seed: int = 0, mtp_accepted: bool = False, state_scale: float = 0.1) -> dict:
    """Decode-step inputs shaped like Qwen3.5-35B-A3B's GDN layers at TP2 (16 value, 8 key heads).

    q/k/v are raw bf16 projections (unit-variance), ``g`` a negative log decay, ``beta`` a
    sigmoid in (0, 1), the state a bounded running value. Returns keyword arguments of
    ``recurrent_gated_delta_rule`` without ``use_qk_l2norm_in_kernel``.
    """
    gen = torch.Generator().manual_seed(seed)
    tokens = batch * tokens_per_seq
    slots = torch.randperm(tokens + 4, generator=gen)[:tokens].to(torch.int32)
    accepted = torch.randint(1, tokens_per_seq + 1, (batch,), generator=gen, dtype=torch.int32)
    return {
        "query": torch.randn(tokens, n_k, d_k, generator=gen).to(torch.bfloat16),
        "key": torch.randn(tokens, n_k, d_k, generator=gen).to(torch.bfloat16),
        "value": torch.randn(tokens, n_v, d_v, generator=gen).to(torch.bfloat16),
        "state": (state_scale * torch.randn(tokens + 4, n_v, d_v, d_k, generator=gen)).to(state_dtype),
        "beta": torch.sigmoid(torch.randn(tokens, n_v, generator=gen)).to(torch.bfloat16),
        "scale": d_k ** -0.5,
        "seq_lengths": torch.full((batch,), tokens_per_seq, dtype=torch.int32),
        "ssm_state_indices": slots,
        "g": -torch.nn.functional.softplus(torch.randn(tokens, n_v, generator=gen)),
        "num_accepted_tokens": accepted if mtp_accepted else None,
    }
