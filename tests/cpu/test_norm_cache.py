"""norm-gemma-weight-plus-one-cache on CPU: the cached 1 + weight of the patched tree.

On each release the recipe has a patch for (0.23.0 and 0.30.0rc2; 0.23.0.post1's files are 0.23.0's),
loads ``vllm_ascend/ops/weight_plus_one.py`` and the ``AscendGemmaRMSNorm`` class of the patched
``ops/layernorm.py`` (on a two-line port of vLLM's ``GemmaRMSNorm.__init__``, the same in vLLM 0.23.0
and 0.30.0, and on ``default_weight_loader`` taken from the paired vLLM sdist) and checks the cache
against the uncached ``1.0 + weight`` after every kind of weight write a running server sees, and that
the Qwen3.5 attention patch passes the cached sums.

Graph capture: a captured ACL graph reads the cached tensor by address and replays without Python,
so a refresh must write into the same storage; the tests check ``data_ptr`` is unchanged wherever
the old tensor could have been captured. Dynamo tracing is simulated by patching
``torch.compiler.is_compiling``; the NPU kernels and real graph replay are not exercised here.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402

from patched_tree import load_defs, load_method, load_module, patched_tree  # noqa: E402  (puts tests/ on sys.path)

from optkit.tree.fetch import fetch  # noqa: E402
from optkit.versions.releases import load_release  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPE = "norm-gemma-weight-plus-one-cache"
HELPER = "vllm_ascend/ops/weight_plus_one.py"
LAYERNORM = "vllm_ascend/ops/layernorm.py"
PATCH_QWEN3_5 = "vllm_ascend/patch/worker/patch_qwen3_5.py"
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
VERSIONS = ["0.23.0", "0.30.0rc2"]


class GemmaRMSNormPort(nn.Module):
    """vLLM GemmaRMSNorm.__init__ (0.23.0 layers/layernorm.py:147-154, 0.30.0 :142-149), without CustomOp
    dispatch."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(hidden_size))
        self.variance_epsilon = eps


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tree(tmp_path_factory, version) -> Path:
    return patched_tree(tmp_path_factory.mktemp("norm-cache"), [RECIPE], version)


@pytest.fixture(scope="module")
def default_weight_loader(version):
    """vLLM's default_weight_loader from the sdist ``version`` pairs with: a copy through param.data,
    which leaves _version alone (0.23.0 model_loader/weight_utils.py:1384-1398, 0.30.0 :1244-1258)."""
    vllm = fetch(load_release(version).vllm.value, package="vllm").path
    return load_defs(vllm / "vllm/model_executor/model_loader/weight_utils.py", ["default_weight_loader"],
                     {"torch": torch})["default_weight_loader"]


@pytest.fixture(scope="module")
def cache(tree):
    return load_module(tree / HELPER)


@pytest.fixture(scope="module")
def norm_cls(tree, cache, default_weight_loader):
    fakes = {"torch": torch, "GemmaRMSNorm": GemmaRMSNormPort, "default_weight_loader": default_weight_loader,
             "get_weight_plus_one": cache.get_weight_plus_one, "refresh_weight_plus_one": cache.refresh_weight_plus_one}
    return load_defs(tree / LAYERNORM, ["AscendGemmaRMSNorm"], fakes)["AscendGemmaRMSNorm"]


def make_norm(norm_cls, values: torch.Tensor):
    norm = norm_cls(values.numel())
    norm.to(values.dtype)
    norm.weight.weight_loader(norm.weight, values)
    return norm


def plus_one(norm) -> torch.Tensor:
    """What the forward uses (vLLM runs forwards under inference_mode)."""
    with torch.inference_mode():
        return norm.weight_plus_one()


def expected(norm) -> torch.Tensor:
    return 1.0 + norm.weight.detach()


def assert_bitwise(actual: torch.Tensor, wanted: torch.Tensor) -> None:
    assert actual.dtype == wanted.dtype and actual.shape == wanted.shape
    assert torch.equal(actual, wanted)


@given(values=st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=64), dtype=st.sampled_from(DTYPES))
@settings(max_examples=100, deadline=None)
def test_equals_uncached_sum_bitwise(norm_cls, values, dtype):
    norm = make_norm(norm_cls, torch.tensor(values).to(dtype))
    assert_bitwise(plus_one(norm), expected(norm))


