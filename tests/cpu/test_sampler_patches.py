"""The sampler recipes on CPU, on each release they are written for (vllm-ascend 0.23.0 and 0.30.0rc2).

The patched tree's helper modules and methods run against vLLM's own code: the classes below are
loaded from the vLLM sdist the release pairs with (0.23.0, 0.30.0; fetched and cached like the
trees) and from the pristine vllm-ascend tree, and executed among fakes for what needs a device.

- sampler-vocab-parallel-greedy-argmax: ``sample/vocab_parallel_argmax.py`` on every rank of a
  simulated TP group (one thread per rank, all-gathers meet at a barrier) against the argmax of what
  vLLM's LogitsProcessor returns through vllm-ascend's AscendLogitsProcessor, and against vLLM's
  own vocab-parallel ``LogitsProcessor.get_top_tokens``; vocab shards from vLLM's ``_get_indices``
  (padding, uneven and empty shards); TP 1-8, bf16/fp16/fp32, ties, soft cap and scale, an fp32
  lm_head (0.30); which models qualify.
- sampler-min-tokens-spec-mask-cache: ``sample/min_tokens_cache.py`` over random persistent-batch
  episodes that drive vLLM's MinTokensLogitsProcessor through its own ``update_state`` (joins,
  condensing leaves, swaps, outputs growing, requests reaching min_tokens): the patched
  ``AscendRejectionSampler.apply_logits_processors`` gives what the pristine one gives every step
  (structured-output requests included, whose stop tokens vLLM 0.30 gives back), and per vocab
  shard the runner's masks equal upstream's ``apply_with_spec_decode`` + ``apply`` in the logits
  layout; rebuilt exactly when the structure changes.
- sampler-greedy-bf16-fastpath: the patched ``AscendSampler.forward`` skips the fp32 cast exactly
  when vLLM's ``Sampler.forward`` would return nothing but the argmax, and then returns what it does.
- rejection-greedy-presampled: ``forward_greedy_presampled`` against a port of vLLM's greedy
  rejection kernel and the pristine tree's pytorch kernels (synthetic acceptance too on 0.30), alone
  and fed by the shard argmax with shard-local MinTokens masks, as the model runner feeds it.

Not run here: the NPU kernels (triton greedy rejection, HCCL all-gather), the model runner and
proposer glue, ACL graph capture.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from hypothesis import event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from patched_tree import load_defs, load_method, load_module, patched_tree  # noqa: E402  (puts tests/ on sys.path)

from compat_support import pristine  # noqa: E402
from optkit.tree.fetch import fetch  # noqa: E402
from packaging.version import Version  # noqa: E402
from optkit.versions.releases import load_release  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPES = ["sampler-min-tokens-spec-mask-cache", "sampler-vocab-parallel-greedy-argmax",
           "sampler-greedy-bf16-fastpath", "rejection-greedy-presampled"]
VERSIONS = ["0.23.0", "0.30.0rc2"]
ARGMAX = "vllm_ascend/sample/vocab_parallel_argmax.py"
MIN_TOKENS = "vllm_ascend/sample/min_tokens_cache.py"
SAMPLER = "vllm_ascend/sample/sampler.py"
REJECTION = "vllm_ascend/sample/rejection_sampler.py"
EMBEDDING = "vllm_ascend/ops/vocab_parallel_embedding.py"
NEG_INF = float("-inf")
PLACEHOLDER_TOKEN_ID = -1  # vllm/v1/sample/rejection_sampler.py


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tree(version, tmp_path_factory) -> Path:
    return patched_tree(tmp_path_factory.mktemp(f"sampler-{version}"), RECIPES, version)


@pytest.fixture(scope="module")
def vpa(tree):
    return load_module(tree / ARGMAX)


@pytest.fixture(scope="module")
def mtc(tree):
    return load_module(tree / MIN_TOKENS)


@pytest.fixture(scope="module")
def up(version):
    return upstream(version)


# ---------------------------------------------------------------------------------------------
# vLLM's and the pristine tree's own code, loaded among fakes


class PluggableLayer(torch.nn.Module):
    """vllm.model_executor.custom_op.PluggableLayer: a module; register() is a no-op decorator here."""

    @classmethod
    def register(cls, name):
        return lambda layer: layer


class UnquantizedEmbeddingMethod:
    @staticmethod
    def apply(layer, x, bias=None):
        return torch.nn.functional.linear(x, layer.weight, bias)


class UnquantizedLinearMethod(UnquantizedEmbeddingMethod):
    pass


class SimulatedTP:
    """A TP group of ``world_size`` ranks on threads: ``all_gather`` concatenates every rank's
    tensor in rank order once all ranks have called it, as GroupCoordinator.all_gather does."""

    active: "SimulatedTP | None" = None

    def __init__(self, world_size: int):
        self.world_size = world_size
        self._local = threading.local()
        self._barrier = threading.Barrier(world_size)
        self._slots: list = [None] * world_size

    @property
    def rank_in_group(self) -> int:
        return self._local.rank

    def all_gather(self, tensor: torch.Tensor, dim: int = -1) -> torch.Tensor:
        self._slots[self.rank_in_group] = tensor
        self._barrier.wait()
        out = torch.cat(self._slots, dim=dim)
        self._barrier.wait()  # all have read before a later gather overwrites the slots
        return out

    def run(self, fn):
        """``fn(rank)`` on every rank at once; their results in rank order."""
        results, errors = [None] * self.world_size, []

        def body(rank):
            self._local.rank = rank
            try:
                results[rank] = fn(rank)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
                self._barrier.abort()

        SimulatedTP.active = self
        threads = [threading.Thread(target=body, args=(rank,)) for rank in range(self.world_size)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        SimulatedTP.active = None
        if errors:
            raise errors[0]
        return results


def _all_gather(tensor, dim=-1):
    return SimulatedTP.active.all_gather(tensor, dim)


class QuietLogger:
    """vLLM's logger (debug_once, warning_once, isEnabledFor, ...): every call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


QUIET = QuietLogger()


