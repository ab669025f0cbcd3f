"""gdn-rearrange-qkv-view: the patched tree's gdn_qkv_view.py and its wiring, on CPU.

gdn_qkv_view.py imports only torch and is loaded by path. ops/gdn.py and patch_qwen3_5.py import
vLLM and torch_npu, so the new AscendGatedDeltaNetAttention.rearrange_mixed_qkv and the two
patch_qwen3_5 lines that install it are taken out of the patched files with ``ast`` and run on a
stand-in for vLLM's QwenGatedDeltaNetAttention whose rearrange_mixed_qkv is the reference below.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support

from compat_support import scratch_tree, specs  # noqa: E402
from optkit.tree.apply import apply  # noqa: E402

pytestmark = [pytest.mark.tree]

GDN = "vllm_ascend/ops/gdn.py"
PATCH_QWEN3_5 = "vllm_ascend/patch/worker/patch_qwen3_5.py"


def reference_rearrange_mixed_qkv(self, mixed_qkv):
    """vLLM 0.23.0 QwenGatedDeltaNetAttention.rearrange_mixed_qkv
    (vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:808-842), ported verbatim."""
    if mixed_qkv is None:
        return None, None, None
    seq_len = mixed_qkv.shape[0]
    q_dim = self.key_dim // self.tp_size
    k_dim = self.key_dim // self.tp_size
    v_dim = self.value_dim // self.tp_size
    query, key, value = torch.split(mixed_qkv, [q_dim, k_dim, v_dim], dim=-1)
    fused = torch.cat([query.reshape(-1), key.reshape(-1), value.reshape(-1)], dim=0)
    q_size = seq_len * q_dim
    k_size = seq_len * k_dim
    q_contig = fused[0:q_size]
    k_contig = fused[q_size : q_size + k_size]
    v_contig = fused[q_size + k_size :]
    query = q_contig.view(1, seq_len, -1, self.head_k_dim)
    key = k_contig.view(1, seq_len, -1, self.head_k_dim)
    value = v_contig.view(1, seq_len, -1, self.head_v_dim)
    return query, key, value


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = scratch_tree(tmp_path_factory.mktemp("gdn-qkv-view"))
    apply(root, specs(["gdn-rearrange-qkv-view"]))
    return root


@pytest.fixture(scope="module")
def views(tree):
    path = tree / "vllm_ascend" / "ops" / "gdn_qkv_view.py"
    spec = importlib.util.spec_from_file_location("gdn_qkv_view", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.single_token_qkv_views


@pytest.fixture(scope="module")
def layer_class(tree, views):
    """vLLM's class after patch_qwen3_5: the Ascend rearrange_mixed_qkv installed over the reference."""
    gdn = ast.parse((tree / GDN).read_text(encoding="utf-8"))
    ascend_cls = next(n for n in gdn.body if isinstance(n, ast.ClassDef) and n.name == "AscendGatedDeltaNetAttention")
    method = next(n for n in ascend_cls.body if getattr(n, "name", None) == "rearrange_mixed_qkv")
    namespace = {"torch": torch, "single_token_qkv_views": views}
    exec(compile(ast.Module(body=[method], type_ignores=[]), GDN, "exec"), namespace)

    class QwenGatedDeltaNetAttention:  # stand-in for vLLM's class, the patch target
        rearrange_mixed_qkv = reference_rearrange_mixed_qkv

    installs = [node for node in ast.walk(ast.parse((tree / PATCH_QWEN3_5).read_text(encoding="utf-8")))
                if isinstance(node, ast.Assign) and "rearrange_mixed_qkv" in ast.unparse(node.targets[0])]
    assert len(installs) == 2, [ast.unparse(n) for n in installs]
    ascend = SimpleNamespace(rearrange_mixed_qkv=namespace["rearrange_mixed_qkv"])
    exec(compile(ast.Module(body=installs, type_ignores=[]), PATCH_QWEN3_5, "exec"),
         {"_GDN_PATCH_TARGET": QwenGatedDeltaNetAttention, "AscendGatedDeltaNetAttention": ascend})
    return QwenGatedDeltaNetAttention


def layer(cls, *, tp_size=2, num_k_heads=4, num_v_heads=8, head_k_dim=16, head_v_dim=8):
    obj = cls()
    obj.tp_size, obj.head_k_dim, obj.head_v_dim = tp_size, head_k_dim, head_v_dim
    obj.key_dim, obj.value_dim = num_k_heads * head_k_dim, num_v_heads * head_v_dim
    return obj


def qkv_width(obj) -> int:
    return (2 * obj.key_dim + obj.value_dim) // obj.tp_size


def test_one_token_gives_contiguous_views_equal_to_the_copy(views, layer_class):
    obj = layer(layer_class)
    mixed_qkv = torch.randn(1, qkv_width(obj))
    got = views(mixed_qkv, [obj.key_dim // 2, obj.key_dim // 2, obj.value_dim // 2], obj.head_k_dim, obj.head_v_dim)
    want = reference_rearrange_mixed_qkv(obj, mixed_qkv)
    for g, w in zip(got, want):
        assert g.shape == w.shape and torch.equal(g, w) and g.is_contiguous()
        assert g.untyped_storage().data_ptr() == mixed_qkv.untyped_storage().data_ptr()  # a view, no copy


def test_one_row_of_a_wider_tensor_still_gives_views(views):
    # mixed_qkv is often a column slice of the projection output (qkv beside z): one row is
    # contiguous along the last dimension even though the tensor is not contiguous as a whole.
    mixed_qkvz = torch.randn(1, 48 + 16)
    mixed_qkv = mixed_qkvz[:, :48]
    got = views(mixed_qkv, [16, 16, 16], 8, 8)
    assert got is not None and all(t.is_contiguous() for t in got)


def test_more_tokens_or_strided_columns_are_refused(views):
    assert views(torch.randn(2, 48), [16, 16, 16], 8, 8) is None
    query, _, _ = torch.split(torch.randn(2, 48), [16, 16, 16], dim=-1)
    assert not query.is_contiguous()  # why: rows of a block lie the full width apart
    assert views(torch.randn(1, 96)[:, ::2], [16, 16, 16], 8, 8) is None  # last-dim stride 2


@settings(max_examples=80, deadline=None)
@given(seq_len=st.integers(1, 6), tp_size=st.sampled_from([1, 2]), num_k_heads=st.sampled_from([2, 4]),
       v_per_k=st.sampled_from([1, 2]), head_k_dim=st.sampled_from([4, 8]), head_v_dim=st.sampled_from([4, 8]))
def test_patched_method_equals_vllm_and_falls_back_for_longer_inputs(
        layer_class, seq_len, tp_size, num_k_heads, v_per_k, head_k_dim, head_v_dim):
    obj = layer(layer_class, tp_size=tp_size, num_k_heads=num_k_heads, num_v_heads=num_k_heads * v_per_k,
                head_k_dim=head_k_dim, head_v_dim=head_v_dim)
    mixed_qkv = torch.randn(seq_len, qkv_width(obj))
    got = obj.rearrange_mixed_qkv(mixed_qkv)
    want = reference_rearrange_mixed_qkv(obj, mixed_qkv)
    for g, w in zip(got, want):
        assert g.shape == w.shape and torch.equal(g, w) and g.is_contiguous()
        aliases = g.untyped_storage().data_ptr() == mixed_qkv.untyped_storage().data_ptr()
        assert aliases == (seq_len == 1)  # views only for one token, vLLM's fresh copy otherwise


def test_patched_method_passes_none_through(layer_class):
    assert layer(layer_class).rearrange_mixed_qkv(None) == (None, None, None)