def test_unchanged_weight_is_not_recomputed(norm_cls):
    norm = make_norm(norm_cls, torch.randn(16, dtype=torch.bfloat16))
    assert plus_one(norm) is plus_one(norm)


def test_write_through_data_is_invisible_to_the_key_without_the_loader(norm_cls, cache):
    # Why the loader hook exists: param.data.copy_ changes neither data_ptr nor _version.
    norm = make_norm(norm_cls, torch.zeros(8))
    stale = plus_one(norm).clone()
    key = cache.weight_key(norm.weight)
    norm.weight.data.copy_(torch.arange(8.0))
    assert cache.weight_key(norm.weight) == key
    assert torch.equal(plus_one(norm), stale)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reload_through_weight_loader_refreshes_in_place(norm_cls, dtype):
    norm = make_norm(norm_cls, torch.zeros(8, dtype=dtype))
    cached = plus_one(norm)
    address = cached.data_ptr()
    norm.weight.weight_loader(norm.weight, torch.arange(8.0).to(dtype))  # outside inference mode
    assert_bitwise(cached, expected(norm))  # the tensor a captured graph holds now has the new values
    again = plus_one(norm)
    assert again.data_ptr() == address
    assert_bitwise(again, expected(norm))


def test_in_place_op_on_the_parameter_is_detected(norm_cls):
    norm = make_norm(norm_cls, torch.randn(8))
    cached = plus_one(norm)
    with torch.no_grad():
        norm.weight.mul_(3.0)
    fresh = plus_one(norm)
    assert_bitwise(fresh, expected(norm))
    assert fresh.data_ptr() == cached.data_ptr()


def test_rebinding_param_data_is_detected(norm_cls):
    norm = make_norm(norm_cls, torch.zeros(8))
    plus_one(norm)
    norm.weight.data = torch.full((8,), 2.0)
    assert_bitwise(plus_one(norm), expected(norm))


def test_cached_address_cannot_be_reused_while_cached(norm_cls):
    # Rebinding param.data keeps _version: were the first storage freed, a new tensor could get its
    # address and a rebind to it would reproduce the cached key exactly. The entry's alias keeps
    # that storage alive until the entry moves on to the new weight.
    norm = make_norm(norm_cls, torch.zeros(8))
    plus_one(norm)
    first_storage = weakref.ref(norm.weight.untyped_storage())
    norm.weight.data = torch.full((8,), 1.0)
    gc.collect()
    assert first_storage() is not None
    assert_bitwise(plus_one(norm), expected(norm))
    gc.collect()
    assert first_storage() is None


def test_replaced_parameter_is_detected(norm_cls):
    norm = make_norm(norm_cls, torch.zeros(8))
    plus_one(norm)
    norm.weight = nn.Parameter(torch.full((8,), 2.0))
    assert_bitwise(plus_one(norm), expected(norm))


def test_dtype_change_allocates_a_new_entry(norm_cls):
    norm = make_norm(norm_cls, torch.randn(8))
    plus_one(norm)
    norm.to(torch.bfloat16)
    assert_bitwise(plus_one(norm), expected(norm))


def test_vllm_layerwise_reload_sequence(norm_cls):
    """vLLM 0.23.0 reload_weights (model_loader/reload/layerwise.py), step by step on one norm."""
    norm = make_norm(norm_cls, torch.zeros(8))
    kernel_param = norm.weight
    cached = plus_one(norm)
    new_values = torch.arange(8.0)
    # restore_layer_on_meta: a meta copy (sharing the tensor's __dict__, so its weight_loader) replaces it.
    meta = nn.Parameter(kernel_param.data.to("meta"))
    meta.__dict__ = dict(kernel_param.__dict__)
    del norm.weight
    norm.register_parameter("weight", meta)
    # get_numel_loaded runs the loader on the meta parameter only to count copied elements.
    meta.weight_loader(meta, new_values)
    # _layerwise_process: materialize a temporary parameter, load into it with the original loader ...
    temp = nn.Parameter(torch.empty(8))
    temp.__dict__ = dict(meta.__dict__)
    setattr(norm, "weight", temp)
    temp.weight_loader(temp, new_values)
    # ... then _copy_and_restore_kernel_tensors: copy through .data into the kernel parameter, put it back.
    kernel_param.data.copy_(temp)
    del norm.weight
    norm.register_parameter("weight", kernel_param)
    assert_bitwise(cached, 1.0 + new_values)  # refreshed in place while the temporary was loaded
    after = plus_one(norm)
    assert after.data_ptr() == cached.data_ptr()
    assert_bitwise(after, 1.0 + new_values)


