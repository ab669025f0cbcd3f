"""The sampler recipes on CPU: the new helper modules and methods of the patched tree against upstream.

- sampler-vocab-parallel-greedy-argmax: ``sample/vocab_parallel_argmax.py`` against the argmax of
  the gathered logits, on vLLM's own vocab sharding (padding, uneven shards, empty shards), TP 1-8,
  bf16/fp16/fp32, ties across shards, and LogitsProcessor's soft cap / scale.
- sampler-min-tokens-spec-mask-cache: ``sample/min_tokens_cache.py`` against a port of vLLM's
  MinTokensLogitsProcessor over random request episodes (requests join, leave and move rows,
  outputs grow, draft counts change): the same -inf positions every step, in the rejection
  sampler's layout and, per vocab shard, in the model runner's interleaved layout; rebuilt only
  when the structure changes.
- sampler-greedy-bf16-fastpath: ``AscendSampler.forward`` of the patched ``sample/sampler.py``
  (run among fakes) takes the argmax without the fp32 cast exactly when upstream would return
  nothing but that argmax, and the argmax is the same.
- rejection-greedy-presampled: ``AscendRejectionSampler.forward_greedy_presampled`` of the patched
  ``sample/rejection_sampler.py`` against a per-request greedy-verification reference and the
  unpatched tree's ``rejection_greedy_sample_pytorch``, alone and fed by the shard argmax with
  MinTokens masks, as the model runner feeds it.

Ports cite vllm-0.23.0 (``vllm/...``) and vllm-ascend-0.23.0 (``vllm_ascend/...``) lines. The NPU
kernels (triton greedy rejection, HCCL all-gather) and the model runner glue are not run here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
from hypothesis import event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from patched_tree import load_defs, load_module, patched_tree  # noqa: E402  (puts tests/ on sys.path)

from compat_support import pristine  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPES = ["sampler-min-tokens-spec-mask-cache", "sampler-vocab-parallel-greedy-argmax",
           "sampler-greedy-bf16-fastpath", "rejection-greedy-presampled"]
ARGMAX = "vllm_ascend/sample/vocab_parallel_argmax.py"
MIN_TOKENS = "vllm_ascend/sample/min_tokens_cache.py"
SAMPLER = "vllm_ascend/sample/sampler.py"
REJECTION = "vllm_ascend/sample/rejection_sampler.py"
NEG_INF = float("-inf")
PLACEHOLDER_TOKEN_ID = -1  # vllm/v1/sample/rejection_sampler.py:30


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return patched_tree(tmp_path_factory.mktemp("sampler"), RECIPES)


@pytest.fixture(scope="module")
def vpa(tree):
    return load_module(tree / ARGMAX)


@pytest.fixture(scope="module")
def mtc(tree):
    return load_module(tree / MIN_TOKENS)


# ---------------------------------------------------------------------------------------------
# vLLM's vocab sharding and LogitsProcessor, ported


def pad_vocab_size(vocab: int, pad_to: int = 64) -> int:
    """vllm/model_executor/layers/vocab_parallel_embedding.py:81-83 (DEFAULT_VOCAB_PADDING_SIZE 64)."""
    return (vocab + pad_to - 1) // pad_to * pad_to


def shard_layout(vocab: int, tp: int) -> list[tuple[int, int, int]]:
    """(org_vocab_start_index, num_org_elements, local width) per rank: VocabParallelEmbedding
    with no added vocab, vocab_parallel_embedding.py:94-101 and _get_indices :322-357."""
    per_rank = pad_vocab_size(vocab) // tp
    layout = []
    for rank in range(tp):
        start, end = min(rank * per_rank, vocab), min((rank + 1) * per_rank, vocab)
        layout.append((start, end - start, per_rank))
    return layout


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
    """vocab_parallel_argmax on every rank, with an all-gather that concatenates the ranks' pairs."""
    pairs = [vpa.local_argmax_pair(shard, start, valid) for shard, (start, valid, _) in zip(local, layout)]
    results = []
    for rank, (shard, (start, valid, _)) in enumerate(zip(local, layout)):
        def all_gather(mine, rank=rank):
            torch.testing.assert_close(mine, pairs[rank], rtol=0, atol=0, equal_nan=True)
            return torch.cat(pairs, dim=-1)
        results.append(vpa.vocab_parallel_argmax(shard, start, valid, all_gather))
    return results


def assert_same_argmax(vpa, full: torch.Tensor, tp: int) -> None:
    layout = shard_layout(full.shape[-1], tp)
    want = full.argmax(dim=-1)  # the first maximum, as on the gathered logits
    for got in all_ranks_argmax(vpa, shards_of(full, layout), layout):
        assert got.dtype == torch.int64
        assert torch.equal(got, want)


