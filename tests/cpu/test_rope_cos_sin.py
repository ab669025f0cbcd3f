"""rope-update-cos-sin-merge on CPU: one gather for cos and sin gives what two gathers gave.

On each release the recipe has a patch for (0.23.0 and 0.30.0rc2; 0.23.0.post1's rotary_embedding.py
is 0.23.0's), ``_select_cos_sin`` and ``update_cos_sin`` are taken out of the patched
``ops/rotary_embedding.py`` (which imports torch_npu, so it cannot be imported) and run with torch.
The references are the expression the patch replaces (0.23.0 rotary_embedding.py:139-145, 0.30.0rc2
:183-191), evaluated once for cos and once for sin, and the pristine tree's own ``update_cos_sin``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from patched_tree import load_defs, patched_tree  # noqa: E402  (puts tests/ on sys.path)

from compat_support import pristine  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPE = "rope-update-cos-sin-merge"
ROTARY = "vllm_ascend/ops/rotary_embedding.py"
MAX_POSITIONS = 64
MAX_TOKENS = 64
VERSIONS = ["0.23.0", "0.30.0rc2"]


def two_selects(cache: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """vllm-ascend 0.23.0 update_cos_sin: the whole chain once for cos ([0]) and once for sin ([1])."""
    num_tokens = positions.size(0)
    cos = cache.index_select(0, positions).view(num_tokens, 2, -1).repeat(1, 1, 2).chunk(2, dim=-2)[0]
    sin = cache.index_select(0, positions).view(num_tokens, 2, -1).repeat(1, 1, 2).chunk(2, dim=-2)[1]
    return cos, sin


def _start_up() -> dict:
    """The module globals update_cos_sin uses, as at start-up (all None)."""
    return {"torch": torch, "_cos_sin_cache": None, "_cos": None, "_sin": None, "_cos_slice": None, "_sin_slice": None}


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tree(tmp_path_factory, version) -> Path:
    return patched_tree(tmp_path_factory.mktemp("rope"), [RECIPE], version)


@pytest.fixture(scope="module")
def new_rope(tree):
    """Fresh copies of the patched functions."""
    return lambda: load_defs(tree / ROTARY, ["_select_cos_sin", "update_cos_sin"], _start_up())


@pytest.fixture(scope="module")
def old_rope(version):
    """Fresh copies of the release's own update_cos_sin (the pristine tree)."""
    return lambda: load_defs(pristine(version) / ROTARY, ["update_cos_sin"], _start_up())


@st.composite
def cases(draw):
    rope_dim = 2 * draw(st.integers(1, 64))
    dtype = draw(st.sampled_from([torch.bfloat16, torch.float16, torch.float32]))
    positions = draw(st.lists(st.integers(0, MAX_POSITIONS - 1), min_size=1, max_size=MAX_TOKENS))
    seed = draw(st.integers(0, 2**31 - 1))
    cache = torch.randn(MAX_POSITIONS, rope_dim, generator=torch.Generator().manual_seed(seed)).to(dtype)
    return cache, torch.tensor(positions, dtype=torch.int64)


@given(case=cases())
@settings(max_examples=200, deadline=None)
def test_one_gather_equals_two(new_rope, case):
    rope = new_rope()
    cache, positions = case
    cos, sin = rope["_select_cos_sin"](cache, positions)
    want_cos, want_sin = two_selects(cache, positions)
    assert cos.shape == want_cos.shape == (positions.numel(), 1, cache.shape[1])
    assert torch.equal(cos, want_cos) and torch.equal(sin, want_sin)


def _with_buffers(rope: dict, cache: torch.Tensor) -> dict:
    # set_cos_and_sin's buffers: [1, max_num_batched_tokens, 1, rope_dim], ones and zeros.
    rope["_cos_sin_cache"] = cache
    rope["_cos"] = torch.ones(1, MAX_TOKENS, 1, cache.shape[1], dtype=cache.dtype)
    rope["_sin"] = torch.zeros(1, MAX_TOKENS, 1, cache.shape[1], dtype=cache.dtype)
    return rope


@given(case=cases())
@settings(max_examples=100, deadline=None)
def test_update_cos_sin_writes_the_same_buffers(new_rope, old_rope, case):
    cache, positions = case
    num_tokens = positions.numel()
    rope, upstream = _with_buffers(new_rope(), cache), _with_buffers(old_rope(), cache)
    want_cos, want_sin = rope["_cos"].clone(), rope["_sin"].clone()
    cos, sin = two_selects(cache, positions)
    want_cos[:, :num_tokens] = cos
    want_sin[:, :num_tokens] = sin

    rope["update_cos_sin"](positions)
    upstream["update_cos_sin"](positions)

    for name in ("_cos", "_sin", "_cos_slice", "_sin_slice"):
        assert torch.equal(rope[name], upstream[name]), name
    assert torch.equal(rope["_cos"], want_cos) and torch.equal(rope["_sin"], want_sin)
    assert torch.equal(rope["_cos_slice"], want_cos[:, :num_tokens])
    assert torch.equal(rope["_sin_slice"], want_sin[:, :num_tokens])


def test_no_buffers_means_no_work(new_rope):
    rope = new_rope()
    # VL models (Qwen3.5/3.6 as shipped) never get _cos/_sin; the function must stay a no-op.
    rope["_cos_sin_cache"] = torch.randn(MAX_POSITIONS, 8)
    rope["update_cos_sin"](torch.arange(4))
    assert rope["_cos"] is None and rope["_cos_slice"] is None