@lru_cache(maxsize=None)
def upstream(version: str) -> SimpleNamespace:
    """The upstream classes the tests compare against, from the vLLM sdist ``version`` pairs with and
    from the pristine vllm-ascend tree."""
    vllm_version = load_release(version).vllm.value
    vllm = fetch(vllm_version, package="vllm").path / "vllm"
    ascend = pristine(version)
    new = Version(version) >= Version("0.30.0rc1")
    up = SimpleNamespace(version=version, vllm_version=vllm_version, new=new)

    # MinTokensLogitsProcessor and the dict updates it runs (v1/sample/logits_processor/builtin.py).
    up.MoveDirectionality = load_defs(vllm / "v1/sample/logits_processor/interface.py", ["MoveDirectionality"],
                                      {"Enum": enum.Enum, "auto": enum.auto})["MoveDirectionality"]
    builtin = {"np": np, "torch": torch, "LogitsProcessor": object, "MoveDirectionality": up.MoveDirectionality}
    if new:
        builtin["async_tensor_h2d"] = load_defs(vllm / "utils/torch_utils.py", ["async_tensor_h2d"],
                                                {"np": np, "torch": torch, "PIN_MEMORY": False})["async_tensor_h2d"]
    ns = load_defs(vllm / "v1/sample/logits_processor/builtin.py",
                   ["MinTokensLogitsProcessor", "LogitBiasLogitsProcessor", "process_dict_updates"], builtin)
    up.MinTokens, up.LogitBias = ns["MinTokensLogitsProcessor"], ns["LogitBiasLogitsProcessor"]

    # Sampler (v1/sample/sampler.py), with the real bad-words op.
    bad_words = load_defs(vllm / "v1/sample/ops/bad_words.py", ["apply_bad_words", "_apply_bad_words_single_batch"],
                          {"torch": torch, "_SMALLEST_LOGIT": NEG_INF})
    up.Sampler = load_defs(vllm / "v1/sample/sampler.py", ["Sampler"], {
        "torch": torch, "nn": torch.nn, "SamplerOutput": SimpleNamespace, "LogprobsTensors": SimpleNamespace,
        "apply_bad_words": bad_words["apply_bad_words"], "TopKTopPSampler": lambda *args: None,
        "PIN_MEMORY": False, "is_pin_memory_available": lambda: False, "_SAMPLING_EPS": 1e-5})["Sampler"]

    # generate_uniform_probs (v1/sample/rejection_sampler.py).
    up.generate_uniform_probs = load_defs(vllm / "v1/sample/rejection_sampler.py", ["generate_uniform_probs"],
                                          {"torch": torch})["generate_uniform_probs"]

    # LogitsProcessor (model_executor/layers/logits_processor.py), vllm-ascend's AscendLogitsProcessor
    # over it (ops/vocab_parallel_embedding.py), and the vocab sharding (vocab_parallel_embedding.py).
    platform = SimpleNamespace(use_all_gather=lambda: True, is_cuda=lambda: False, is_rocm=lambda: False)
    up.LogitsProcessor = load_defs(vllm / "model_executor/layers/logits_processor.py", ["LogitsProcessor"], {
        "torch": torch, "F": torch.nn.functional, "PluggableLayer": PluggableLayer, "current_platform": platform,
        "tensor_model_parallel_all_gather": _all_gather, "tensor_model_parallel_gather": _all_gather,
        "get_tensor_model_parallel_world_size": lambda: SimulatedTP.active.world_size,
        "get_current_vllm_config": lambda: SimpleNamespace(model_config=None),
        "UnquantizedEmbeddingMethod": UnquantizedEmbeddingMethod,
        "UnquantizedLinearMethod": UnquantizedLinearMethod})["LogitsProcessor"]
    names = ["AscendLogitsProcessor"] + (["VocabParallelMode"] if new else [])
    ns = load_defs(ascend / EMBEDDING, names, {
        "torch": torch, "LogitsProcessor": up.LogitsProcessor, "Enum": enum.Enum, "auto": enum.auto,
        "lmhead_tp_enable": lambda: False, "get_ascend_config": lambda: SimpleNamespace(enable_reduce_sample=False)})
    up.AscendLogitsProcessor = ns["AscendLogitsProcessor"]
    up.VocabParallelMode = ns.get("VocabParallelMode")
    embedding = vllm / "model_executor/layers/vocab_parallel_embedding.py"
    sharding = load_defs(embedding, ["pad_vocab_size", "vocab_range_from_global_vocab_size",
                                     "vocab_range_from_per_partition_vocab_size", "VocabParallelEmbeddingShardIndices"],
                         {"dataclass": __import__("dataclasses").dataclass, "DEFAULT_VOCAB_PADDING_SIZE": 64,
                          "divide": lambda a, b: a // b})
    up.pad_vocab_size = sharding["pad_vocab_size"]
    up.get_indices = partial(load_method(embedding, "VocabParallelEmbedding", "_get_indices", sharding), None)
    return up


def logits_processor(up, vocab: int, *, scale: float = 1.0, soft_cap: float | None = None, cls=None):
    """A real AscendLogitsProcessor (or ``cls``), built by its own __init__."""
    return (cls or up.AscendLogitsProcessor)(vocab, scale=scale, soft_cap=soft_cap)


# ---------------------------------------------------------------------------------------------
# The vocab sharding: vLLM's _get_indices for ParallelLMHead (no added vocab)


def shard_layout(up, vocab: int, tp: int) -> list[tuple[int, int, int]]:
    """(org_vocab_start_index, num_org_elements, local width) per rank."""
    padded = up.pad_vocab_size(vocab)
    out = []
    for rank in range(tp):
        shard = up.get_indices(padded, padded, vocab, vocab, rank, tp)
        out.append((shard.org_vocab_start_index, shard.num_org_elements, shard.num_elements_padded))
    return out


def lm_head_shards(up, weight: torch.Tensor, tp: int, group, mode: str = "STANDARD") -> list[SimpleNamespace]:
    """ParallelLMHead per rank: its rows of ``weight`` then zero padding rows, vLLM's shard indices,
    and the group it is sharded over (0.23: comm_group; 0.30: vllm-ascend's parallel_mode)."""
    vocab = weight.shape[0]
    padded = up.pad_vocab_size(vocab)
    heads = []
    for rank in range(tp):
        shard = up.get_indices(padded, padded, vocab, vocab, rank, tp)
        local = torch.zeros(shard.num_elements_padded, weight.shape[1], dtype=weight.dtype)
        local[:shard.num_org_elements] = weight[shard.org_vocab_start_index:shard.org_vocab_end_index]
        heads.append(SimpleNamespace(
            weight=local, quant_method=UnquantizedEmbeddingMethod(), shard_indices=shard, tp_size=tp, tp_rank=rank,
            org_vocab_size=vocab, comm_group=group if mode == "STANDARD" else object(),
            parallel_mode=up.VocabParallelMode[mode] if up.VocabParallelMode else SimpleNamespace(name=mode)))
    return heads


def shards_of(full: torch.Tensor, layout, padding_value: float = 1e4) -> list[torch.Tensor]:
    """Each rank's local logits: its vocab columns, then padding columns holding ``padding_value``
    (larger than any real logit, so a shard that lets padding win gives a wrong id)."""
    local = []
    for start, valid, width in layout:
        shard = torch.full((full.shape[0], width), padding_value, dtype=full.dtype)
        shard[:, :valid] = full[:, start:start + valid]
        local.append(shard)
    return local


def all_ranks_argmax(vpa, local: list[torch.Tensor], layout) -> list[torch.Tensor]:
    """vocab_parallel_argmax on every rank of a simulated TP group."""
    group = SimulatedTP(len(layout))

    def rank_argmax(rank):
        start, valid, _ = layout[rank]
        return vpa.vocab_parallel_argmax(local[rank], start, valid, partial(group.all_gather, dim=-1))
    return group.run(rank_argmax)


def assert_same_argmax(up, vpa, full: torch.Tensor, tp: int) -> None:
    layout = shard_layout(up, full.shape[-1], tp)
    want = full.argmax(dim=-1)  # the first maximum, as on the gathered logits
    for got in all_ranks_argmax(vpa, shards_of(full, layout), layout):
        assert got.dtype == torch.int64
        assert torch.equal(got, want)


# ---------------------------------------------------------------------------------------------
# sampler-vocab-parallel-greedy-argmax


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("vocab", [248320, 151936, 32001, 1000, 7], ids=lambda v: f"V{v}")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_vocab_parallel_argmax_equals_full_argmax(up, vpa, tp, vocab, dtype):
    generator = torch.Generator().manual_seed(vocab * 31 + tp)
    full = (torch.randn(3, vocab, generator=generator) * 8).to(dtype)
    full[2] = full[2].clamp(max=0)  # a row whose best real logit is below the padding's 0-weight logit
    assert_same_argmax(up, vpa, full, tp)


def test_layouts_cover_uneven_and_empty_shards(up):
    assert shard_layout(up, 32001, 2) == [(0, 16032, 16032), (16032, 15969, 16032)]
    assert shard_layout(up, 7, 8)[1:] == [(7, 0, 8)] * 7  # ranks 1-7 hold padding only
    assert shard_layout(up, 248320, 2) == [(0, 124160, 124160), (124160, 124160, 124160)]


def test_upstream_reduce_sample_offset_is_wrong_for_uneven_shards():
    """Why exact offsets matter: 0.23's enable_reduce_sample gave ``local_idx + rank * V_local``
    (vllm_ascend/sample/sampler.py:117, V_local = num_org_embeddings_per_partition), which misplaces
    rank 1 of an uneven vocabulary."""
    _, (start1, valid1, _) = shard_layout(upstream("0.23.0"), 32001, 2)
    assert 1 * valid1 != start1


@given(tp=st.sampled_from([1, 2, 4, 8]), vocab=st.integers(1, 300), rows=st.integers(1, 4),
       levels=st.integers(1, 3), dtype=st.sampled_from([torch.bfloat16, torch.float32]), data=st.data())
@settings(max_examples=200, deadline=None)
def test_vocab_parallel_argmax_ties_pick_the_first_index(up, vpa, tp, vocab, rows, levels, dtype, data):
    """Few distinct values, so the maximum is shared within and across shards."""
    values = data.draw(st.lists(st.integers(0, levels), min_size=rows * vocab, max_size=rows * vocab))
    full = torch.tensor(values, dtype=torch.float32).view(rows, vocab).to(dtype)
    assert_same_argmax(up, vpa, full, tp)


def test_vocab_parallel_argmax_special_values(up, vpa):
    full = torch.zeros(3, 130)
    full[0] = NEG_INF  # every token masked: id 0, as argmax gives
    full[1, 70] = float("inf")
    full[1, 129] = float("inf")
    full[2, 90] = float("nan")  # NaN ranks first in torch.argmax; it must survive the exchange
    assert_same_argmax(up, vpa, full, 2)


def test_token_ids_stay_exact_in_float32_up_to_two_to_the_24(vpa):
    shard = torch.zeros(1, 8)
    shard[0, 7] = 1.0
    start = vpa.FLOAT32_EXACT_INTS - 8
    assert vpa.vocab_parallel_argmax(shard, start, 8, lambda pair: pair).item() == start + 7
    with pytest.raises(ValueError, match="exact"):
        vpa.local_argmax_pair(shard, start + 1, 8)
    with pytest.raises(ValueError, match="float64"):
        vpa.local_argmax_pair(shard.double(), 0, 8)


class PlainHead:
    """compute_logits as qwen3_5.py / qwen3_5_mtp.py / llama.py write it (0.23.0 and 0.30.0)."""

    def __init__(self, lm_head, processor):
        self.lm_head, self.logits_processor = lm_head, processor

    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states)


@pytest.mark.parametrize("soft_cap,scale", [(None, 1.0), (30.0, 1.0), (None, 0.5), (50.0, -2.0)])
@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("head_fp32", [False, True], ids=["head-bf16", "head-fp32"])
def test_shard_argmax_equals_the_argmax_of_compute_logits(up, vpa, soft_cap, scale, tp, head_fp32):
    """On every rank: shard_logits_head of the model, its local logits and the vocab-parallel argmax
    against the argmax of the model's compute_logits (vLLM LogitsProcessor through vllm-ascend's
    AscendLogitsProcessor, TP all-gather included) and, for positive scales, against vLLM's own
    LogitsProcessor.get_top_tokens. An fp32 head (vLLM 0.30's head_dtype) only exists on 0.30."""
    if head_fp32 and not up.new:
        pytest.skip("vLLM 0.23 has no head_dtype")
    vocab, hidden = 1001, 16
    generator = torch.Generator().manual_seed(tp)
    weight = torch.randn(vocab, hidden, generator=generator).to(torch.bfloat16)
    states = torch.randn(5, hidden, generator=generator).to(torch.bfloat16)
    processor = logits_processor(up, vocab, scale=scale, soft_cap=soft_cap)
    if head_fp32:
        processor.head_dtype = torch.float32
    group = SimulatedTP(tp)
    heads = lm_head_shards(up, weight, tp, group)

    def on_rank(rank):
        model = PlainHead(heads[rank], processor)
        full = model.compute_logits(states)
        head = vpa.shard_logits_head(model, group)
        assert head is not None or tp == 1
        if head is None:
            return full, full.argmax(-1), None
        got = vpa.vocab_parallel_argmax(head.local_logits(states), head.vocab_start, head.num_valid,
                                        partial(group.all_gather, dim=-1))
        top = processor.get_top_tokens(heads[rank], states) if scale > 0 else None
        return full, got, top

    for full, got, top in group.run(on_rank):
        assert full.shape == (5, vocab) and full.dtype == (torch.float32 if head_fp32 else torch.bfloat16)
        assert torch.equal(got, full.argmax(dim=-1))
        if top is not None:
            assert torch.equal(got, top)


# shard_logits_head: which models qualify. Real compute_logits shapes (qwen3_5.py, qwen3_5_mtp.py,
# qwen3_vl.py, llama.py) and near misses, on a real AscendLogitsProcessor.


class Group:
    world_size, rank_in_group = 2, 1


GROUP = Group()


class MTPHead(PlainHead):
    def compute_logits(self, hidden_states, spec_step_idx: int = 0):
        """Qwen3_5MTP's signature."""
        return self.logits_processor(self.lm_head, hidden_states)


class NamedResultHead(PlainHead):
    def compute_logits(self, hidden_states):
        """llama.py and qwen3.py name the result first."""
        logits = self.logits_processor(self.lm_head, hidden_states)
        return logits


class OtherResultHead(PlainHead):
    def compute_logits(self, hidden_states):
        logits = self.logits_processor(self.lm_head, hidden_states)  # noqa: F841 - the near miss
        return self.bias


class Wrapper:
    def __init__(self, inner):
        self.language_model = inner

    def compute_logits(self, hidden_states):
        return self.language_model.compute_logits(hidden_states)


class RemappedHead(PlainHead):
    def compute_logits(self, hidden_states):
        logits = self.logits_processor(self.lm_head, hidden_states)
        return logits[:, self.draft_id_to_target_id]


class ScaledHead(PlainHead):
    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states) * 2