# ---------------------------------------------------------------------------------------------
# sampler-vocab-parallel-greedy-argmax


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("vocab", [248320, 151936, 32001, 1000, 7], ids=lambda v: f"V{v}")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_vocab_parallel_argmax_equals_full_argmax(vpa, tp, vocab, dtype):
    generator = torch.Generator().manual_seed(vocab * 31 + tp)
    full = (torch.randn(3, vocab, generator=generator) * 8).to(dtype)
    full[2] = full[2].clamp(max=0)  # a row whose best real logit is below the padding's 0-weight logit
    assert_same_argmax(vpa, full, tp)


def test_layouts_cover_uneven_and_empty_shards():
    assert shard_layout(32001, 2) == [(0, 16032, 16032), (16032, 15969, 16032)]
    assert shard_layout(7, 8)[1:] == [(7, 0, 8)] * 7  # ranks 1-7 hold padding only
    assert shard_layout(248320, 2) == [(0, 124160, 124160), (124160, 124160, 124160)]


def test_upstream_reduce_sample_offset_is_wrong_for_uneven_shards():
    """Why exact offsets matter: enable_reduce_sample's ``local_idx + rank * V_local``
    (vllm_ascend/sample/sampler.py:117, V_local = num_org_embeddings_per_partition) misplaces rank 1."""
    _, (start1, valid1, _) = shard_layout(32001, 2)
    assert 1 * valid1 != start1


@given(tp=st.sampled_from([1, 2, 4, 8]), vocab=st.integers(1, 300), rows=st.integers(1, 4),
       levels=st.integers(1, 3), dtype=st.sampled_from([torch.bfloat16, torch.float32]), data=st.data())
@settings(max_examples=300, deadline=None)
def test_vocab_parallel_argmax_ties_pick_the_first_index(vpa, tp, vocab, rows, levels, dtype, data):
    """Few distinct values, so the maximum is shared within and across shards."""
    values = data.draw(st.lists(st.integers(0, levels), min_size=rows * vocab, max_size=rows * vocab))
    full = torch.tensor(values, dtype=torch.float32).view(rows, vocab).to(dtype)
    assert_same_argmax(vpa, full, tp)


def test_vocab_parallel_argmax_special_values(vpa):
    full = torch.zeros(3, 130)
    full[0] = NEG_INF  # every token masked: id 0, as argmax gives
    full[1, 70] = float("inf")
    full[1, 129] = float("inf")
    full[2, 90] = float("nan")  # NaN ranks first in torch.argmax; it must survive the exchange
    assert_same_argmax(vpa, full, 2)


def test_token_ids_stay_exact_in_float32_up_to_two_to_the_24(vpa):
    shard = torch.zeros(1, 8)
    shard[0, 7] = 1.0
    start = vpa.FLOAT32_EXACT_INTS - 8
    assert vpa.vocab_parallel_argmax(shard, start, 8, lambda pair: pair).item() == start + 7
    with pytest.raises(ValueError, match="exact"):
        vpa.local_argmax_pair(shard, start + 1, 8)
    with pytest.raises(ValueError, match="float64"):
        vpa.local_argmax_pair(shard.double(), 0, 8)


class LogitsProcessor:
    """vllm/model_executor/layers/logits_processor.py:29-72, 89-100 on one process: _get_logits
    with the TP all-gather done by concatenating the ranks' shards, then soft cap and scale."""

    def __init__(self, vocab: int, scale: float = 1.0, soft_cap: float | None = None):
        self.org_vocab_size, self.scale, self.soft_cap, self.logits_as_input = vocab, scale, soft_cap, False

    def forward(self, lm_heads, hidden_states):
        logits = torch.cat([head.quant_method.apply(head, hidden_states, bias=None) for head in lm_heads], -1)
        logits = logits[..., : self.org_vocab_size]
        if self.soft_cap is not None:
            logits = logits / self.soft_cap
            logits = torch.tanh(logits)
            logits = logits * self.soft_cap
        if self.scale != 1.0:
            logits *= self.scale
        return logits


class AscendLogitsProcessor(LogitsProcessor):
    """vllm_ascend/ops/vocab_parallel_embedding.py:285 overrides _get_logits only."""


class UnquantizedEmbeddingMethod:
    @staticmethod
    def apply(layer, x, bias=None):
        return torch.nn.functional.linear(x, layer.weight, bias)


def lm_head_shards(weight: torch.Tensor, tp: int, group) -> list[SimpleNamespace]:
    """ParallelLMHead per rank: its padded rows of ``weight`` (zero padding rows) and shard indices."""
    heads = []
    for rank, (start, valid, width) in enumerate(shard_layout(weight.shape[0], tp)):
        local = torch.zeros(width, weight.shape[1], dtype=weight.dtype)
        local[:valid] = weight[start:start + valid]
        shard = SimpleNamespace(org_vocab_start_index=start, org_vocab_end_index=start + valid,
                                num_org_elements=valid, num_added_elements=0)
        heads.append(SimpleNamespace(weight=local, quant_method=UnquantizedEmbeddingMethod(), shard_indices=shard,
                                     comm_group=group, tp_size=tp, tp_rank=rank, org_vocab_size=weight.shape[0]))
    return heads