def test_meta_weight_refresh_is_a_no_op(norm_cls, cache):
    norm = make_norm(norm_cls, torch.zeros(4))
    cached = plus_one(norm).clone()
    norm.weight = nn.Parameter(torch.zeros(4, device="meta"))
    cache.refresh_weight_plus_one(norm)
    del norm.weight
    norm.weight = nn.Parameter(torch.zeros(4))
    assert torch.equal(plus_one(norm), cached)


def test_loader_refresh_outside_inference_mode_of_an_inference_entry(norm_cls):
    norm = make_norm(norm_cls, torch.zeros(4))
    assert plus_one(norm).is_inference()
    norm.weight.weight_loader(norm.weight, torch.ones(4))  # must not raise "Inplace update to inference tensor"
    assert_bitwise(plus_one(norm), expected(norm))


def test_dynamo_tracing_bypasses_the_cache(norm_cls, monkeypatch):
    norm = make_norm(norm_cls, torch.randn(8))
    cached = plus_one(norm)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    traced = plus_one(norm)
    assert traced is not cached
    assert_bitwise(traced, expected(norm))


def test_norm_weight_carries_the_refreshing_loader(norm_cls):
    norm = norm_cls(4)
    assert norm.weight.weight_loader == norm._weight_loader


class _Reached(Exception):
    """Raised by the fused q/k norm + rope stand-in: the test has what it needs."""


def test_qwen3_5_attention_passes_the_cached_sums(tree, norm_cls):
    """The patched AscendQwen3NextAttention.forward hands triton_split_qkv_rmsnorm_mrope the norms' cached
    1 + weight (the same tensors, not fresh sums) on its multimodal-rope branch."""
    seen = {}

    def fused(**kwargs):
        seen.update(kwargs)
        raise _Reached

    fake_torch = SimpleNamespace(ops=SimpleNamespace(vllm=SimpleNamespace(triton_split_qkv_rmsnorm_mrope=fused)))
    namespace = {"torch": fake_torch}
    source = (tree / PATCH_QWEN3_5).read_text(encoding="utf-8")
    if "def _uses_multimodal_rope" in source:  # 0.30: the branch is taken for Qwen3.5 with mrope_section
        namespace |= load_defs(tree / PATCH_QWEN3_5, ["_uses_multimodal_rope"], namespace)
    forward = load_method(tree / PATCH_QWEN3_5, "AscendQwen3NextAttention", "forward", namespace)
    q_norm, k_norm = (make_norm(norm_cls, torch.randn(8, generator=torch.Generator().manual_seed(s))) for s in (1, 2))
    qkv = torch.zeros(3, 8)
    attention = SimpleNamespace(
        qkv_proj=lambda hidden: (qkv, None), config=SimpleNamespace(model_type="qwen3_5_moe", rms_norm_eps=1e-6),
        rotary_emb=SimpleNamespace(cos_sin_cache=torch.zeros(16, 8), mrope_section=[2, 1, 1], mrope_interleaved=True,
                                   rotary_dim=8),
        q_norm=q_norm, k_norm=k_norm, num_heads=1, num_kv_heads=1, head_dim=8, attn_output_gate=True)
    positions = torch.zeros(3, 3, dtype=torch.int64)
    with pytest.raises(_Reached):
        forward(attention, positions=positions, hidden_states=qkv, output=torch.empty(3, 8))
    for name, norm in (("q_weight", q_norm), ("k_weight", k_norm)):
        assert torch.equal(seen[name], 1.0 + norm.weight.detach()), name
        assert seen[name] is plus_one(norm), f"{name} is not the cached tensor"