class BiasedHead(PlainHead):
    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states, self.bias)


def plain(up, cls=PlainHead, *, rank=1, tp=2, group=GROUP, mode="STANDARD", processor=None, added=0):
    head = lm_head_shards(up, torch.zeros(130, 4), tp, group, mode)[rank]
    if added:
        shard = head.shard_indices
        head.shard_indices = type(shard)(shard.padded_org_vocab_start_index, shard.padded_org_vocab_end_index,
                                         shard.padded_added_vocab_start_index, shard.padded_added_vocab_end_index + added,
                                         shard.org_vocab_start_index, shard.org_vocab_end_index,
                                         shard.added_vocab_start_index, shard.added_vocab_end_index + added)
    return cls(head, processor if processor is not None else logits_processor(up, 130))


def custom_forward(up):
    class CustomProcessor(up.LogitsProcessor):
        def forward(self, lm_head, hidden_states, embedding_bias=None):
            return super().forward(lm_head, hidden_states, embedding_bias) + 1
    return CustomProcessor(130)


def custom_get_logits(up):
    """An override of _get_logits that does not take skip_gather (0.30 asks for one that does)."""
    class LmHeadTPProcessor(up.LogitsProcessor):
        def _get_logits(self, hidden_states, lm_head, embedding_bias=None):
            return up.LogitsProcessor._get_logits(self, hidden_states, lm_head, embedding_bias)
    return LmHeadTPProcessor(130)