@pytest.mark.parametrize("soft_cap,scale", [(None, 1.0), (30.0, 1.0), (None, 0.5), (50.0, -2.0)])
@pytest.mark.parametrize("tp", [2, 4])
def test_shard_local_logits_and_argmax_equal_the_logits_processor(vpa, soft_cap, scale, tp):
    vocab, hidden = 1001, 16
    generator = torch.Generator().manual_seed(tp)
    weight = torch.randn(vocab, hidden, generator=generator).to(torch.bfloat16)
    states = torch.randn(5, hidden, generator=generator).to(torch.bfloat16)
    processor = AscendLogitsProcessor(vocab, scale=scale, soft_cap=soft_cap)
    heads = lm_head_shards(weight, tp, group=None)
    full = processor.forward(heads, states)
    local = [vpa.ShardLogitsHead(h, processor, h.shard_indices.org_vocab_start_index,
                                 h.shard_indices.num_org_elements).local_logits(states) for h in heads]
    layout = shard_layout(vocab, tp)
    assert torch.equal(torch.cat([shard[:, :valid] for shard, (_, valid, _) in zip(local, layout)], -1), full)
    for got in all_ranks_argmax(vpa, local, layout):
        assert torch.equal(got, full.argmax(dim=-1))


# shard_logits_head: which models qualify. Each compute_logits below is a real shape from vLLM
# (qwen3_5.py:515-519, qwen3_5_mtp.py:432-437, qwen3_vl.py:2844-2848, llama.py:565-570) or a
# near miss.


class Group:
    world_size, rank_in_group = 2, 1


GROUP = Group()


class PlainHead:
    def __init__(self, lm_head=None, processor=None):
        self.lm_head = lm_head if lm_head is not None else lm_head_shards(torch.zeros(130, 4), 2, GROUP)[1]
        self.logits_processor = processor if processor is not None else AscendLogitsProcessor(130)

    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states)


class MTPHead(PlainHead):
    def compute_logits(self, hidden_states, spec_step_idx: int = 0):
        """Qwen3_5MTP's signature."""
        return self.logits_processor(self.lm_head, hidden_states)


class NamedResultHead(PlainHead):
    def compute_logits(self, hidden_states):
        """llama.py:565-570 and qwen3.py:328-333 name the result first."""
        logits = self.logits_processor(self.lm_head, hidden_states)
        return logits


class OtherResultHead(PlainHead):
    def compute_logits(self, hidden_states):
        logits = self.logits_processor(self.lm_head, hidden_states)
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


class CustomProcessor(LogitsProcessor):
    def forward(self, lm_heads, hidden_states):
        return super().forward(lm_heads, hidden_states) + 1


def wide_head():
    head = lm_head_shards(torch.zeros(130, 4), 2, GROUP)[1]
    head.shard_indices.num_added_elements = 3
    return head


@pytest.mark.parametrize("model,qualifies", [
    (PlainHead(), True),
    (MTPHead(), True),
    (NamedResultHead(), True),
    (OtherResultHead(), False),
    (Wrapper(PlainHead()), True),
    (Wrapper(Wrapper(MTPHead())), True),
    (Wrapper(Wrapper(Wrapper(Wrapper(PlainHead())))), False),
    (RemappedHead(), False),
    (ScaledHead(), False),
    (BiasedHead(), False),
    (PlainHead(processor=CustomProcessor(130)), False),
    (PlainHead(processor=AscendLogitsProcessor(128)), False),
    (PlainHead(lm_head=wide_head()), False),
    (PlainHead(lm_head=lm_head_shards(torch.zeros(130, 4), 2, Group())[1]), False),
    (PlainHead(lm_head=lm_head_shards(torch.zeros(130, 4), 4, GROUP)[1]), False),
    (PlainHead(lm_head=lm_head_shards(torch.zeros(130, 4), 2, GROUP)[0]), False),
], ids=["plain", "mtp", "named-result", "other-result", "wrapped", "wrapped-twice", "wrapped-too-deep", "remapped", "scaled", "bias",
        "custom-processor", "processor-vocab", "added-vocab", "other-group", "other-tp-size", "other-rank"])
def test_shard_logits_head_accepts_only_plain_lm_heads(vpa, model, qualifies):
    head = vpa.shard_logits_head(model, GROUP)
    assert (head is not None) == qualifies
    if head is not None:
        assert (head.vocab_start, head.num_valid) == (96, 34)  # rank 1 of 130 tokens padded to 192


def test_shard_logits_head_refuses_logits_input(vpa):
    processor = AscendLogitsProcessor(130)
    processor.logits_as_input = True
    assert vpa.shard_logits_head(PlainHead(processor=processor), GROUP) is None


# ---------------------------------------------------------------------------------------------
# sampler-min-tokens-spec-mask-cache


