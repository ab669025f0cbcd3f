"""The rebuilt ops on a real Ascend NPU against the CPU references (skipped elsewhere, with the reason).

Needs torch_npu, a visible NPU and a vllm-ascend 0.23.0 tree built with the kernel patches
(`build_command` of each kernels/<id>/kernel.yaml). Tolerances: reference.tolerances.npu_vs_reference.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.npu

torch = pytest.importorskip("torch")
try:
    import torch_npu  # noqa: F401
except ImportError:
    pytest.skip("torch_npu is not importable: no Ascend stack on this machine", allow_module_level=True)
if not torch.npu.is_available() or torch.npu.device_count() == 0:
    pytest.skip("torch_npu is installed but no NPU is visible", allow_module_level=True)

from optkit.catalog.paths import project_root  # noqa: E402
from optkit.catalog.kernels import load_kernel  # noqa: E402
from reference_ar_norm import make_inputs as ar_norm_inputs  # noqa: E402
from reference_ar_norm import shard, single_device  # noqa: E402
from reference_gdn import fused_path, l2norm_fwd, make_inputs, upstream_path  # noqa: E402

GDN_TOL = load_kernel(project_root() / "kernels" / "gdn-l2norm-recurrent")[0].reference.tolerances
AR_TOL = load_kernel(project_root() / "kernels" / "matmul-allreduce-add-rmsnorm-910c")[0].reference.tolerances
AR_OP = "matmul_allreduce_add_rmsnorm_910c"


def _custom_ops():
    from vllm_ascend.utils import enable_custom_op

    if not enable_custom_op():
        pytest.skip("vllm-ascend's custom ops (vllm_ascend_C) did not load")
    return torch.ops._C_ascend


def _gdn_op():
    op = _custom_ops().npu_recurrent_gated_delta_rule
    if "use_qk_l2norm_in_kernel" not in [a.name for a in op.default._schema.arguments]:
        pytest.skip("npu_recurrent_gated_delta_rule has no use_qk_l2norm_in_kernel: op not built with the patch")
    return op


def _run_gdn(op, inputs, normalise_in_kernel):
    state = inputs["state"].npu()
    out = op(
        query=inputs["query"].npu(), key=inputs["key"].npu(), value=inputs["value"].npu(), state=state,
        beta=inputs["beta"].npu(), scale=inputs["scale"], g=inputs["g"].npu(),
        # the op takes [start offset, len_0, len_1, ...]
        actual_seq_lengths=torch.cat([torch.zeros(1, dtype=torch.int32), inputs["seq_lengths"]]).npu(),
        ssm_state_indices=inputs["ssm_state_indices"].npu(),
        num_accepted_tokens=None if inputs["num_accepted_tokens"] is None else inputs["num_accepted_tokens"].npu(),
        use_qk_l2norm_in_kernel=normalise_in_kernel,
    )
    return out.cpu(), state.cpu()


def _close(actual, expected, tolerance):
    torch.testing.assert_close(actual.float(), expected.float(), atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.parametrize("batch,tokens", [(1, 1), (8, 1), (2, 5), (8, 5)], ids=["b1", "b8", "mtp-b2", "mtp-b8"])
@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16], ids=["fp32-state", "bf16-state"])
def test_recurrent_gated_delta_rule_l2norm_in_kernel(batch, tokens, state_dtype):
    op = _gdn_op()
    inputs = make_inputs(batch, tokens, state_dtype=state_dtype, seed=11, mtp_accepted=tokens > 1, state_scale=1.0)
    out, state = _run_gdn(op, inputs, normalise_in_kernel=True)
    want_out, want_state = fused_path(**inputs)
    _close(out, want_out, GDN_TOL["npu_vs_reference"])
    _close(state, want_state, GDN_TOL["npu_vs_reference"])
    # and against today's path on the device: l2norm_fwd semantics on the host, op without the flag
    pre = dict(inputs, query=l2norm_fwd(inputs["query"]), key=l2norm_fwd(inputs["key"]))
    old_out, old_state = _run_gdn(op, pre, normalise_in_kernel=False)
    _close(out, old_out, GDN_TOL["fused_vs_prenormalised_out"])
    _close(state, old_state, GDN_TOL["fused_vs_prenormalised_state"])
    _close(old_out, upstream_path(**inputs)[0], GDN_TOL["npu_vs_reference"])


def _ar_norm_rank(rank, world, m, port):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.npu.set_device(rank)
    dist.init_process_group(backend="hccl", rank=rank, world_size=world)
    group = dist.new_group(backend="hccl", ranks=list(range(world)))
    comm = group._get_backend(torch.device("npu")).get_hccl_comm_name(rank)
    inputs = ar_norm_inputs(m, seed=m)
    x, w = shard(inputs["x_full"], inputs["w_full"], world)[rank]
    normed, new_residual = getattr(_custom_ops(), AR_OP)(
        x.npu(), w.npu(), inputs["residual"].npu(), inputs["gamma"].npu(), comm, world, rank, inputs["eps"])
    dist.destroy_process_group()
    want = single_device(**inputs)
    _close(normed.cpu(), want[0], AR_TOL["npu_vs_reference"])
    _close(new_residual.cpu(), want[1], AR_TOL["npu_vs_reference"])


@pytest.mark.parametrize("m", [1, 8, 40])
def test_matmul_allreduce_add_rmsnorm_910c(m):
    if not hasattr(_custom_ops(), AR_OP):
        pytest.skip(f"torch.ops._C_ascend.{AR_OP} is not registered: op not built (its source is not in this repo)")
    if torch.npu.device_count() < 2:
        pytest.skip("needs the two dies of one 910C card (2 visible NPUs)")
    import torch.multiprocessing as mp

    mp.spawn(_ar_norm_rank, args=(2, m, 29500 + m), nprocs=2, join=True)
