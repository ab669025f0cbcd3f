"""gdn-conv-weight-transpose-cache: the patched tree's weight_transpose_cache.py on CPU.

The module imports only torch, so it is loaded from the patched 0.23.0 tree by path (post1 has the
same ops/gdn.py). The reference is what ops/gdn.py computed on every call before the patch:
``conv1d.weight.view(dim, width)`` transposed. The tests change the weight in each way vLLM does
(in place, by rebinding, through a weight loader, by the layerwise reload of
vllm/model_executor/model_loader/reload/) and check that the tensor handed out earlier (the one a
captured graph would read) holds the new values at once or, for the first two, from the next call
on. On 0.30.0rc2 the recipe is upstream (PR #15590): the last tests run that tree's own packed
conv weight (ops/gdn.py, with vLLM 0.30.0's replace_parameter from its sdist) against the same
reference.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support

from compat_support import pristine, scratch_tree, specs  # noqa: E402
from patched_tree import load_defs  # noqa: E402
from optkit.tree.apply import apply  # noqa: E402
from optkit.tree.fetch import fetch  # noqa: E402

pytestmark = [pytest.mark.tree]

DIM, WIDTH = 12, 4  # conv1d.weight is [conv_dim, 1, kernel_width]


@pytest.fixture(scope="module")
def cache_module(tmp_path_factory):
    tree = scratch_tree(tmp_path_factory.mktemp("gdn-cache"))
    apply(tree, specs(["gdn-conv-weight-transpose-cache"]))
    path = tree / "vllm_ascend" / "ops" / "weight_transpose_cache.py"
    spec = importlib.util.spec_from_file_location("weight_transpose_cache", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference(weight: torch.Tensor) -> torch.Tensor:
    """The per-call transpose ops/gdn.py made before the patch."""
    return weight.detach().view(weight.size(0), weight.size(2)).transpose(0, 1)


def conv_layer() -> torch.nn.Module:
    """A conv1d layer as vLLM builds it: a [dim, 1, width] parameter with a weight loader."""
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(torch.randn(DIM, 1, WIDTH), requires_grad=False)

    def loader(param: torch.nn.Parameter, loaded_weight: torch.Tensor) -> None:
        # Like mamba_v2_sharded_weight_loader: writes through param.data, bumping no version.
        param.data[...] = loaded_weight

    layer.weight.weight_loader = loader
    return layer


def test_copy_equals_the_per_call_transpose_and_is_made_once(cache_module):
    weight = conv_layer().weight
    first = cache_module.cached_transpose(weight)
    assert first.is_contiguous() and torch.equal(first, reference(weight))
    assert cache_module.cached_transpose(weight) is first


def test_gdn_view_of_the_copy_transposes_to_a_contiguous_tensor(cache_module):
    # ops/gdn.py: conv_weights = cached_transpose(w).transpose(0, 1); conv_weights_T = conv_weights.transpose(0, 1)
    weight = conv_layer().weight
    conv_weights = cache_module.cached_transpose(weight).transpose(0, 1)
    assert torch.equal(conv_weights, weight.detach().view(DIM, WIDTH))
    conv_weights_t = conv_weights.transpose(0, 1)
    assert conv_weights_t.is_contiguous() and torch.equal(conv_weights_t, reference(weight))


def test_in_place_update_is_seen_on_the_next_call_in_the_same_storage(cache_module):
    weight = conv_layer().weight
    handed_out = cache_module.cached_transpose(weight)
    with torch.no_grad():
        weight.copy_(torch.randn(DIM, 1, WIDTH))  # bumps weight._version
    again = cache_module.cached_transpose(weight)
    assert again.data_ptr() == handed_out.data_ptr() and torch.equal(handed_out, reference(weight))


def test_rebinding_is_seen_and_a_new_shape_gets_a_new_copy(cache_module):
    weight = conv_layer().weight
    handed_out = cache_module.cached_transpose(weight)
    weight.data = torch.randn(DIM, 1, WIDTH)
    assert cache_module.cached_transpose(weight) is handed_out and torch.equal(handed_out, reference(weight))
    weight.data = torch.randn(DIM + 4, 1, WIDTH)
    resized = cache_module.cached_transpose(weight)
    assert resized.shape == (WIDTH, DIM + 4) and torch.equal(resized, reference(weight))


def test_loader_write_through_data_refreshes_at_once(cache_module):
    weight = conv_layer().weight
    handed_out = cache_module.cached_transpose(weight)
    version = weight._version
    weight.weight_loader(weight, torch.randn(DIM, 1, WIDTH))
    assert weight._version == version  # the key alone could not see this write
    assert torch.equal(handed_out, reference(weight))  # no cached_transpose call in between


def test_wrapped_loader_keeps_the_signature_vllm_binds(cache_module):
    import inspect

    weight = conv_layer().weight
    original = weight.weight_loader
    cache_module.cached_transpose(weight)
    assert inspect.signature(weight.weight_loader) == inspect.signature(original)


def layerwise_reload(layer: torch.nn.Module, recorded: dict, new_weight: torch.Tensor, before_place=None) -> None:
    """vLLM's checkpoint-format reload of one layer (model_loader/reload/, vLLM 0.23.0), in short.

    meta.py restore_layer_on_meta + materialize_layer: a temporary parameter carrying the
    attributes recorded at model init; layerwise.py _layerwise_process: the original loader fills
    it; _copy_and_restore_kernel_tensors: param.data.copy_ into the kernel tensor; then
    _place_kernel_tensors registers the kernel tensor again.
    """
    kernel = layer.weight
    delattr(layer, "weight")
    temporary = torch.nn.Parameter(torch.empty(DIM, 1, WIDTH), requires_grad=False)
    temporary.__dict__ = dict(recorded)
    layer.register_parameter("weight", temporary)
    temporary.weight_loader(temporary, new_weight)
    kernel.data.copy_(layer.weight)
    if before_place is not None:
        before_place()
    delattr(layer, "weight")
    layer.register_parameter("weight", kernel)


def test_layerwise_reload_refreshes_when_the_kernel_parameter_is_registered_again(cache_module):
    layer = conv_layer()
    recorded = dict(layer.weight.__dict__)  # record_metadata_for_reloading runs at model init
    handed_out = cache_module.cached_transpose(layer.weight)
    new_weight = torch.randn(DIM, 1, WIDTH)
    stale = handed_out.clone()

    def still_stale():  # the values are in the kernel tensor, but nothing the key sees changed
        assert torch.equal(handed_out, stale) and not torch.equal(stale, reference(new_weight))

    layerwise_reload(layer, recorded, new_weight, before_place=still_stale)
    assert torch.equal(handed_out, reference(new_weight))
    assert cache_module.cached_transpose(layer.weight) is handed_out


def test_copied_attributes_on_a_temporary_parameter_do_not_confuse_the_cache(cache_module):
    layer = conv_layer()
    handed_out = cache_module.cached_transpose(layer.weight)
    expected = handed_out.clone()
    # A reload recorded after the cache existed copies the cache attribute to its temporaries.
    temporary = torch.nn.Parameter(torch.zeros(DIM, 1, WIDTH), requires_grad=False)
    temporary.__dict__ = dict(layer.weight.__dict__)
    torch.nn.Module().register_parameter("weight", temporary)
    assert torch.equal(handed_out, expected)
    assert torch.equal(cache_module.cached_transpose(temporary), reference(temporary))
    assert torch.equal(cache_module.cached_transpose(layer.weight), expected)


CHANGES = ["copy_", "rebind", "loader", "reload", "none"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(CHANGES), max_size=8), st.integers(0, 2**31 - 1))
def test_any_sequence_of_changes_keeps_the_copy_current(cache_module, changes, seed):
    generator = torch.Generator().manual_seed(seed)
    layer = conv_layer()
    recorded = dict(layer.weight.__dict__)
    for change in changes:
        new = torch.randn(DIM, 1, WIDTH, generator=generator)
        if change == "copy_":
            with torch.no_grad():
                layer.weight.copy_(new)
        elif change == "rebind":
            layer.weight.data = new
        elif change == "loader":
            layer.weight.weight_loader(layer.weight, new)
        elif change == "reload":
            layerwise_reload(layer, recorded, new)
        assert torch.equal(cache_module.cached_transpose(layer.weight), reference(layer.weight))


# --------------------------------------------------------------------------- upstream from 0.28.0rc1


@pytest.fixture(scope="module")
def upstream_packing():
    """0.30.0rc2 ops/gdn.py's packed conv weight, run with vLLM 0.30.0's replace_parameter."""
    import re
    from functools import wraps

    gdn = pristine("0.30.0rc2") / "vllm_ascend/ops/gdn.py"
    name = re.search(r'^_PACKED_CONV_WEIGHT_NAME = "(\w+)"', gdn.read_text(encoding="utf-8"), re.M).group(1)
    vllm_utils = fetch("0.30.0", package="vllm").path / "vllm/model_executor/utils.py"
    replace_parameter = load_defs(vllm_utils, ["replace_parameter"], {"torch": torch})["replace_parameter"]
    return load_defs(gdn, ["_get_base_conv1d", "_pack_conv_weights", "initialize_packed_conv_weight",
                           "_get_packed_conv_weights"],
                     {"torch": torch, "nn": torch.nn, "wraps": wraps, "replace_parameter": replace_parameter,
                      "_PACKED_CONV_WEIGHT_NAME": name})


def gdn_layer() -> torch.nn.Module:
    """A GDN layer as far as the packing reads it: conv1d with a weight loader and a quant method."""
    layer = torch.nn.Module()
    layer.conv1d = conv_layer()
    layer.conv1d.quant_method = type("UnquantizedLinearMethod", (), {
        "process_weights_after_loading": lambda self, module: None})()
    layer.model_config = type("ModelConfig", (), {"dtype": torch.float32})()
    return layer


def test_upstream_packed_weight_is_the_per_call_transpose_kept_in_place(upstream_packing):
    layer = gdn_layer()
    upstream_packing["initialize_packed_conv_weight"](layer)
    layer.conv1d.quant_method.process_weights_after_loading(layer.conv1d)
    packed = upstream_packing["_get_packed_conv_weights"](layer)
    assert packed.is_contiguous() and torch.equal(packed, reference(layer.conv1d.weight))

    layer.conv1d.weight.weight_loader(layer.conv1d.weight, torch.randn(DIM, 1, WIDTH))  # a reload
    layer.conv1d.quant_method.process_weights_after_loading(layer.conv1d)
    again = upstream_packing["_get_packed_conv_weights"](layer)
    assert again.data_ptr() == packed.data_ptr()  # same storage: captured graphs stay valid
    assert torch.equal(packed, reference(layer.conv1d.weight))