def upstream_spec_mask(min_toks, num_draft_tokens, vocab: int) -> torch.Tensor:
    """vllm/v1/sample/logits_processor/builtin.py:240-291 (apply_with_spec_decode) on zero logits."""
    logits = torch.zeros(sum(num_draft_tokens), vocab)
    neg_inf_tensor = torch.tensor(NEG_INF)
    if not min_toks:
        return logits
    num_draft_arr = np.array(num_draft_tokens, dtype=np.int64)
    cumsum = np.concatenate([[0], np.cumsum(num_draft_arr)])
    entries = [
        (req_idx, min_tok, len(out_tok_ids), list(stop_tok_ids))
        for req_idx, (min_tok, out_tok_ids, stop_tok_ids) in min_toks.items()
        if stop_tok_ids
    ]
    if not entries:
        return logits
    all_rows, all_toks = [], []
    for req_idx, min_tok, current_len, stop_toks in entries:
        remaining = min_tok - current_len
        n_mask = int(min(max(remaining, 0), num_draft_arr[req_idx]))
        if n_mask > 0:
            offset = cumsum[req_idx]
            row_indices = np.arange(offset, offset + n_mask, dtype=np.int64)
            n_stop = len(stop_toks)
            all_rows.append(np.repeat(row_indices, n_stop))
            all_toks.append(np.tile(stop_toks, n_mask))
    if all_rows:
        logits_slice = (torch.from_numpy(np.concatenate(all_rows)), torch.from_numpy(np.concatenate(all_toks)))
        logits.index_put_(logits_slice, neg_inf_tensor)
    return logits


def upstream_bonus_mask(min_toks, num_rows: int, vocab: int) -> torch.Tensor:
    """builtin.py:216-227 (logits_slice, as update_state builds it) and :234-238 (apply): what the
    sampler's MinTokens pass does to the bonus logits of a spec batch or the logits of a plain one."""
    logits = torch.zeros(num_rows, vocab)
    reqs, tok_ids = [], []
    for req, (_, _, stop_tok_ids) in min_toks.items():
        reqs.extend([req] * len(stop_tok_ids))
        tok_ids.extend(stop_tok_ids)
    if min_toks:
        logits.index_put_((torch.tensor(reqs, dtype=torch.int32), torch.tensor(tok_ids, dtype=torch.int32)),
                          torch.tensor(NEG_INF))
    return logits


def logits_layout(num_draft_tokens) -> tuple[torch.Tensor, torch.Tensor]:
    """target_logits_indices, bonus_logits_indices: vllm_ascend/worker/model_runner_v1.py:1543-1588
    (_calc_spec_decode_metadata) for the rows of the logits (num_draft + 1 per request)."""
    num_draft = np.array(num_draft_tokens, dtype=np.int32)
    num_sampled = num_draft + 1
    cu_num_sampled = np.cumsum(num_sampled)
    bonus = cu_num_sampled - 1
    cu_num_draft = np.cumsum(num_draft)
    offsets = np.repeat(cu_num_draft - num_draft, num_draft)
    target = np.repeat(cu_num_sampled - num_sampled, num_draft) + np.arange(cu_num_draft[-1]) - offsets
    return torch.from_numpy(target.astype(np.int64)), torch.from_numpy(bonus.astype(np.int64))


def upstream_runner_mask(min_toks, num_draft_tokens, vocab: int) -> torch.Tensor:
    """Upstream's masks placed in the model runner's logits rows: draft rows as the rejection
    sampler masks target_logits (rejection_sampler.py:141-143), bonus rows as the sampler masks
    bonus_logits (rejection_sampler.py:188-190 -> Sampler.apply_logits_processors)."""
    target, bonus = logits_layout(num_draft_tokens)
    logits = torch.zeros(sum(num_draft_tokens) + len(num_draft_tokens), vocab)
    logits[target] = upstream_spec_mask(min_toks, num_draft_tokens, vocab)
    logits[bonus] = upstream_bonus_mask(min_toks, len(num_draft_tokens), vocab)
    return logits


class MinTokensPort:
    """The MinTokensLogitsProcessor fields the helper reads (builtin.py:168-183); its
    apply_with_spec_decode (the helper's fall-back) is the port above, counted."""

    pin_memory = False

    def __init__(self, min_toks):
        self.min_toks, self.fallbacks = min_toks, 0

    def apply_with_spec_decode(self, logits, num_draft_tokens):
        self.fallbacks += 1
        logits[upstream_spec_mask(self.min_toks, num_draft_tokens, logits.shape[-1]) == NEG_INF] = NEG_INF
        return logits


def apply_mask(mtc, logits: torch.Tensor, mask) -> torch.Tensor:
    """What the model runner does with a mask (two integer index_put_)."""
    for rows, cols in ((mask.rows, mask.toks), (mask.bonus_rows, mask.bonus_toks)):
        if len(rows):
            logits.index_put_((rows, cols), torch.tensor(NEG_INF, dtype=logits.dtype))
    return logits


@dataclass
class Request:
    min_tokens: int
    stops: set[int]
    output: list[int] = field(default_factory=list)


