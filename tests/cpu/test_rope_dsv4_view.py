"""rope-dsv4-return-view on CPU: the patched ComplexExpRotaryEmbedding.forward and its DSpark callers.

On each release the recipe has a patch for (0.23.0; 0.30.0rc2, re-derived), the forward and the DSpark
helpers are taken out of the patched and the pristine tree (they import torch_npu and vLLM, so they
cannot be imported) and run with a CPU stand-in for torch_npu.npu_rotary_mul (interleaved rotation into
a fresh tensor, as the NPU op returns). What is checked: the patched forward returns what upstream's
returns; on 0.23.0 it no longer writes into its input; on 0.30.0rc2 it still writes by default (DeepSeek-V4
DSpark's _project_shared_kv ropes kv in place through it) and skips the write only with write_back=False,
which only the DeepSeek-V4.1 DSpark helper passes; both DSpark _project_shared_kv give upstream's kv.
The NPU op itself is not run here.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from patched_tree import load_defs, load_method, patched_tree  # noqa: E402  (puts tests/ on sys.path)

from compat_support import pristine  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPE = "rope-dsv4-return-view"
ROPE = "vllm_ascend/ops/rope_dsv4.py"
DSPARK_V4 = "vllm_ascend/models/deepseek_v4/dspark.py"
DSPARK_V41 = "vllm_ascend/models/deepseek_v41/dspark.py"
VERSIONS = ["0.23.0", "0.30.0rc2"]
NEWEST = VERSIONS[-1]
LAYER = "model.layers.0.self_attn"


def npu_rotary_mul(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_mode: str = "half") -> torch.Tensor:
    """torch_npu.npu_rotary_mul, interleave mode, as its API reference states it: output = r1 * x + r2 * x_new
    with x_new the pairs (-x[2i+1], x[2i]); a new tensor with x's shape and dtype (the DSA tables are fp32)."""
    assert rotary_mode == "interleave"
    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return (x * cos + rotated * sin).to(x.dtype)


FAKES = {"torch": torch, "nn": torch.nn, "math": math, "torch_npu": SimpleNamespace(npu_rotary_mul=npu_rotary_mul),
         "VllmConfig": object, "current_platform": None, "_ROPE_STATE": None}


def rotary(root: Path):
    """A ComplexExpRotaryEmbedding of ``root`` without its __init__ (which fills the shared rope state)."""
    cls = load_defs(root / ROPE, ["ComplexExpRotaryEmbedding"], FAKES)["ComplexExpRotaryEmbedding"]
    module = cls.__new__(cls)
    torch.nn.Module.__init__(module)
    module.layername = LAYER
    return module


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tree(tmp_path_factory, version) -> Path:
    return patched_tree(tmp_path_factory.mktemp("rope-dsv4"), [RECIPE], version)


