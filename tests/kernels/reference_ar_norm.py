"""CPU (torch) reference of the fused o_proj matmul + AllReduce + residual add + RMSNorm(1 + w).

The contract is the one ``kernels/matmul-allreduce-add-rmsnorm-910c/kernel.yaml`` states: per rank
``x [M, K]`` (its shard of the attention output), ``w [K, N]`` (its o_proj/out_proj shard), and
``residual [M, N]``, ``gamma [N]`` (the Gemma norm weight already plus one, ``1 + w``, as the
article hands it over), ``eps`` shared; the op returns ``(normed, new_residual)``, both ``[M, N]``
bf16, identical on both ranks.

``unfused_rank_path`` simulates what the fused op replaces and what its C++ fall-back calls (matmul
per rank, rounded to bf16; ``vllm::all_reduce`` as a sum of the bf16 partials; then the add + norm).
The add + norm is vLLM 0.23.0's ``fused_add_rms_norm`` (``vllm/ir/ops/layernorm.py:40-58``: fp32
add, residual rounded to the input dtype, fp32 RMS, times the weight) with the fp32 weight
``1 + w`` that ``GemmaRMSNorm.forward_native`` passes (``vllm/model_executor/layers/layernorm.py:156-165``). ``single_device`` is the same layer without
tensor parallelism (one matmul over the full K).
"""

from __future__ import annotations

import torch

MAX_ROWS = 40  # MTP batch 8 × (4 + 1): the op's row limit
HIDDEN = 2048
TP = 2


def add_rms_norm(x, residual, gamma, eps):
    """``fused_add_rms_norm(x, residual, gamma, eps)`` → ``(normed, new_residual)`` in x.dtype."""
    h = x.float() + residual.float()
    new_residual = h.to(x.dtype)
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * gamma.float()).to(x.dtype), new_residual


def single_device(x_full, w_full, residual, gamma, eps):
    """No tensor parallelism: one bf16 matmul over the full K, then add + norm."""
    return add_rms_norm((x_full.float() @ w_full.float()).to(x_full.dtype), residual, gamma, eps)


def shard(x_full, w_full, ranks: int = TP):
    """Row-parallel split: rank r gets columns r of x and the matching rows of w (split K)."""
    return list(zip(x_full.chunk(ranks, dim=-1), w_full.chunk(ranks, dim=0)))


def unfused_rank_path(shards, residual, gamma, eps):
    """Per-rank bf16 partial matmuls, all-reduce (sum of the bf16 partials), then add + norm."""
    partials = [(x.float() @ w.float()).to(x.dtype) for x, w in shards]
    reduced = torch.stack([p.float() for p in partials]).sum(0).to(partials[0].dtype)
    return add_rms_norm(reduced, residual, gamma, eps)


def supported(m: int, tp: int, dtype: torch.dtype, hidden: int) -> bool:
    """The shape guard both the Python wrapper and the op apply (else: unfused path)."""
    return m <= MAX_ROWS and tp == TP and dtype == torch.bfloat16 and hidden == HIDDEN


def make_inputs(m: int, k_full: int = 4096, n: int = HIDDEN, seed: int = 0) -> dict:
    """Inputs shaped like Qwen3.5-35B-A3B's o_proj at TP2 (K = 16 heads × 256 = 4096, N = 2048)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "x_full": torch.randn(m, k_full, generator=gen).to(torch.bfloat16),
        "w_full": (torch.randn(k_full, n, generator=gen) * k_full ** -0.5).to(torch.bfloat16),
        "residual": torch.randn(m, n, generator=gen).to(torch.bfloat16),
        "gamma": 1.0 + (0.1 * torch.randn(n, generator=gen)).to(torch.bfloat16).float(),  # 1 + w, fp32
        "eps": 1e-6,
    }