@dataclass
class Episode:
    """A persistent batch: rows hold requests; join/leave (the last row fills the hole, as vLLM's
    condense does) and swaps move them; outputs grow by the accepted drafts plus one."""

    rows: list[Request] = field(default_factory=list)

    def min_toks(self, order: list[int]):
        """MinTokensLogitsProcessor.min_toks after update_state (builtin.py:192-214): the requests
        still below min_tokens, in a dict order the batch history may have left in any order."""
        live = {i: (r.min_tokens, r.output, r.stops) for i, r in enumerate(self.rows) if len(r.output) < r.min_tokens}
        return {i: live[i] for i in sorted(live, key=lambda i: order[i % len(order)])}


def episode_steps():
    step = st.fixed_dictionaries({
        "join": st.lists(st.tuples(st.integers(0, 12), st.sets(st.integers(0, 40), max_size=3)), max_size=2),
        "leave": st.lists(st.integers(0, 7), max_size=1),
        "swap": st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=1),
        "drafts": st.one_of(st.just("k"), st.lists(st.integers(0, 4), min_size=8, max_size=8)),
        "accept": st.lists(st.integers(0, 5), min_size=8, max_size=8),
        "order": st.permutations(range(8)),
    })
    return st.lists(step, min_size=5, max_size=25)


def run_episode(steps, k: int):
    """Yield (min_toks, num_draft_tokens) for every step of a random episode."""
    episode = Episode()
    for step in steps:
        for min_tokens, stops in step["join"]:
            if len(episode.rows) < 8:
                episode.rows.append(Request(min_tokens, set(stops)))
        for row in step["leave"]:
            if row < len(episode.rows):
                episode.rows[row] = episode.rows[-1]
                episode.rows.pop()
        for a, b in step["swap"]:
            if max(a, b) < len(episode.rows):
                episode.rows[a], episode.rows[b] = episode.rows[b], episode.rows[a]
        if not episode.rows:
            continue
        drafts = [k] * len(episode.rows) if step["drafts"] == "k" else step["drafts"][:len(episode.rows)]
        yield episode.min_toks(list(step["order"])), drafts
        for request, num_draft, accepted in zip(episode.rows, drafts, step["accept"]):
            request.output.extend([7] * (min(accepted, num_draft) + 1))


@given(steps=episode_steps(), k=st.integers(1, 4), tp=st.sampled_from([1, 2, 3, 4]))
@settings(max_examples=200, deadline=None)
def test_min_tokens_masks_equal_upstream_every_step(mtc, steps, k, tp):
    vocab = 41
    bounds = [vocab * r // tp for r in range(tp + 1)]  # uneven shards when tp does not divide 41
    shards = list(itertools.pairwise(bounds))
    sampler_cache = mtc.MinTokensSpecMaskCache()
    runner_caches = [mtc.MinTokensSpecMaskCache() for _ in shards]
    for min_toks, drafts in run_episode(steps, k):
        # Rejection sampler: the target rows, global columns.
        processor = MinTokensPort(min_toks)
        got = mtc.apply_min_tokens_spec_cached(sampler_cache, processor, torch.zeros(sum(drafts), vocab), drafts)
        assert torch.equal(got, upstream_spec_mask(min_toks, drafts, vocab))
        # Model runner: every logits row, one vocab shard per rank, local columns.
        want = upstream_runner_mask(min_toks, drafts, vocab)
        for cache, (start, end) in zip(runner_caches, shards):
            mask = cache.get_min_tokens_mask(min_toks, drafts, torch.device("cpu"), pin_memory=False,
                                             vocab_range=(start, end), interleaved=True)
            local = apply_mask(mtc, torch.zeros(want.shape[0], end - start), mask)
            assert torch.equal(local, want[:, start:end])


@given(steps=episode_steps(), k=st.integers(1, 4))
@settings(max_examples=150, deadline=None)
def test_min_tokens_mask_is_rebuilt_exactly_when_the_structure_changes(mtc, steps, k):
    """Steady steps reuse the device tensors; a rebuild happens on, and only on, a new structure
    (rows, stop sets, draft counts). Off the steady state the upstream logic runs."""
    builds = []
    real = mtc.mask_to_device
    cache, last_key = mtc.MinTokensSpecMaskCache(), None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mtc, "mask_to_device", lambda *args, **kw: builds.append(1) or real(*args, **kw))
        for min_toks, drafts in run_episode(steps, k):
            processor, before = MinTokensPort(min_toks), len(builds)
            mtc.apply_min_tokens_spec_cached(cache, processor, torch.zeros(sum(drafts), 41), drafts)
            key = mtc.min_tokens_spec_steady_structure(min_toks, drafts) if min_toks else None
            assert processor.fallbacks == (1 if min_toks and key is None else 0)
            if key is not None:
                assert len(builds) - before == (key != last_key)
                event("rebuilt" if key != last_key else "served from cache")
                last_key = key
            else:
                assert len(builds) == before
                event("upstream per-position logic" if min_toks else "no min_tokens")


