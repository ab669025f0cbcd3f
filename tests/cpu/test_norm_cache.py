"""norm-gemma-weight-plus-one-cache on CPU: the cached 1 + weight of the patched tree.

Loads ``vllm_ascend/ops/weight_plus_one.py`` and the ``AscendGemmaRMSNorm`` class of the patched
``ops/layernorm.py`` (on a two-line port of vLLM's ``GemmaRMSNorm.__init__`` and of
``default_weight_loader``, weight_utils.py:1384-1398) and checks the cache against the uncached
``1.0 + weight`` after every kind of weight write a running server sees.

Graph capture: a captured ACL graph reads the cached tensor by address and replays without Python,
so a refresh must write into the same storage; the tests check ``data_ptr`` is unchanged wherever
the old tensor could have been captured. Dynamo tracing is simulated by patching
``torch.compiler.is_compiling``; the NPU kernels and real graph replay are not exercised here.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402

from patched_tree import load_defs, load_module, patched_tree  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPE = "norm-gemma-weight-plus-one-cache"
HELPER = "vllm_ascend/ops/weight_plus_one.py"
LAYERNORM = "vllm_ascend/ops/layernorm.py"
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


class GemmaRMSNormPort(nn.Module):
    """vLLM 0.23.0 GemmaRMSNorm.__init__ (layers/layernorm.py:147-154), without CustomOp dispatch."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(hidden_size))
        self.variance_epsilon = eps


def default_weight_loader_port(param: torch.Tensor, loaded_weight: torch.Tensor) -> None:
    """vLLM 0.23.0 default_weight_loader: a copy through param.data, which leaves _version alone."""
    assert param.size() == loaded_weight.size()
    param.data.copy_(loaded_weight)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return patched_tree(tmp_path_factory.mktemp("norm-cache"), [RECIPE])


@pytest.fixture(scope="module")
def cache(tree):
    return load_module(tree / HELPER)


@pytest.fixture(scope="module")
def norm_cls(tree, cache):
    fakes = {"torch": torch, "GemmaRMSNorm": GemmaRMSNormPort, "default_weight_loader": default_weight_loader_port,
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
