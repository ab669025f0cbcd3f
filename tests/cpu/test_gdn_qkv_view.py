"""gdn-rearrange-qkv-view: the patched tree's gdn_qkv_view.py and its wiring, on CPU.

Each release range's patch runs on its tree: 0.23.0 (post1 has the same gdn.py and
patch_qwen3_5.py) and 0.30.0rc2. gdn_qkv_view.py imports only torch and is loaded by path.
ops/gdn.py and patch_qwen3_5.py import vLLM and torch_npu, so the new
AscendGatedDeltaNetAttention.rearrange_mixed_qkv and the two patch_qwen3_5 lines that install it are
taken out of the patched files with ``ast`` and run on a stand-in for vLLM's
QwenGatedDeltaNetAttention whose rearrange_mixed_qkv is the reference: vLLM's own method, taken
with ``ast`` from the sdist of the vLLM release the tree pairs with (0.23.0, 0.30.0).
"""

from __future__ import annotations

import ast
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from patched_tree import load_module, patched_tree  # noqa: E402
from optkit.tree.fetch import fetch  # noqa: E402
from optkit.versions.releases import load_release  # noqa: E402

pytestmark = [pytest.mark.tree]

RELEASES = ["0.23.0", "0.30.0rc2"]
GDN = "vllm_ascend/ops/gdn.py"
PATCH_QWEN3_5 = "vllm_ascend/patch/worker/patch_qwen3_5.py"
VLLM_GDN = "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py"


def method(path, class_name: str, name: str, namespace: dict):
    """The method ``class_name.name`` defined in ``path``, executed alone in ``namespace``."""
    module = ast.parse(path.read_text(encoding="utf-8"), str(path))
    cls = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    node = next(n for n in cls.body if getattr(n, "name", None) == name)
    namespace = dict(namespace)
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


@pytest.fixture(scope="module", params=RELEASES)
def release(request):
    return request.param


@pytest.fixture(scope="module")
def reference(release):
    """QwenGatedDeltaNetAttention.rearrange_mixed_qkv of the vLLM release that ``release`` pairs with."""
    vllm = fetch(load_release(release).vllm.value, package="vllm").path
    return method(vllm / VLLM_GDN, "QwenGatedDeltaNetAttention", "rearrange_mixed_qkv", {"torch": torch})


@pytest.fixture(scope="module")
def tree(release, tmp_path_factory):
    return patched_tree(tmp_path_factory.mktemp(f"gdn-qkv-view-{release}"), ["gdn-rearrange-qkv-view"], release)


@pytest.fixture(scope="module")
def views(tree):
    return load_module(tree / "vllm_ascend" / "ops" / "gdn_qkv_view.py").single_token_qkv_views


@pytest.fixture(scope="module")
def layer_class(tree, views, reference):
    """vLLM's class after patch_qwen3_5: the Ascend rearrange_mixed_qkv installed over vLLM's."""
    ascend_method = method(tree / GDN, "AscendGatedDeltaNetAttention", "rearrange_mixed_qkv",
                           {"torch": torch, "single_token_qkv_views": views})

    class QwenGatedDeltaNetAttention:  # stand-in for vLLM's class, the patch target
        rearrange_mixed_qkv = reference

    installs = [node for node in ast.walk(ast.parse((tree / PATCH_QWEN3_5).read_text(encoding="utf-8")))
                if isinstance(node, ast.Assign) and "rearrange_mixed_qkv" in ast.unparse(node.targets[0])]
    assert len(installs) == 2, [ast.unparse(n) for n in installs]
    ascend = SimpleNamespace(rearrange_mixed_qkv=ascend_method)
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


def test_one_token_gives_contiguous_views_equal_to_the_copy(views, layer_class, reference):
    obj = layer(layer_class)
    mixed_qkv = torch.randn(1, qkv_width(obj))
    got = views(mixed_qkv, [obj.key_dim // 2, obj.key_dim // 2, obj.value_dim // 2], obj.head_k_dim, obj.head_v_dim)
    want = reference(obj, mixed_qkv)
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
        layer_class, reference, seq_len, tp_size, num_k_heads, v_per_k, head_k_dim, head_v_dim):
    obj = layer(layer_class, tp_size=tp_size, num_k_heads=num_k_heads, num_v_heads=num_k_heads * v_per_k,
                head_k_dim=head_k_dim, head_v_dim=head_v_dim)
    mixed_qkv = torch.randn(seq_len, qkv_width(obj))
    got = obj.rearrange_mixed_qkv(mixed_qkv)
    want = reference(obj, mixed_qkv)
    for g, w in zip(got, want):
        assert g.shape == w.shape and torch.equal(g, w) and g.is_contiguous()
        aliases = g.untyped_storage().data_ptr() == mixed_qkv.untyped_storage().data_ptr()
        assert aliases == (seq_len == 1)  # views only for one token, vLLM's fresh copy otherwise


def test_patched_method_passes_none_through(layer_class):
    assert layer(layer_class).rearrange_mixed_qkv(None) == (None, None, None)