def test_steady_structure_ignores_output_growth_but_not_rows_or_stops(mtc):
    out = [1, 2]
    min_toks = {0: (20, out, {5, 6}), 1: (9, [], {5})}
    key = mtc.min_tokens_spec_steady_structure(min_toks, [3, 3])
    out.append(3)
    assert mtc.min_tokens_spec_steady_structure(min_toks, [3, 3]) == key
    assert mtc.min_tokens_spec_steady_structure({1: min_toks[0], 0: min_toks[1]}, [3, 3]) != key
    assert mtc.min_tokens_spec_steady_structure({0: (20, out, {5, 7}), 1: min_toks[1]}, [3, 3]) != key
    assert mtc.min_tokens_spec_steady_structure(min_toks, [3, 2]) != key
    assert mtc.min_tokens_spec_steady_structure({0: (5, out, {5})}, [3]) is None  # 2 left < 3 drafts
    assert mtc.min_tokens_spec_steady_structure({4: (20, [], {5})}, [3, 3]) is None  # stale row


def test_stop_set_mutated_in_place_is_not_served_stale(mtc):
    stops = {5}
    min_toks = {0: (20, [], stops)}
    cache = mtc.MinTokensSpecMaskCache()
    first = cache.get_min_tokens_spec_mask_indices(min_toks, [2], torch.device("cpu"), pin_memory=False)
    stops.add(9)
    second = cache.get_min_tokens_spec_mask_indices(min_toks, [2], torch.device("cpu"), pin_memory=False)
    assert sorted(second.toks.tolist()) == [5, 5, 9, 9] and first is not second


def test_masks_are_int64_index_tensors_and_the_value_matches_the_logits_dtype(mtc):
    cache = mtc.MinTokensSpecMaskCache()
    mask = cache.get_min_tokens_spec_mask_indices({1: (9, [], {3, 4})}, [2, 2], torch.device("cpu"), pin_memory=False)
    assert all(part.dtype == torch.int64 for part in mask)
    assert mask.rows.tolist() == [2, 2, 3, 3] and mask.bonus_rows.tolist() == [1, 1]
    logits = torch.zeros(4, 8, dtype=torch.bfloat16)
    mtc.apply_min_tokens_spec_cached(cache, MinTokensPort({1: (9, [], {3, 4})}), logits, [2, 2])
    assert cache.neg_inf(logits).dtype == torch.bfloat16
    assert (logits == NEG_INF).nonzero().tolist() == [[2, 3], [2, 4], [3, 3], [3, 4]]


@pytest.mark.vllm
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_the_port_is_upstream_apply_with_spec_decode(data):
    """The port against the real vLLM 0.23.0 MinTokensLogitsProcessor."""
    builtin = pytest.importorskip("vllm.v1.sample.logits_processor.builtin")
    rows = data.draw(st.integers(1, 6))
    drafts = data.draw(st.lists(st.integers(0, 4), min_size=rows, max_size=rows))
    min_toks = {row: (data.draw(st.integers(1, 12)), [0] * data.draw(st.integers(0, 11)),
                      data.draw(st.sets(st.integers(0, 20), max_size=3)))
                for row in data.draw(st.sets(st.integers(0, rows - 1)))}
    processor = builtin.MinTokensLogitsProcessor(None, torch.device("cpu"), False)
    processor.min_toks = min_toks
    got = processor.apply_with_spec_decode(torch.zeros(sum(drafts), 21), drafts)
    assert torch.equal(got, upstream_spec_mask(min_toks, drafts, 21))


# ---------------------------------------------------------------------------------------------
# sampler-greedy-bf16-fastpath


class SamplerBase:
    """vllm/v1/sample/sampler.py:72-140 reduced to an all-greedy batch: fp32 cast (:96), the
    non-argmax-invariant processors (:404-405), argmax; records that it ran."""

    calls = 0

    def forward(self, logits, sampling_metadata, predict_bonus_token=False, logprobs_mode_override=None):
        SamplerBase.calls += 1
        logits = logits.to(torch.float32)
        for processor in sampling_metadata.logitsprocs.non_argmax_invariant:
            logits = processor.apply(logits)
        sampled = logits.argmax(dim=-1).to(torch.int32)
        return SimpleNamespace(sampled_token_ids=sampled.unsqueeze(-1), logprobs_tensors=None)


class MinTokensLogitsProcessor:
    def __init__(self, min_toks):
        self.min_toks = min_toks

    def apply(self, logits):
        for row, (_, _, stops) in self.min_toks.items():
            logits[row, list(stops)] = NEG_INF
        return logits


class LogitBiasLogitsProcessor:
    def __init__(self, biases):
        self.biases = biases

    def apply(self, logits):
        for row, bias in self.biases.items():
            for tok, value in bias.items():
                logits[row, tok] += value
        return logits


class IdentityProcessor:
    """A custom non-argmax-invariant processor: the gate cannot know what it does."""

    def apply(self, logits):
        return logits


class Holder:
    def __init__(self, tracked):
        self.tracked = tracked

    def has_tracked_requests(self):
        return self.tracked