def logits_input(up):
    processor = logits_processor(up, 130)
    processor.logits_as_input = True
    return processor


@pytest.mark.parametrize("make,qualifies", [
    (lambda up: plain(up), True),
    (lambda up: plain(up, MTPHead), True),
    (lambda up: plain(up, NamedResultHead), True),
    (lambda up: plain(up, OtherResultHead), False),
    (lambda up: Wrapper(plain(up)), True),
    (lambda up: Wrapper(Wrapper(plain(up, MTPHead))), True),
    (lambda up: Wrapper(Wrapper(Wrapper(Wrapper(plain(up))))), False),
    (lambda up: plain(up, RemappedHead), False),
    (lambda up: plain(up, ScaledHead), False),
    (lambda up: plain(up, BiasedHead), False),
    (lambda up: plain(up, processor=custom_forward(up)), False),
    (lambda up: plain(up, processor=custom_get_logits(up)), {"0.23.0": True, "0.30.0rc2": False}),
    (lambda up: plain(up, processor=logits_processor(up, 128)), False),
    (lambda up: plain(up, processor=logits_input(up)), False),
    (lambda up: plain(up, added=3), False),
    (lambda up: plain(up, mode="FINE_GRAINED"), False),
    (lambda up: plain(up, tp=4), False),
    (lambda up: plain(up, rank=0), False),
], ids=["plain", "mtp", "named-result", "other-result", "wrapped", "wrapped-twice", "wrapped-too-deep", "remapped",
        "scaled", "bias", "custom-forward", "custom-get-logits", "processor-vocab", "logits-as-input", "added-vocab",
        "other-group", "other-tp-size", "other-rank"])
def test_shard_logits_head_accepts_only_plain_lm_heads(up, vpa, make, qualifies):
    """custom-get-logits: 0.30's local logits go through _get_logits(skip_gather=True), which an
    override without skip_gather does not honour; 0.23's do not call it. other-group: lmhead TP
    shards lm_head over its own group (0.23 comm_group, 0.30 parallel_mode FINE_GRAINED)."""
    if isinstance(qualifies, dict):
        qualifies = qualifies[up.version]
    head = vpa.shard_logits_head(make(up), GROUP)
    assert (head is not None) == qualifies
    if head is not None:
        assert (head.vocab_start, head.num_valid) == (96, 34)  # rank 1 of 130 tokens padded to 192


# ---------------------------------------------------------------------------------------------
# sampler-min-tokens-spec-mask-cache: episodes on vLLM's own MinTokensLogitsProcessor


@dataclass
class Request:
    min_tokens: int
    stops: set[int]
    structured: bool = False
    output: list[int] = field(default_factory=list)

    def params(self):
        structured = SimpleNamespace() if self.structured else None
        return SimpleNamespace(min_tokens=self.min_tokens, all_stop_token_ids=self.stops, structured_outputs=structured,
                               logit_bias=None)


def batch_update(size, removed=(), added=(), moved=()):
    """vllm/v1/sample/logits_processor/interface.py BatchUpdate (processed: removed, added, moved)."""
    return SimpleNamespace(batch_size=size, removed=list(removed), added=list(added), moved=list(moved))


class Episode:
    """A persistent batch and vLLM's MinTokensLogitsProcessor following it through update_state:
    joins append a row, a leave moves the last row into the hole (InputBatch.condense), swaps."""

    def __init__(self, up):
        self.up, self.rows = up, []
        self.processor = up.MinTokens(None, torch.device("cpu"), False)

    def join(self, request: Request):
        self.rows.append(request)
        self.processor.update_state(batch_update(len(self.rows),
                                                 added=[(len(self.rows) - 1, request.params(), None, request.output)]))

    def leave(self, row: int):
        last = len(self.rows) - 1
        self.rows[row] = self.rows[last]
        self.rows.pop()
        moved = [(last, row, self.up.MoveDirectionality.UNIDIRECTIONAL)] if row != last else []
        self.processor.update_state(batch_update(len(self.rows), removed=[row], moved=moved))

    def swap(self, a: int, b: int):
        self.rows[a], self.rows[b] = self.rows[b], self.rows[a]
        self.processor.update_state(batch_update(len(self.rows),
                                                 moved=[(a, b, self.up.MoveDirectionality.SWAP)]))

    def step_done(self):
        """What the next step's update_state does first: drop the requests that reached min_tokens."""
        self.processor.update_state(None)


def episode_steps():
    step = st.fixed_dictionaries({
        "join": st.lists(st.tuples(st.integers(0, 12), st.sets(st.integers(0, 40), max_size=3),
                                   st.integers(0, 4).map(lambda n: n == 0)), max_size=2),
        "leave": st.lists(st.integers(0, 7), max_size=1),
        "swap": st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=1),
        "drafts": st.one_of(st.just("k"), st.lists(st.integers(0, 4), min_size=8, max_size=8)),
        "accept": st.lists(st.integers(0, 5), min_size=8, max_size=8),
    })
    return st.lists(step, min_size=5, max_size=25)


def run_episode(up, steps, k: int):
    """Yield (episode, num_draft_tokens) for every step of a random episode; structured output
    only where the release knows it (vLLM 0.30's MinTokens entries carry it)."""
    episode = Episode(up)
    for step in steps:
        for min_tokens, stops, structured in step["join"]:
            if len(episode.rows) < 8:
                episode.join(Request(min_tokens, set(stops), structured and up.new))
        for row in step["leave"]:
            if row < len(episode.rows):
                episode.leave(row)
        for a, b in step["swap"]:
            if max(a, b) < len(episode.rows) and a != b:
                episode.swap(a, b)
        if not episode.rows:
            continue
        drafts = [k] * len(episode.rows) if step["drafts"] == "k" else step["drafts"][:len(episode.rows)]
        yield episode, drafts
        for request, num_draft, accepted in zip(episode.rows, drafts, step["accept"]):
            request.output.extend([7] * (min(accepted, num_draft) + 1))
        episode.step_done()


def target_logits(episode: Episode, drafts, vocab: int) -> torch.Tensor:
    """Target rows as a grammar may leave them: a structured-output request's rows allow only its stop
    tokens, so masking them would leave the row all -inf (vLLM 0.30 then gives them back)."""
    logits = torch.zeros(sum(drafts), vocab)
    start = 0
    for request, num_draft in zip(episode.rows, drafts):
        if request.structured:
            allowed = torch.full((vocab,), NEG_INF)
            allowed[list(request.stops)] = 0.0
            logits[start:start + num_draft] = allowed
        start += num_draft
    return logits


