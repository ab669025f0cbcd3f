"""The fused AR-norm contract on CPU: two simulated TP ranks against one device, and the shape guard.

Tolerances come from kernels/matmul-allreduce-add-rmsnorm-910c/kernel.yaml. The op itself is not in
this repo (source-missing); only the math it and its fall-back must reproduce is checked.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from optkit.catalog.paths import project_root  # noqa: E402
from optkit.catalog.kernels import load_kernel  # noqa: E402
from reference_ar_norm import (add_rms_norm, make_inputs, shard, single_device, supported,  # noqa: E402
                               unfused_rank_path)

TOL = load_kernel(project_root() / "kernels" / "matmul-allreduce-add-rmsnorm-910c")[0].reference.tolerances


@pytest.mark.parametrize("m", [1, 5, 8, 20, 40])
@pytest.mark.parametrize("seed", [0, 1])
def test_two_ranks_match_one_device(m, seed):
    inputs = make_inputs(m, seed=seed)
    want = single_device(**inputs)
    got = unfused_rank_path(shard(inputs["x_full"], inputs["w_full"]), inputs["residual"], inputs["gamma"],
                            inputs["eps"])
    tolerance = TOL["two_ranks_vs_single_device"]
    for name, actual, expected in zip(("normed", "new_residual"), got, want):
        assert actual.dtype == torch.bfloat16, name
        torch.testing.assert_close(actual.float(), expected.float(), atol=tolerance.atol, rtol=tolerance.rtol,
                                   msg=lambda text, name=name: f"{name}: {text}")


def test_shards_split_k_and_cover_it():
    inputs = make_inputs(8)
    shards = shard(inputs["x_full"], inputs["w_full"])
    assert [(x.shape, w.shape) for x, w in shards] == [((8, 2048), (2048, 2048))] * 2
    assert torch.equal(torch.cat([x for x, _ in shards], -1), inputs["x_full"])


def test_norm_is_torch_rms_norm_times_one_plus_w():
    inputs = make_inputs(5, seed=3)
    x = (inputs["x_full"].float() @ inputs["w_full"].float()).to(torch.bfloat16)
    normed, new_residual = add_rms_norm(x, inputs["residual"], inputs["gamma"], inputs["eps"])
    h = x.float() + inputs["residual"].float()
    want = torch.nn.functional.rms_norm(h, (h.shape[-1],), weight=inputs["gamma"], eps=inputs["eps"])
    torch.testing.assert_close(normed, want.to(torch.bfloat16), atol=0, rtol=0)
    assert torch.equal(new_residual, h.to(torch.bfloat16))


@pytest.mark.parametrize("m,tp,dtype,hidden,expected", [
    pytest.param(40, 2, torch.bfloat16, 2048, True, id="mtp-bs8-k4"),
    pytest.param(1, 2, torch.bfloat16, 2048, True, id="decode-bs1"),
    pytest.param(41, 2, torch.bfloat16, 2048, False, id="too-many-rows"),
    pytest.param(8, 4, torch.bfloat16, 2048, False, id="tp4"),
    pytest.param(8, 2, torch.float16, 2048, False, id="fp16"),
    pytest.param(8, 2, torch.bfloat16, 5120, False, id="hidden-5120"),
])
def test_shape_guard(m, tp, dtype, hidden, expected):
    assert supported(m, tp, dtype, hidden) is expected