def tables(num_tokens: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin as the DSA rope tables hold them: [T, 1, 1, D], each frequency repeated for its pair."""
    angles = torch.rand(num_tokens, dim // 2, generator=torch.Generator().manual_seed(seed)) * 6.3
    return (angles.cos().repeat_interleave(2, -1)[:, None, None], angles.sin().repeat_interleave(2, -1)[:, None, None])


SHAPES = [pytest.param((5, 64), id="2d"), pytest.param((5, 1, 64), id="3d"), pytest.param((3, 1, 1, 64), id="4d"),
          pytest.param((7, 1, 2, 32), id="4d-heads")]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_forward_returns_what_upstream_returns(tree, version, shape, dtype):
    cos, sin = tables(shape[0], shape[-1], seed=sum(shape))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape))).to(dtype)
    upstream_in = x.clone()
    want = rotary(pristine(version))(upstream_in, cos, sin)
    assert torch.equal(upstream_in, want)  # upstream writes the result into its input

    patched_in = x.clone()
    got = rotary(tree)(patched_in, cos, sin)
    assert got.shape == x.shape and torch.equal(got, want)
    if version == "0.23.0":
        assert torch.equal(patched_in, x), "0.23.x: the input is left unchanged"
    else:
        assert torch.equal(patched_in, want), "0.30: the default keeps upstream's in-place write"
        untouched = x.clone()
        view = rotary(tree)(untouched, cos, sin, write_back=False)
        assert torch.equal(view, want) and torch.equal(untouched, x)
        assert view.data_ptr() != untouched.data_ptr()


@pytest.fixture(scope="module")
def tree_030(tmp_path_factory) -> Path:
    """The 0.30.0rc2 tree with the re-derived patch (0.23.x has no DSpark drafter)."""
    return patched_tree(tmp_path_factory.mktemp("rope-dsv4-0.30"), [RECIPE], NEWEST)


def dspark_attn(root: Path, nope: int, rope: int):
    return SimpleNamespace(kv_norm=lambda t: t, wkv=lambda t: t, nope_head_dim=nope, rope_head_dim=rope,
                           head_dim=nope + rope, rotary_emb=rotary(root))


def project_shared_kv(root: Path, path: str, hidden: torch.Tensor, positions: torch.Tensor, attn, rope):
    """DSpark's _project_shared_kv of ``root`` (0.30: DeepSeek-V4 and V4.1) with the helper it calls."""
    namespace = {"torch": torch, "nn": torch.nn, "get_cos_and_sin_dsa": lambda positions, **_: rope}
    namespace |= load_defs(root / path, ["_apply_dsv4_rope"], namespace)
    cls = "DeepseekV4DSparkModel" if path == DSPARK_V4 else "DeepseekV41DSparkModel"
    method = load_method(root / path, cls, "_project_shared_kv", namespace)
    kwargs = {"rope": rope} if path == DSPARK_V4 else {}
    return method(None, hidden, positions, attn, **kwargs)


@pytest.mark.parametrize("path", [DSPARK_V4, DSPARK_V41], ids=["deepseek_v4", "deepseek_v41"])
def test_dspark_shared_kv_is_upstream_kv(tree_030, path):
    tree, version = tree_030, NEWEST
    nope, rope_dim, num_tokens = 48, 16, 6
    cos, sin = tables(num_tokens, rope_dim, seed=3)
    rope = ({LAYER: cos}, {LAYER: sin})
    hidden = torch.randn(num_tokens, nope + rope_dim, generator=torch.Generator().manual_seed(4))
    positions = torch.arange(num_tokens)
    want = project_shared_kv(pristine(version), path, hidden.clone(), positions, dspark_attn(pristine(version), nope, rope_dim), rope)
    got = project_shared_kv(tree, path, hidden.clone(), positions, dspark_attn(tree, nope, rope_dim), rope)
    assert got.shape == want.shape == (num_tokens, 1, nope + rope_dim)
    assert torch.equal(got, want)
    # The rope segment really is rotated (a kv stored un-rotated would also have this shape).
    assert not torch.equal(got[:, 0, nope:], hidden[:, nope:]) and torch.equal(got[:, 0, :nope], hidden[:, :nope])


def test_only_the_v41_helper_skips_the_write(tree_030):
    tree = tree_030
    calls = {}

    class Recorder:
        layername = LAYER

        def __call__(self, x, cos, sin, **kwargs):
            calls[path] = kwargs
            return x

    for path in (DSPARK_V4, DSPARK_V41):
        namespace = {"torch": torch, "nn": torch.nn, "get_cos_and_sin_dsa": lambda positions, **_: ({LAYER: 1}, {LAYER: 0})}
        helper = load_defs(tree / path, ["_apply_dsv4_rope"], namespace)["_apply_dsv4_rope"]
        helper(Recorder(), torch.arange(2), torch.zeros(2, 4))
    assert calls == {DSPARK_V4: {}, DSPARK_V41: {"write_back": False}}