def logits_layout(num_draft_tokens) -> tuple[torch.Tensor, torch.Tensor]:
    """target_logits_indices, bonus_logits_indices: vllm_ascend/worker/model_runner_v1.py
    _calc_spec_decode_metadata (0.23.0 :1543-1588, 0.30.0rc2 :1771-1818) for the logits rows
    (num_draft + 1 per request)."""
    num_draft = np.array(num_draft_tokens, dtype=np.int32)
    num_sampled = num_draft + 1
    cu_num_sampled = np.cumsum(num_sampled)
    bonus = cu_num_sampled - 1
    cu_num_draft = np.cumsum(num_draft)
    offsets = np.repeat(cu_num_draft - num_draft, num_draft)
    target = np.repeat(cu_num_sampled - num_sampled, num_draft) + np.arange(cu_num_draft[-1]) - offsets
    return torch.from_numpy(target.astype(np.int64)), torch.from_numpy(bonus.astype(np.int64))


def upstream_runner_mask(processor, num_draft_tokens, vocab: int) -> torch.Tensor:
    """Upstream's masks placed in the model runner's logits rows: draft rows as the rejection sampler
    masks target_logits (apply_with_spec_decode), bonus rows as the sampler masks bonus_logits (apply)."""
    target, bonus = logits_layout(num_draft_tokens)
    logits = torch.zeros(sum(num_draft_tokens) + len(num_draft_tokens), vocab)
    logits[target] = processor.apply_with_spec_decode(torch.zeros(sum(num_draft_tokens), vocab), num_draft_tokens)
    logits[bonus] = processor.apply(torch.zeros(len(num_draft_tokens), vocab))
    return logits


def apply_mask(logits: torch.Tensor, mask) -> torch.Tensor:
    """What the model runner does with a mask (two integer index_put_)."""
    for rows, cols in ((mask.rows, mask.toks), (mask.bonus_rows, mask.bonus_toks)):
        if len(rows):
            logits.index_put_((rows, cols), torch.tensor(NEG_INF, dtype=logits.dtype))
    return logits


def apply_cached(up, mtc, cache, processor, logits, drafts):
    """apply_min_tokens_spec_cached as the release's rejection sampler calls it."""
    if up.new:
        return mtc.apply_min_tokens_spec_cached(cache, processor, logits, drafts, pin_memory=False)
    return mtc.apply_min_tokens_spec_cached(cache, processor, logits, drafts)


class Counting:
    """A MinTokensLogitsProcessor whose apply_with_spec_decode (the helper's fall-back) is counted."""

    def __init__(self, processor):
        self.processor, self.fallbacks = processor, 0
        self.min_toks, self.pin_memory = processor.min_toks, False

    def apply_with_spec_decode(self, logits, num_draft_tokens):
        self.fallbacks += 1
        return self.processor.apply_with_spec_decode(logits, num_draft_tokens)


def rejection_namespace(up, mtc=None) -> dict:
    """What the rejection sampler module's code needs, as fakes or upstream's own."""
    namespace = {"torch": torch, "RejectionSampler": object, "SamplerOutput": SimpleNamespace, "HAS_TRITON": False,
                 "MAX_SPEC_LEN": 128, "PLACEHOLDER_TOKEN_ID": PLACEHOLDER_TOKEN_ID, "logging": logging,
                 "logger": QUIET, "MinTokensLogitsProcessor": up.MinTokens,
                 "generate_uniform_probs": up.generate_uniform_probs, "PIN_MEMORY": False,
                 "get_ascend_config": lambda: SimpleNamespace(enable_reduce_sample=False)}
    if mtc is not None:
        namespace.update(MinTokensSpecMaskCache=mtc.MinTokensSpecMaskCache,
                         apply_min_tokens_spec_cached=mtc.apply_min_tokens_spec_cached)
    return namespace


def rejection_sampler(cls, mtc=None, synthetic_rates=None):
    """An AscendRejectionSampler without its constructor (which needs a device): the state
    forward_greedy_presampled and apply_logits_processors read."""
    sampler = object.__new__(cls)
    sampler.synthetic_conditional_rates = synthetic_rates
    sampler.synthetic_mode = synthetic_rates is not None
    if mtc is not None:
        sampler._min_tokens_mask_cache = mtc.MinTokensSpecMaskCache()
    return sampler


@pytest.fixture(scope="module")
def apply_logits_processors_pair(up, tree, mtc, version):
    """apply_logits_processors of the patched and of the pristine AscendRejectionSampler."""
    patched = load_defs(tree / REJECTION, ["AscendRejectionSampler"], rejection_namespace(up, mtc))
    pristine_cls = load_defs(pristine(version) / REJECTION, ["AscendRejectionSampler"], rejection_namespace(up))
    return rejection_sampler(patched["AscendRejectionSampler"], mtc), rejection_sampler(pristine_cls["AscendRejectionSampler"])


def sampling_metadata(processors, **changes):
    """An all-greedy SamplingMetadata with nothing that touches the logits but ``processors``."""
    fields = {"all_greedy": True, "all_random": False, "temperature": None, "max_num_logprobs": None,
              "logprob_token_ids": None, "no_penalties": True, "allowed_token_ids_mask": None, "bad_words_token_ids": {},
              "thinking_budget_state_holder": None, "output_token_ids": [], "spec_token_ids": None,
              "logitsprocs": SimpleNamespace(non_argmax_invariant=list(processors))}
    return SimpleNamespace(**{**fields, **changes})


@given(steps=episode_steps(), k=st.integers(1, 4), tp=st.sampled_from([1, 2, 3, 4]))
@settings(max_examples=150, deadline=None)
def test_min_tokens_masks_equal_upstream_every_step(up, mtc, apply_logits_processors_pair, steps, k, tp):
    vocab = 41
    bounds = [vocab * r // tp for r in range(tp + 1)]  # uneven shards when tp does not divide 41
    shards = list(itertools.pairwise(bounds))
    patched, pristine_sampler = apply_logits_processors_pair
    patched._min_tokens_mask_cache = mtc.MinTokensSpecMaskCache()
    runner_caches = [mtc.MinTokensSpecMaskCache() for _ in shards]
    for episode, drafts in run_episode(up, steps, k):
        processor = episode.processor
        meta, spec = sampling_metadata([processor]), SimpleNamespace(num_draft_tokens=drafts)
        # Rejection sampler: the target rows, full vocabulary, patched against pristine.
        logits = target_logits(episode, drafts, vocab)
        want = pristine_sampler.apply_logits_processors(logits.clone(), meta, spec)
        got = patched.apply_logits_processors(logits.clone(), meta, spec)
        assert torch.equal(got, want)
        structured = any(entry[3] for entry in processor.min_toks.values() if entry[2]) if up.new else False
        event("structured output with min_tokens" if structured else "plain min_tokens" if processor.min_toks
              else "no min_tokens")
        # Model runner: every logits row, one vocab shard per rank, local columns.
        runner_want = upstream_runner_mask(processor, drafts, vocab)
        for cache, (start, end) in zip(runner_caches, shards):
            mask = cache.get_min_tokens_mask(processor.min_toks, drafts, torch.device("cpu"), pin_memory=False,
                                             vocab_range=(start, end), interleaved=True)
            if structured:  # upstream may give stop tokens back by looking at the whole row: the full path
                assert mask is None
                continue
            local = apply_mask(torch.zeros(runner_want.shape[0], end - start), mask)
            assert torch.equal(local, runner_want[:, start:end])


@given(steps=episode_steps(), k=st.integers(1, 4))
@settings(max_examples=120, deadline=None)
def test_min_tokens_mask_is_rebuilt_exactly_when_the_structure_changes(up, mtc, steps, k):
    """Steady steps reuse the device tensors; a rebuild happens on, and only on, a new structure
    (rows, stop sets, draft counts). Off the steady state (and with structured output) upstream's
    apply_with_spec_decode runs."""
    builds = []
    real = mtc.mask_to_device
    cache, last_key = mtc.MinTokensSpecMaskCache(), None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mtc, "mask_to_device", lambda *args, **kw: builds.append(1) or real(*args, **kw))
        for episode, drafts in run_episode(up, steps, k):
            min_toks = episode.processor.min_toks
            processor, before = Counting(episode.processor), len(builds)
            apply_cached(up, mtc, cache, processor, torch.zeros(sum(drafts), 41), drafts)
            key = mtc.min_tokens_spec_steady_structure(min_toks, drafts) if min_toks else None
            assert processor.fallbacks == (1 if min_toks and key is None else 0)
            if key is not None:
                assert len(builds) - before == (key != last_key)
                event("rebuilt" if key != last_key else "served from cache")
                last_key = key
            else:
                assert len(builds) == before
                event("upstream's apply_with_spec_decode" if min_toks else "no min_tokens")