@pytest.fixture(scope="module")
def sampler(tree):
    fakes = {"torch": torch, "Sampler": SamplerBase, "SamplerOutput": SimpleNamespace,
             "MinTokensLogitsProcessor": MinTokensLogitsProcessor, "LogitBiasLogitsProcessor": LogitBiasLogitsProcessor,
             "get_ascend_config": lambda: SimpleNamespace(enable_reduce_sample=False),
             "DEFAULT_LOGPROBS_MODE": "raw_logprobs"}
    cls = load_defs(tree / SAMPLER, ["AscendSampler", "_is_idle"], fakes)["AscendSampler"]
    return object.__new__(cls)  # forward, greedy_sample and the gate need no constructor state


def metadata(**changes):
    """An all-greedy SamplingMetadata with nothing that touches the logits, then ``changes``."""
    fields = {"all_greedy": True, "max_num_logprobs": None, "logprob_token_ids": None, "no_penalties": True,
              "allowed_token_ids_mask": None, "bad_words_token_ids": {}, "thinking_budget_state_holder": None,
              "logitsprocs": SimpleNamespace(non_argmax_invariant=[])}
    return SimpleNamespace(**{**fields, **changes})


def processors(*items):
    return SimpleNamespace(non_argmax_invariant=list(items))


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
    ({"allowed_token_ids_mask": torch.zeros(2, 50, dtype=torch.bool)}, torch.bfloat16, False),
    ({"bad_words_token_ids": {0: [[3]]}}, torch.bfloat16, False),
    ({"thinking_budget_state_holder": Holder(True)}, torch.bfloat16, False),
    ({"thinking_budget_state_holder": Holder(False)}, torch.bfloat16, True),
    ({"logitsprocs": processors(MinTokensLogitsProcessor({}), LogitBiasLogitsProcessor({}))}, torch.bfloat16, True),
    ({"logitsprocs": processors(MinTokensLogitsProcessor({0: (9, [], {3})}))}, torch.bfloat16, False),
    ({"logitsprocs": processors(LogitBiasLogitsProcessor({1: {4: 50.0}}))}, torch.bfloat16, False),
    ({"logitsprocs": processors(IdentityProcessor())}, torch.bfloat16, False),
], ids=["bf16", "fp16", "fp32", "fp64", "sampled", "logprobs", "bonus-call", "logprob-token-ids", "penalties",
        "allowed-tokens", "bad-words", "thinking-budget", "thinking-idle", "idle-processors", "min-tokens",
        "logit-bias", "custom-processor"])
def test_fast_path_only_where_upstream_returns_just_the_argmax(sampler, changes, dtype, fast):
    logits = torch.randn(2, 50).to(dtype)
    calls = SamplerBase.calls
    out = sampler.forward(logits, metadata(**changes))
    assert (SamplerBase.calls == calls) == fast
    if fast:
        assert out.logprobs_tensors is None and out.sampled_token_ids.dtype == torch.int32
        assert torch.equal(out.sampled_token_ids, SamplerBase().forward(logits, metadata(**changes)).sampled_token_ids)


@given(values=st.lists(st.floats(-70, 70, allow_nan=False, width=16), min_size=2, max_size=400),
       coarse=st.booleans(), rows=st.integers(1, 3))
