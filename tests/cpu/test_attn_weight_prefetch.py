"""attn-weight-prefetch-next-layer on CPU: which layer prefetches what, and when it joins.

Also, for both prefetch recipes (this one and moe-shared-expert-weight-prefetch), that the
machinery their 0.23.x patches call is in 0.23.0 / 0.23.0.post1 and gone from 0.24.0rc1 on
(PR #11949), with no successor in 0.30.0rc2, so that plans there say 'broken'.

Loads ``vllm_ascend/ops/attn_weight_prefetch.py`` from the patched tree and drives it with fake
decoder layers (``nn.Module`` trees named like Qwen3.5's: ``layer_type``, ``self_attn.qkv_proj``,
``linear_attn.in_proj_qkvz`` …, ``mlp``). The two prefetch ops (``vllm::prefetch_preprocess`` /
``prefetch_postprocess``, registered by vllm-ascend on the NPU) are replaced by a recorder, so the
tests see which weights layer L's MoE window prefetches and where the stream is joined. Whether the
NPU overlaps the load with the MoE is not checked here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from patched_tree import load_module, patched_tree  # noqa: E402

from compat_support import CATALOG, pristine  # noqa: E402 (patched_tree put tests/ on the path)

pytestmark = [pytest.mark.tree]

RECIPE = "attn-weight-prefetch-next-layer"
HELPER = "vllm_ascend/ops/attn_weight_prefetch.py"
STACK = "language_model.model.layers"
FULL = ["qkv_proj", "o_proj"]
GDN_MERGED = ["in_proj_qkvz", "in_proj_ba", "out_proj"]
GDN_SPLIT = ["in_proj_qkv", "in_proj_z", "in_proj_ba", "out_proj"]


class Projections(nn.Module):
    def __init__(self, names: list[str]) -> None:
        super().__init__()
        for i, name in enumerate(names):
            self.add_module(name, nn.Linear(4 + i, 3, bias=False))


class DoubleMlp(nn.Module):
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states * 2


class FakeDecoderLayer(nn.Module):
    """The attributes the helper reads from a Qwen3_5DecoderLayer."""

    def __init__(self, layer_type: str, projections: list[str] | None = None) -> None:
        super().__init__()
        self.layer_type = layer_type
        if layer_type == "full_attention":
            self.self_attn = Projections(projections or FULL)
        elif layer_type == "linear_attention":
            self.linear_attn = Projections(projections or GDN_MERGED)
        self.mlp = DoubleMlp()


def qwen3_5_layer_type(index: int) -> str:
    """Qwen3.5-35B-A3B: three Gated DeltaNet layers, then one full-attention layer."""
    return "full_attention" if index % 4 == 3 else "linear_attention"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return patched_tree(tmp_path_factory.mktemp("attn-prefetch"), [RECIPE])


@pytest.fixture
def prefetch(tree):
    """A fresh copy of the module, so each test starts with an empty layer registry."""
    return load_module(tree / HELPER)


@pytest.fixture
def ops(monkeypatch) -> list[tuple]:
    """Replace the two prefetch ops by a recorder of (op, tensor, size) in call order."""
    log: list[tuple] = []
    monkeypatch.setattr(torch.ops.vllm, "prefetch_preprocess",
                        lambda weight, start_flag, max_weight_size: log.append(
                            ("prefetch", weight, start_flag, max_weight_size)), raising=False)
    monkeypatch.setattr(torch.ops.vllm, "prefetch_postprocess",
                        lambda stop_flag: log.append(("join", stop_flag)), raising=False)
    return log


def build(prefetch, indices, stack: str = STACK) -> dict[int, FakeDecoderLayer]:
    """Build layers in order, as make_layers does, each linking itself like the patched __init__."""
    layers = {}
    for i in indices:
        layers[i] = FakeDecoderLayer(qwen3_5_layer_type(i))
        prefetch.chain_attn_weight_prefetch(layers[i], f"{stack}.{i}")
    return layers


def run_mlp(layer: FakeDecoderLayer) -> tuple[torch.Tensor, torch.Tensor]:
    hidden_states = torch.randn(5, 4)
    return hidden_states, layer.mlp(hidden_states)


def expected_ops(next_layer, hidden_states, output, names, attn: str) -> list[tuple]:
    weights = [getattr(getattr(next_layer, attn), name).weight for name in names]
    return [("prefetch", w, hidden_states, w.numel() * w.element_size()) for w in weights] + [("join", output)]


def same_ops(actual: list[tuple], wanted: list[tuple]) -> bool:
    return len(actual) == len(wanted) and all(
        len(a) == len(w) and a[0] == w[0] and all(x is y or x == y for x, y in zip(a[1:], w[1:]))
        for a, w in zip(actual, wanted))


@pytest.mark.parametrize(("layer_type", "projections", "attn"), [
    ("full_attention", FULL, "self_attn"),
    ("linear_attention", GDN_MERGED, "linear_attn"),
    ("linear_attention", GDN_SPLIT, "linear_attn"),
], ids=["full-attention", "gdn-merged", "gdn-split"])
def test_projection_weights_in_reading_order(prefetch, layer_type, projections, attn):
    layer = FakeDecoderLayer(layer_type, projections)
    wanted = [getattr(getattr(layer, attn), name).weight for name in projections]
    assert [id(w) for w in prefetch.attn_projection_weights(layer)] == [id(w) for w in wanted]


@pytest.mark.parametrize("layer", [
    FakeDecoderLayer("mamba"),
    FakeDecoderLayer("full_attention", ["qkv_proj"]),
    nn.Module(),
], ids=["unknown-layer-type", "missing-projection", "no-layer-type"])
def test_unknown_or_partial_layers_yield_what_exists(prefetch, layer):
    names = getattr(getattr(layer, "self_attn", None), "_modules", {})
    assert [id(w) for w in prefetch.attn_projection_weights(layer)] == [id(m.weight) for m in names.values()]


def test_weights_are_looked_up_when_used(prefetch):
    layer = FakeDecoderLayer("full_attention")
    layer.self_attn.o_proj.weight = nn.Parameter(torch.zeros(3, 5))  # e.g. replaced after loading
    assert prefetch.attn_projection_weights(layer)[1] is layer.self_attn.o_proj.weight


@pytest.mark.parametrize(("numel", "element_size", "wanted"), [
    (1024, 2, 2048),
    (9 * 1024 * 1024, 2, 18 * 1024 * 1024),
    (9 * 1024 * 1024 + 1, 2, 18 * 1024 * 1024),
    (64 * 1024 * 1024, 1, 18 * 1024 * 1024),
], ids=["small", "at-cap", "over-cap", "int8-over-cap"])
def test_prefetch_size_is_capped(prefetch, numel, element_size, wanted):
    dtype = {1: torch.int8, 2: torch.bfloat16}[element_size]
    assert prefetch.prefetch_bytes(torch.empty(numel, dtype=dtype)) == wanted


def test_each_layer_prefetches_the_next_one_during_its_mlp(prefetch, ops):
    layers = build(prefetch, range(40))
    for i in range(39):
        ops.clear()
        hidden_states, output = run_mlp(layers[i])
        nxt = layers[i + 1]
        names, attn = (FULL, "self_attn") if nxt.layer_type == "full_attention" else (GDN_MERGED, "linear_attn")
        assert same_ops(ops, expected_ops(nxt, hidden_states, output, names, attn)), i
    ops.clear()
    run_mlp(layers[39])
    assert ops == []  # the last layer has no successor: no fork, so no join either


def test_mtp_layers_start_their_own_stack(prefetch, ops):
    layers = build(prefetch, range(40))
    mtp = FakeDecoderLayer("full_attention")
    assert not prefetch.chain_attn_weight_prefetch(mtp, "mtp.layers.0")
    ops.clear()
    run_mlp(layers[39])
    assert ops == []


def test_pipeline_stage_links_only_its_own_layers(prefetch, ops):
    layers = build(prefetch, range(20, 40))  # make_layers builds only this stage's layers
    assert len(layers[20].mlp._forward_pre_hooks) == 1 and len(layers[39].mlp._forward_pre_hooks) == 0
    ops.clear()
    hidden_states, output = run_mlp(layers[20])
    assert same_ops(ops, expected_ops(layers[21], hidden_states, output, GDN_MERGED, "linear_attn"))


def test_a_rebuilt_model_does_not_link_to_the_old_one(prefetch, ops):
    old = build(prefetch, range(4))
    new = build(prefetch, range(4))
    assert len(old[3].mlp._forward_pre_hooks) == 0  # old last layer: not linked to the new layer 0
    ops.clear()
    hidden_states, output = run_mlp(new[0])
    assert same_ops(ops, expected_ops(new[1], hidden_states, output, GDN_MERGED, "linear_attn"))


@pytest.mark.parametrize("prefix", ["", "layers", "model.layers.x"], ids=["empty", "no-index", "bad-index"])
def test_prefix_without_layer_index_never_links(prefetch, prefix):
    first, second = FakeDecoderLayer("full_attention"), FakeDecoderLayer("full_attention")
    prefetch.chain_attn_weight_prefetch(first, prefix)
    assert not prefetch.chain_attn_weight_prefetch(second, prefix)


def test_skipped_index_is_not_linked(prefetch):
    first, third = FakeDecoderLayer("full_attention"), FakeDecoderLayer("full_attention")
    prefetch.chain_attn_weight_prefetch(first, f"{STACK}.0")
    assert not prefetch.chain_attn_weight_prefetch(third, f"{STACK}.2")


# --------------------------------------------------------------------------- the machinery on later releases

PREFETCH_RECIPES = ["attn-weight-prefetch-next-layer", "moe-shared-expert-weight-prefetch"]


def called_machinery(recipe_id: str) -> tuple[set[str], set[str]]:
    """(the torch.ops.vllm ops, the vllm_ascend modules) the recipe's 0.23.x patch adds calls to."""
    recipe = CATALOG[recipe_id]
    text = "".join(CATALOG.patch_path(recipe_id, p.file).read_text(encoding="utf-8") for p in recipe.patches)
    added = [line[1:] for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    ops = {m for line in added for m in re.findall(r"torch\.ops\.vllm\.(\w+)\(", line)}
    modules = {m for line in added for m in re.findall(r"from (vllm_ascend\.ops\.\w+) import", line)}
    own = {f"vllm_ascend.{Path(t).with_suffix('').as_posix().split('vllm_ascend/', 1)[1].replace('/', '.')}"
           for p in recipe.patches for t in p.targets}
    return ops, modules - own


def missing_machinery(root: Path, recipe_id: str) -> list[str]:
    """What the patch calls that the tree does not define (registered ops, modules)."""
    ops, modules = called_machinery(recipe_id)
    registered = set(re.findall(r'op_name="(\w+)"', "".join(
        p.read_text(encoding="utf-8", errors="replace") for p in (root / "vllm_ascend").rglob("*.py"))))
    missing = [f"torch.ops.vllm.{op}" for op in sorted(ops - registered)]
    return missing + [m for m in sorted(modules) if not (root / (m.replace(".", "/") + ".py")).is_file()]


@pytest.mark.parametrize("recipe_id", PREFETCH_RECIPES)
def test_the_patches_call_prefetch_machinery(recipe_id):
    ops, _ = called_machinery(recipe_id)
    assert {"prefetch_preprocess", "prefetch_postprocess"} <= ops


@pytest.mark.parametrize("recipe_id", PREFETCH_RECIPES)
@pytest.mark.parametrize("version", ["0.23.0", "0.23.0.post1"])
def test_the_machinery_is_there_on_0_23(recipe_id, version):
    assert missing_machinery(pristine(version), recipe_id) == []


@pytest.mark.parametrize("recipe_id", PREFETCH_RECIPES)
@pytest.mark.parametrize("version", ["0.24.0rc1", "0.30.0rc2"])
def test_the_machinery_is_gone_later_and_the_plan_says_broken(recipe_id, version):
    root = pristine(version)
    assert "torch.ops.vllm.prefetch_preprocess" in missing_machinery(root, recipe_id)
    # No successor: nothing in the tree issues an L2 prefetch any more (torch_npu.npu_prefetch).
    assert not any("npu_prefetch" in p.read_text(encoding="utf-8", errors="replace")
                   for p in (root / "vllm_ascend").rglob("*.py"))
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    result = plan(Request(model="qwen3.5-35b", target="910c", vllm_ascend_version=version), load_workspace())
    decision = result.resolution.decisions[recipe_id]
    assert decision.status.value == "broken" and "#11949" in decision.reason