def entry(up, min_tokens, output, stops, structured=False):
    """One MinTokensLogitsProcessor.min_toks value as the release's vLLM writes it (add_request)."""
    return (min_tokens, output, stops, structured) if up.new else (min_tokens, output, stops)


def test_steady_structure_ignores_output_growth_but_not_rows_or_stops(up, mtc):
    out = [1, 2]
    min_toks = {0: entry(up, 20, out, {5, 6}), 1: entry(up, 9, [], {5})}
    key = mtc.min_tokens_spec_steady_structure(min_toks, [3, 3])
    out.append(3)
    assert mtc.min_tokens_spec_steady_structure(min_toks, [3, 3]) == key
    assert mtc.min_tokens_spec_steady_structure({1: min_toks[0], 0: min_toks[1]}, [3, 3]) != key
    assert mtc.min_tokens_spec_steady_structure({0: entry(up, 20, out, {5, 7}), 1: min_toks[1]}, [3, 3]) != key
    assert mtc.min_tokens_spec_steady_structure(min_toks, [3, 2]) != key
    assert mtc.min_tokens_spec_steady_structure({0: entry(up, 5, out, {5})}, [3]) is None  # 2 left < 3 drafts
    assert mtc.min_tokens_spec_steady_structure({4: entry(up, 20, [], {5})}, [3, 3]) is None  # stale row


def test_structured_output_requests_are_left_to_upstream(up, mtc):
    """vLLM 0.30: a structured-output request's stop tokens come back when masking would empty its
    row (builtin.py:254-277), which depends on the step's logits: no cached mask for it, in any layout."""
    if not up.new:
        pytest.skip("vLLM 0.23's MinTokens entries know no structured output")
    min_toks = {0: (20, [], {5}, False), 1: (20, [], {6}, True)}
    assert mtc.min_tokens_spec_steady_structure(min_toks, [2, 2]) is None
    assert mtc.min_tokens_mask_indices(min_toks, [2, 2], vocab_range=(0, 8), interleaved=True) is None
    assert mtc.min_tokens_spec_steady_structure({1: (20, [], set(), True)}, [2, 2]) == ((2, 2), ())  # no stop ids


def test_stop_set_mutated_in_place_is_not_served_stale(up, mtc):
    stops = {5}
    min_toks = {0: entry(up, 20, [], stops)}
    cache = mtc.MinTokensSpecMaskCache()
    first = cache.get_min_tokens_spec_mask_indices(min_toks, [2], torch.device("cpu"), pin_memory=False)
    stops.add(9)
    second = cache.get_min_tokens_spec_mask_indices(min_toks, [2], torch.device("cpu"), pin_memory=False)
    assert sorted(second.toks.tolist()) == [5, 5, 9, 9] and first is not second


def test_masks_are_int64_index_tensors_and_the_value_matches_the_logits_dtype(up, mtc):
    cache = mtc.MinTokensSpecMaskCache()
    min_toks = {1: entry(up, 9, [], {3, 4})}
    mask = cache.get_min_tokens_spec_mask_indices(min_toks, [2, 2], torch.device("cpu"), pin_memory=False)
    assert all(part.dtype == torch.int64 for part in mask)
    assert mask.rows.tolist() == [2, 2, 3, 3] and mask.bonus_rows.tolist() == [1, 1]
    logits = torch.zeros(4, 8, dtype=torch.bfloat16)
    apply_cached(up, mtc, cache, SimpleNamespace(min_toks=min_toks, pin_memory=False), logits, [2, 2])
    assert cache.neg_inf(logits).dtype == torch.bfloat16
    assert (logits == NEG_INF).nonzero().tolist() == [[2, 3], [2, 4], [3, 3], [3, 4]]


# ---------------------------------------------------------------------------------------------
# sampler-greedy-bf16-fastpath


class Recording:
    """A Sampler base that only records that Sampler.forward ran (the gate test's base)."""

    calls = 0

    def forward(self, logits, sampling_metadata, predict_bonus_token=False, logprobs_mode_override=None):
        Recording.calls += 1
        return None


class IdentityProcessor:
    """A custom non-argmax-invariant processor: the gate cannot know what it does."""

    def apply(self, logits):
        return logits


class Holder:
    def __init__(self, tracked):
        self.tracked = tracked

    def has_tracked_requests(self):
        return self.tracked

    def update_state(self, *args, **kwargs):
        pass

    def apply_to_logits(self, logits, *args, **kwargs):
        return logits


def sampler_fakes(up, base) -> dict:
    return {"torch": torch, "Sampler": base, "SamplerOutput": SimpleNamespace, "MinTokensLogitsProcessor": up.MinTokens,
            "LogitBiasLogitsProcessor": up.LogitBias, "DEFAULT_LOGPROBS_MODE": "raw_logprobs", "HAS_TRITON": False,
            "logger": QUIET, "get_ascend_config": lambda: SimpleNamespace(enable_reduce_sample=False)}


@pytest.fixture(scope="module")
def samplers(up, tree):
    """The patched AscendSampler over a recording base, over vLLM's real Sampler, and that Sampler."""
    recording = load_defs(tree / SAMPLER, ["AscendSampler", "_is_idle"], sampler_fakes(up, Recording))["AscendSampler"]
    real = load_defs(tree / SAMPLER, ["AscendSampler", "_is_idle"], sampler_fakes(up, up.Sampler))["AscendSampler"]
    upstream_sampler = up.Sampler()
    ascend = object.__new__(real)
    ascend.__dict__.update(upstream_sampler.__dict__)  # Sampler.__init__'s state, without AscendSampler's init
    return SimpleNamespace(gate=object.__new__(recording), ascend=ascend, upstream=upstream_sampler)


def min_tokens_active(up):
    processor = up.MinTokens(None, torch.device("cpu"), False)
    processor.update_state(batch_update(2, added=[(0, Request(9, {3, 4}).params(), None, [])]))
    return processor


def logit_bias_active(up):
    processor = up.LogitBias(None, torch.device("cpu"), False)
    processor.update_state(batch_update(2, added=[(1, SimpleNamespace(logit_bias={4: 50.0}), None, [])]))
    return processor


def idle(up):
    return [up.MinTokens(None, torch.device("cpu"), False), up.LogitBias(None, torch.device("cpu"), False)]


