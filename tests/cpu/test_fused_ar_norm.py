"""op-matmul-allreduce-add-rmsnorm-910c on CPU: the Python side of the fused o_proj epilogue.

Loads ``vllm_ascend/ops/fused_ar_norm.py`` from the patched tree (torch only) and checks its guard,
its unfused reference with two simulated TP ranks (``all_reduce`` = the sum of both ranks' partial
matmuls), and the call the wrapper makes. The kernel spec's reference
(``tests/kernels/reference_ar_norm.py``, tolerances from
``kernels/matmul-allreduce-add-rmsnorm-910c/kernel.yaml``) is the independent side. The operator
itself is not in this repo; nothing here runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from optkit.catalog.paths import project_root  # noqa: E402
from optkit.catalog.kernels import load_kernel  # noqa: E402
from patched_tree import load_module, patched_tree  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPE = "op-matmul-allreduce-add-rmsnorm-910c"
HELPER = "vllm_ascend/ops/fused_ar_norm.py"
KERNEL = project_root() / "kernels" / "matmul-allreduce-add-rmsnorm-910c"
TOL = load_kernel(KERNEL)[0].reference.tolerances["two_ranks_vs_single_device"]


OP = object()  # stands for the registered operator: the guard only passes it through


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return patched_tree(tmp_path_factory.mktemp("fused-ar-norm"), [RECIPE])


@pytest.fixture(scope="module")
def fused(tree):
    return load_module(tree / HELPER)


@pytest.fixture(scope="module")
def kernel_ref():
    return load_module(project_root() / "tests" / "kernels" / "reference_ar_norm.py")


def guard(fused, **overrides):
    args = {"enabled": True, "op": OP, "tp_size": 2, "dtype": torch.bfloat16, "hidden_size": 2048, "num_rows": 8}
    return fused.select_fused_op(**{**args, **overrides})


@pytest.mark.parametrize(("overrides", "takes_op"), [
    pytest.param({}, True, id="decode-bs8"),
    pytest.param({"num_rows": 1}, True, id="decode-bs1"),
    pytest.param({"num_rows": 40}, True, id="mtp-bs8-k4"),
    pytest.param({"num_rows": None}, True, id="rows-checked-per-step"),
    pytest.param({"num_rows": 41}, False, id="41-rows"),
    pytest.param({"num_rows": 512}, False, id="prefill"),
    pytest.param({"tp_size": 4}, False, id="tp4"),
    pytest.param({"tp_size": 1}, False, id="tp1"),
    pytest.param({"dtype": torch.float16}, False, id="fp16"),
    pytest.param({"dtype": torch.int8}, False, id="quantized-weight"),
    pytest.param({"hidden_size": 5120}, False, id="hidden-5120"),
    pytest.param({"enabled": False}, False, id="switch-off"),
    pytest.param({"op": None}, False, id="op-not-built"),
])
def test_guard(fused, overrides, takes_op):
    assert guard(fused, **overrides) is (OP if takes_op else None)


def test_symbolic_row_count_defers_to_the_op(fused):
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    rows = ShapeEnv().create_unbacked_symint()
    assert fused.rows_supported(rows) and guard(fused, num_rows=rows) is OP


@pytest.mark.parametrize("m", [1, 8, 40, 41, 64])
@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("hidden", [2048, 5120])
def test_guard_agrees_with_the_kernel_contract(fused, kernel_ref, m, tp, dtype, hidden):
    taken = guard(fused, num_rows=m, tp_size=tp, dtype=dtype, hidden_size=hidden) is OP
    assert taken == kernel_ref.supported(m, tp, dtype, hidden)


def two_rank_outputs(fused, inputs, ranks: int = 2):
    """Run the patched reference on every simulated rank; all_reduce sums the ranks' partials."""
    x_shards = inputs["x_full"].chunk(ranks, dim=-1)
    # vLLM stores o_proj as [N, K]; row parallelism gives each rank a slice of K.
    w_shards = [w.t() for w in inputs["w_full"].chunk(ranks, dim=0)]
    partials = [x @ w.t() for x, w in zip(x_shards, w_shards)]

    def all_reduce(local):
        assert any(local is p or torch.equal(local, p) for p in partials)
        return torch.stack([p.float() for p in partials]).sum(0).to(local.dtype)

    return [fused.reference_o_proj_all_reduce_add_rms_norm(x, w, inputs["residual"], inputs["gamma"], inputs["eps"],
                                                           all_reduce)
            for x, w in zip(x_shards, w_shards)]