@settings(max_examples=300, deadline=None)
def test_bf16_argmax_equals_fp32_argmax(values, coarse, rows):
    """Sampler.forward's argmax after the fp32 cast (sampler.py:96) against the fast path's, ties included
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


class RejectionSamplerBase:
    def __init__(self, sampler=None):
        self.sampler = sampler


@pytest.fixture(scope="module")
def rejection(tree):
    fakes = {"torch": torch, "RejectionSampler": RejectionSamplerBase, "SamplerOutput": SimpleNamespace,
             "HAS_TRITON": False, "MAX_SPEC_LEN": 128, "PLACEHOLDER_TOKEN_ID": PLACEHOLDER_TOKEN_ID}
    defs = load_defs(tree / REJECTION, ["AscendRejectionSampler", "rejection_greedy_sample", *REJECTION_HELPERS], fakes)
    return object.__new__(defs["AscendRejectionSampler"])


@pytest.fixture(scope="module")
def upstream_greedy():
    """The unpatched tree's pytorch greedy rejection (rejection_sampler.py:913-979) and its dispatch
    in rejection_sample (:474-506, HAS_TRITON false, all greedy)."""
    defs = load_defs(pristine() / REJECTION, REJECTION_HELPERS, {"torch": torch})

    def run(num_draft_tokens, cu, draft_ids, target_argmax, bonus_ids):
        out = torch.full((len(num_draft_tokens), max(num_draft_tokens) + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
        if min(num_draft_tokens) == 1 and max(num_draft_tokens) == 1:
            defs["rejection_greedy_sample_spec_len_1_pytorch"](out, draft_ids, target_argmax, bonus_ids)
        else:
            defs["rejection_greedy_sample_pytorch"](out, cu, draft_ids, target_argmax, bonus_ids, num_draft_tokens,
                                                    max(num_draft_tokens), None)
        return out
    return run


def greedy_verify(num_draft_tokens, draft_ids, target_argmax, bonus_ids) -> torch.Tensor:
    """Greedy verification by definition: accept drafts while they equal the target argmax; the
    first mismatch is replaced by the target token and ends the row; all accepted adds the bonus."""
    out = torch.full((len(num_draft_tokens), max(num_draft_tokens) + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
    start = 0
    for req, num_draft in enumerate(num_draft_tokens):
        for pos in range(num_draft):
            out[req, pos] = target_argmax[start + pos]
            if draft_ids[start + pos] != target_argmax[start + pos]:
                break
        else:
            out[req, num_draft] = bonus_ids[req, 0]
        start += num_draft
    return out


def spec_metadata(num_draft_tokens, draft_ids):
    target, bonus = logits_layout(num_draft_tokens)
    return SimpleNamespace(num_draft_tokens=list(num_draft_tokens), max_spec_len=max(num_draft_tokens),
                           cu_num_draft_tokens=torch.tensor(np.cumsum(num_draft_tokens), dtype=torch.int32),
                           draft_token_ids=draft_ids, target_logits_indices=target, bonus_logits_indices=bonus)


GREEDY = SimpleNamespace(all_greedy=True, max_num_logprobs=None)


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
    out = rejection.forward_greedy_presampled(meta, target, bonus, GREEDY)
    assert out.logprobs_tensors is None and out.sampled_token_ids.dtype == torch.int32
    assert torch.equal(out.sampled_token_ids, greedy_verify(num_draft, draft, target, bonus))
    assert torch.equal(out.sampled_token_ids, upstream_greedy(num_draft, meta.cu_num_draft_tokens, draft, target, bonus))


def test_forward_greedy_presampled_refuses_sampled_or_logprob_batches(rejection):
    meta = spec_metadata([1], torch.tensor([3], dtype=torch.int32))
    for bad in (SimpleNamespace(all_greedy=False, max_num_logprobs=None), SimpleNamespace(all_greedy=True, max_num_logprobs=2)):
        with pytest.raises(AssertionError):
            rejection.forward_greedy_presampled(meta, torch.tensor([3]), torch.tensor([[4]], dtype=torch.int32), bad)


@given(batch=spec_batches(), tp=st.sampled_from([2, 4]), data=st.data())
@settings(max_examples=150, deadline=None)
def test_presampled_verification_of_shard_logits_equals_upstream(mtc, vpa, rejection, upstream_greedy, batch, tp, data):
    """The whole verify path as the model runner wires it (shard logits, shard MinTokens masks from the
    cache, vocab-parallel argmax, target/bonus rows split by the logits layout, forward_greedy_presampled)
    against upstream's (gathered logits, MinTokens on target and bonus logits, argmax, greedy rejection)."""
    num_draft, draft, _, _ = batch
    vocab = 97
    rows = sum(num_draft) + len(num_draft)
    full = torch.tensor(data.draw(st.lists(st.integers(-3, 3), min_size=rows * vocab, max_size=rows * vocab)),
                        dtype=torch.float32).view(rows, vocab).to(torch.bfloat16)
    min_toks = {req: (data.draw(st.integers(1, 8)), [0] * data.draw(st.integers(0, 6)),
                      data.draw(st.sets(st.integers(0, vocab - 1), max_size=4)))
                for req in data.draw(st.sets(st.integers(0, len(num_draft) - 1)))}
    min_toks = {req: entry for req, entry in min_toks.items() if len(entry[1]) < entry[0]}
    meta = spec_metadata(num_draft, draft)

    # Upstream: the rejection sampler's target logits and the sampler's bonus logits, fp32.
    target_logits = full[meta.target_logits_indices].float()
    target_logits[upstream_spec_mask(min_toks, num_draft, vocab) == NEG_INF] = NEG_INF
    bonus_logits = full[meta.bonus_logits_indices].float()
    bonus_logits[upstream_bonus_mask(min_toks, len(num_draft), vocab) == NEG_INF] = NEG_INF
    want = upstream_greedy(num_draft, meta.cu_num_draft_tokens, draft, target_logits.argmax(-1),
                           bonus_logits.argmax(-1).to(torch.int32).view(-1, 1))

    # Ours, on every rank.
    layout = shard_layout(vocab, tp)
    local = shards_of(full, layout)
    for shard, (start, valid, _) in zip(local, layout):
        mask = mtc.MinTokensSpecMaskCache().get_min_tokens_mask(
            min_toks, num_draft, torch.device("cpu"), pin_memory=False, vocab_range=(start, start + valid),
            interleaved=True)
        apply_mask(mtc, shard, mask)
    for presampled in all_ranks_argmax(vpa, local, layout):
        bonus = presampled[meta.bonus_logits_indices].to(torch.int32).unsqueeze(-1)
        got = rejection.forward_greedy_presampled(meta, presampled[meta.target_logits_indices], bonus, GREEDY)
        assert torch.equal(got.sampled_token_ids, want)