@pytest.mark.parametrize("changes,dtype,fast", [
    ({}, torch.bfloat16, True),
    ({}, torch.float16, True),
    ({}, torch.float32, True),
    ({}, torch.float64, False),
    ({"all_greedy": False}, torch.bfloat16, False),
    ({"max_num_logprobs": 5}, torch.bfloat16, False),
    ({"max_num_logprobs": -1}, torch.bfloat16, False),  # the rejection sampler's bonus call
    ({"logprob_token_ids": {0: [1]}}, torch.bfloat16, False),
    ({"no_penalties": False}, torch.bfloat16, False),
    ({"allowed_token_ids_mask": "mask"}, torch.bfloat16, False),
    ({"bad_words_token_ids": {0: [[3]]}, "output_token_ids": [[], []]}, torch.bfloat16, False),
    ({"thinking_budget_state_holder": Holder(True)}, torch.bfloat16, False),
    ({"thinking_budget_state_holder": Holder(False)}, torch.bfloat16, True),
    ({"logitsprocs": idle}, torch.bfloat16, True),
    ({"logitsprocs": lambda up: [min_tokens_active(up)]}, torch.bfloat16, False),
    ({"logitsprocs": lambda up: [logit_bias_active(up)]}, torch.bfloat16, False),
    ({"logitsprocs": lambda up: [IdentityProcessor()]}, torch.bfloat16, False),
], ids=["bf16", "fp16", "fp32", "fp64", "sampled", "logprobs", "bonus-call", "logprob-token-ids", "penalties",
        "allowed-tokens", "bad-words", "thinking-budget", "thinking-idle", "idle-processors", "min-tokens",
        "logit-bias", "custom-processor"])
def test_fast_path_only_where_upstream_returns_just_the_argmax(up, samplers, changes, dtype, fast):
    """The gate, and for every all-greedy batch without logprobs or penalties: the patched
    AscendSampler over vLLM's real Sampler returns what that Sampler.forward returns."""
    logits = (torch.randn(2, 50, generator=torch.Generator().manual_seed(7)) * 4).to(dtype)
    logits[0, 3] = logits[0].max() + 1  # a stop token MinTokens masks, a bias target below
    changes = dict(changes)
    processors = changes.pop("logitsprocs", lambda up: [])(up)
    if changes.get("allowed_token_ids_mask") == "mask":
        changes["allowed_token_ids_mask"] = torch.zeros(2, 50, dtype=torch.bool).index_fill_(1, torch.tensor([3]), True)
    meta = sampling_metadata(processors, **changes)
    calls = Recording.calls
    samplers.gate.forward(logits, meta)
    assert (Recording.calls == calls) == fast
    if meta.all_greedy and meta.max_num_logprobs is None and meta.no_penalties and not meta.logprob_token_ids:
        want = samplers.upstream.forward(logits.clone(), meta)
        got = samplers.ascend.forward(logits.clone(), meta)
        assert got.logprobs_tensors is None and want.logprobs_tensors is None
        assert got.sampled_token_ids.dtype == torch.int32
        assert torch.equal(got.sampled_token_ids, want.sampled_token_ids)
        if not fast and processors and not isinstance(processors[0], IdentityProcessor):
            # the processor changes the argmax here: a fast path would have been wrong
            assert not torch.equal(want.sampled_token_ids.view(-1), logits.float().argmax(-1).to(torch.int32))


@given(values=st.lists(st.floats(-70, 70, allow_nan=False, width=16), min_size=2, max_size=400),
       coarse=st.booleans(), rows=st.integers(1, 3))
@settings(max_examples=300, deadline=None)
def test_bf16_argmax_equals_fp32_argmax(values, coarse, rows):
    """Sampler.forward's argmax after the fp32 cast against the fast path's, ties included
    (``coarse`` rounds to few distinct values)."""
    logits = torch.tensor(values * rows).view(rows, -1)
    logits = (logits.round() if coarse else logits).to(torch.bfloat16)
    assert torch.equal(logits.argmax(dim=-1), logits.to(torch.float32).argmax(dim=-1))


@pytest.mark.parametrize("vocab", [248320, 151936])
def test_bf16_argmax_equals_fp32_argmax_at_full_vocab(vocab):
    logits = (torch.randn(8, vocab, generator=torch.Generator().manual_seed(vocab)) * 6).to(torch.bfloat16)
    logits[3, 1000] = logits[3, 200000 % vocab] = logits[3].max() + 1  # a tie at the top
    assert torch.equal(logits.argmax(dim=-1), logits.to(torch.float32).argmax(dim=-1))


# ---------------------------------------------------------------------------------------------
# rejection-greedy-presampled

REJECTION_HELPERS = ["rejection_greedy_sample_pytorch", "rejection_greedy_sample_spec_len_1_pytorch"]


@pytest.fixture(scope="module")
def rejection(up, tree, mtc):
    defs = load_defs(tree / REJECTION, ["AscendRejectionSampler", "rejection_greedy_sample", *REJECTION_HELPERS],
                     rejection_namespace(up, mtc))
    return defs["AscendRejectionSampler"]