@pytest.mark.parametrize("m", [1, 5, 8, 20, 40])
@pytest.mark.parametrize("seed", [0, 1])
def test_two_ranks_equal_one_device(fused, kernel_ref, m, seed):
    inputs = kernel_ref.make_inputs(m, seed=seed)
    outputs = two_rank_outputs(fused, inputs)
    for other in outputs[1:]:  # both ranks must hold the same result
        assert all(torch.equal(a, b) for a, b in zip(outputs[0], other))
    for want in (kernel_ref.single_device(**inputs),
                 kernel_ref.unfused_rank_path(kernel_ref.shard(inputs["x_full"], inputs["w_full"]),
                                              inputs["residual"], inputs["gamma"], inputs["eps"])):
        for actual, expected in zip(outputs[0], want):
            assert actual.dtype == torch.bfloat16
            torch.testing.assert_close(actual.float(), expected.float(), atol=TOL.atol, rtol=TOL.rtol)


def test_fp32_two_ranks_equal_the_layer_math(fused):
    gen = torch.Generator().manual_seed(7)
    m, k, n, eps = 6, 64, 32, 1e-6
    x, w = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen) / 8
    residual, gamma = torch.randn(m, n, generator=gen), 1.0 + 0.1 * torch.randn(n, generator=gen)
    outputs = two_rank_outputs(fused, {"x_full": x, "w_full": w.t(), "residual": residual, "gamma": gamma, "eps": eps})
    h = x @ w.t() + residual  # the layer without TP: o_proj, residual add, then Gemma RMSNorm(1 + w)
    normed = torch.nn.functional.rms_norm(h, (n,), weight=gamma, eps=eps)
    for out, new_residual in outputs:
        torch.testing.assert_close(new_residual, h, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out, normed, atol=1e-5, rtol=1e-5)


class RecordingOp:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)
        return "output", "add_out"


def test_wrapper_calls_the_op_with_the_spec_schema(fused):
    op = RecordingOp()
    o_proj = nn.Linear(16, 8, bias=False)
    norm = nn.Module()
    norm.weight, norm.variance_epsilon = nn.Parameter(torch.randn(8)), 1e-6
    wrapper = fused.FusedOProjArNorm(op, o_proj, norm, "hccl-tp", tp_rank=1, tp_size=2)
    attn_output, residual = torch.randn(3, 16), torch.randn(3, 8)

    assert wrapper(attn_output, residual) == ("output", "add_out")

    x, weight, res, gamma, group, size, rank, eps = op.calls[0]
    assert x is attn_output and res is residual
    assert weight.shape == (16, 8) and weight.data_ptr() == o_proj.weight.data_ptr()  # [K, N] view, no copy
    assert torch.equal(gamma, 1.0 + norm.weight)
    assert (group, size, rank, eps) == ("hccl-tp", 2, 1, 1e-6)


def test_wrapper_reads_weights_at_call_time(fused):
    op = RecordingOp()
    o_proj, norm = nn.Linear(4, 2, bias=False), nn.Module()
    norm.weight, norm.variance_epsilon = nn.Parameter(torch.zeros(2)), 1e-6
    wrapper = fused.FusedOProjArNorm(op, o_proj, norm, "g", tp_rank=0, tp_size=2)
    o_proj.weight = nn.Parameter(torch.ones(2, 4))  # e.g. replaced by process_weights_after_loading
    wrapper(torch.zeros(1, 4), torch.zeros(1, 2))
    assert op.calls[0][1].data_ptr() == o_proj.weight.data_ptr()


@pytest.mark.parametrize(("rows", "accepted"), [(1, True), (40, True), (41, False), (2048, False)])
def test_wrapper_accepts_only_supported_row_counts(fused, rows, accepted):
    wrapper = fused.FusedOProjArNorm(RecordingOp(), nn.Linear(4, 2), nn.Module(), "g", tp_rank=0, tp_size=2)
    assert wrapper.accepts(torch.empty(rows, 4)) is accepted