@pytest.fixture(scope="module")
def upstream_greedy(version):
    """The pristine tree's pytorch greedy rejection and its dispatch in rejection_sample (HAS_TRITON
    false, all greedy; 0.23.0 rejection_sampler.py:474-506, 0.30.0rc2 :508-554)."""
    defs = load_defs(pristine(version) / REJECTION, REJECTION_HELPERS, {"torch": torch})

    def run(num_draft_tokens, cu, draft_ids, target_argmax, bonus_ids, **synthetic):
        out = torch.full((len(num_draft_tokens), max(num_draft_tokens) + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
        if min(num_draft_tokens) == 1 and max(num_draft_tokens) == 1:
            defs["rejection_greedy_sample_spec_len_1_pytorch"](out, draft_ids, target_argmax, bonus_ids, **synthetic)
        else:
            defs["rejection_greedy_sample_pytorch"](out, cu, draft_ids, target_argmax, bonus_ids, num_draft_tokens,
                                                    max(num_draft_tokens), None, **synthetic)
        return out
    return run


def greedy_verify(num_draft_tokens, draft_ids, target_argmax, bonus_ids, uniform=None, rates=None) -> torch.Tensor:
    """vLLM's rejection_greedy_sample_kernel (v1/sample/rejection_sampler.py, 0.30.0 :719-773),
    one request at a time: accept drafts while they equal the target argmax (synthetic mode: while
    uniform < the position's rate and the draft is not padding), write the target argmax at the
    first rejected position (the accepted draft, which equals it, otherwise), and the bonus token
    when nothing was rejected."""
    out = torch.full((len(num_draft_tokens), max(num_draft_tokens) + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
    start = 0
    for req, num_draft in enumerate(num_draft_tokens):
        rejected = False
        for pos in range(num_draft):
            draft, target = int(draft_ids[start + pos]), int(target_argmax[start + pos])
            if rates is not None:
                accepted = bool(uniform[start + pos] < rates[pos]) and draft >= 0
                out[req, pos] = draft if accepted else target
                rejected = not accepted
            else:
                out[req, pos] = target
                rejected = draft != target
            if rejected:
                break
        if not rejected:
            out[req, num_draft] = bonus_ids[req, 0]
        start += num_draft
    return out


def spec_metadata(num_draft_tokens, draft_ids):
    target, bonus = logits_layout(num_draft_tokens)
    return SimpleNamespace(num_draft_tokens=list(num_draft_tokens), max_spec_len=max(num_draft_tokens),
                           cu_num_draft_tokens=torch.tensor(np.cumsum(num_draft_tokens), dtype=torch.int32),
                           draft_token_ids=draft_ids, target_logits_indices=target, bonus_logits_indices=bonus)


GREEDY = SimpleNamespace(all_greedy=True, max_num_logprobs=None, generators={})


@st.composite
def spec_batches(draw):
    num_draft = draw(st.one_of(st.lists(st.just(1), min_size=1, max_size=6),  # the spec-len-1 kernel
                               st.lists(st.integers(0, 5), min_size=1, max_size=6).filter(lambda n: max(n) > 0)))
    vocab = draw(st.integers(2, 50))
    target = torch.tensor(draw(st.lists(st.integers(0, vocab - 1), min_size=sum(num_draft), max_size=sum(num_draft))))
    hits = draw(st.lists(st.floats(0, 1), min_size=sum(num_draft), max_size=sum(num_draft)))
    draft = torch.tensor([t if hit < 0.7 else (t + 1) % vocab for t, hit in zip(target.tolist(), hits)],
                         dtype=torch.int32)
    bonus = torch.tensor(draw(st.lists(st.integers(0, vocab - 1), min_size=len(num_draft), max_size=len(num_draft))),
                         dtype=torch.int32).view(-1, 1)
    return num_draft, draft, target.to(torch.int64), bonus


@given(batch=spec_batches())
@settings(max_examples=300, deadline=None)
def test_forward_greedy_presampled_verifies_like_upstream(rejection, upstream_greedy, batch):
    num_draft, draft, target, bonus = batch
    meta = spec_metadata(num_draft, draft)
    out = rejection_sampler(rejection).forward_greedy_presampled(meta, target, bonus, GREEDY)
    assert out.logprobs_tensors is None and out.sampled_token_ids.dtype == torch.int32
    assert torch.equal(out.sampled_token_ids, greedy_verify(num_draft, draft, target, bonus))
    assert torch.equal(out.sampled_token_ids, upstream_greedy(num_draft, meta.cu_num_draft_tokens, draft, target, bonus))


@given(batch=spec_batches(), rates=st.lists(st.floats(0, 1), min_size=5, max_size=5), seed=st.integers(0, 2**16))
@settings(max_examples=150, deadline=None)
def test_synthetic_acceptance_draws_and_verifies_like_upstream(up, rejection, upstream_greedy, batch, rates, seed):
    """vLLM 0.30's synthetic rejection mode: the same uniform numbers as rejection_sample draws
    (generate_uniform_probs, then float32), the same tokens as the kernel and the pristine kernels."""
    if not up.new:
        pytest.skip("vLLM 0.23 has no synthetic rejection mode")
    num_draft, draft, target, bonus = batch
    meta = spec_metadata(num_draft, draft)
    rates_t = torch.tensor(rates, dtype=torch.float32)
    torch.manual_seed(seed)
    out = rejection_sampler(rejection, synthetic_rates=rates_t).forward_greedy_presampled(meta, target, bonus, GREEDY)
    torch.manual_seed(seed)
    uniform = up.generate_uniform_probs(len(draft), num_draft, {}, torch.device("cpu")).to(torch.float32)
    assert torch.equal(out.sampled_token_ids, greedy_verify(num_draft, draft, target, bonus, uniform, rates_t))
    assert torch.equal(out.sampled_token_ids, upstream_greedy(
        num_draft, meta.cu_num_draft_tokens, draft, target, bonus,
        uniform_probs=uniform, synthetic_conditional_rates=rates_t, synthetic_mode=True))


def test_forward_greedy_presampled_refuses_sampled_or_logprob_batches(rejection):
    meta = spec_metadata([1], torch.tensor([3], dtype=torch.int32))
    for bad in (SimpleNamespace(all_greedy=False, max_num_logprobs=None, generators={}),
                SimpleNamespace(all_greedy=True, max_num_logprobs=2, generators={})):
        with pytest.raises(AssertionError):
            rejection_sampler(rejection).forward_greedy_presampled(
                meta, torch.tensor([3]), torch.tensor([[4]], dtype=torch.int32), bad)


@given(batch=spec_batches(), tp=st.sampled_from([2, 4]), data=st.data())
@settings(max_examples=100, deadline=None)
def test_presampled_verification_of_shard_logits_equals_upstream(up, mtc, vpa, rejection, upstream_greedy, batch, tp,
                                                                 data):
    """The whole verify path as the model runner wires it (shard logits, shard MinTokens masks from the
    cache, vocab-parallel argmax, target/bonus rows split by the logits layout, forward_greedy_presampled)
    against upstream's (gathered logits, vLLM's MinTokens on target and bonus logits, argmax, greedy
    rejection)."""
    num_draft, draft, _, _ = batch
    vocab = 97
    rows = sum(num_draft) + len(num_draft)
    full = torch.tensor(data.draw(st.lists(st.integers(-3, 3), min_size=rows * vocab, max_size=rows * vocab)),
                        dtype=torch.float32).view(rows, vocab).to(torch.bfloat16)
    processor = up.MinTokens(None, torch.device("cpu"), False)
    added = [(req, Request(data.draw(st.integers(1, 8)), data.draw(st.sets(st.integers(0, vocab - 1), max_size=4)),
                           output=[0] * data.draw(st.integers(0, 6))))
             for req in sorted(data.draw(st.sets(st.integers(0, len(num_draft) - 1))))]
    processor.update_state(batch_update(len(num_draft), added=[(i, r.params(), None, r.output) for i, r in added]))
    meta = spec_metadata(num_draft, draft)

    # Upstream: the rejection sampler's target logits and the sampler's bonus logits, fp32.
    target_logits = processor.apply_with_spec_decode(full[meta.target_logits_indices].float(), num_draft)
    bonus_logits = processor.apply(full[meta.bonus_logits_indices].float())
    want = upstream_greedy(num_draft, meta.cu_num_draft_tokens, draft, target_logits.argmax(-1),
                           bonus_logits.argmax(-1).to(torch.int32).view(-1, 1))

    # Ours, on every rank.
    layout = shard_layout(up, vocab, tp)
    local = shards_of(full, layout)
    for shard, (start, valid, _) in zip(local, layout):
        mask = mtc.MinTokensSpecMaskCache().get_min_tokens_mask(
            processor.min_toks, num_draft, torch.device("cpu"), pin_memory=False, vocab_range=(start, start + valid),
            interleaved=True)
        apply_mask(shard, mask)
    for presampled in all_ranks_argmax(vpa, local, layout):
        bonus = presampled[meta.bonus_logits_indices].to(torch.int32).unsqueeze(-1)
        got = rejection_sampler(rejection).forward_greedy_presampled(
            meta, presampled[meta.target_logits_indices], bonus, GREEDY)
        assert torch.equal(got.sampled_token_ids, want)


# ---------------------------------------------------------------------------------------------
# 0.23.0.post1


def test_post1_patched_files_under_test_are_those_of_0_23_0(tmp_path):
    """The 0.23.x patches also serve 0.23.0.post1, whose only change here is outside these files
    (model_runner_v1.py's _dummy_run): the files these tests load are byte-identical on both
    patched trees, so the 0.23.0 runs cover post1."""
    trees = [patched_tree(tmp_path, RECIPES, v) for v in ("0.23.0", "0.23.0.post1")]
    for rel in (ARGMAX, MIN_TOKENS, SAMPLER, REJECTION, EMBEDDING):
        assert (trees[0] / rel).read_bytes() == (trees[1] / rel).read_bytes(), rel
