#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# This file is a part of the vllm-ascend project.
#

import pytest
import torch

from vllm_ascend.sample.vocab_parallel_argmax import (
    FLOAT32_EXACT_INTS,
    local_argmax_pair,
    pick_global_argmax,
    vocab_parallel_argmax,
)

PADDING_SIZE = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE


def _shards(vocab_size, tp_size):
    """(vocab_start, num_valid, shard width) per rank, as VocabParallelEmbedding pads and splits the vocab."""
    padded = -(-vocab_size // PADDING_SIZE) * PADDING_SIZE
    width = -(-padded // tp_size)
    return [(rank * width, max(0, min(width, vocab_size - rank * width)), width) for rank in range(tp_size)]


def _sharded(logits, vocab_size, tp_size, padding_value):
    """Each rank's [B, width] slice of the logits, its padding columns set to ``padding_value``."""
    out = []
    for start, valid, width in _shards(vocab_size, tp_size):
        local = torch.full((logits.shape[0], width), padding_value, dtype=logits.dtype)
        local[:, :valid] = logits[:, start : start + valid]
        out.append((local, start, valid))
    return out


def _argmax_on_every_rank(shards):
    """vocab_parallel_argmax on each rank; the all-gather concatenates the ranks' pairs in rank order."""
    pairs = [local_argmax_pair(local, start, valid) for local, start, valid in shards]
    results = []
    for rank, (local, start, valid) in enumerate(shards):

        def all_gather(tensor, rank=rank):
            assert torch.equal(tensor, pairs[rank])
            return torch.cat(pairs, dim=-1)

        results.append(vocab_parallel_argmax(local, start, valid, all_gather))
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("tp_size", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("vocab_size", [1000, 1003, 130])
def test_vocab_parallel_argmax_equals_full_vocab_argmax(vocab_size, tp_size, dtype):
    generator = torch.Generator().manual_seed(vocab_size * 10 + tp_size)
    logits = torch.randn(6, vocab_size, generator=generator).to(dtype)
    # Padding columns hold garbage larger than any logit: they must never win.
    shards = _sharded(logits, vocab_size, tp_size, padding_value=1e4)
    expected = logits.argmax(dim=-1)
    for token_ids in _argmax_on_every_rank(shards):
        assert token_ids.dtype == torch.int64
        assert torch.equal(token_ids, expected)


def test_ties_pick_the_lowest_token_id_like_argmax():
    vocab_size, tp_size = 256, 4
    logits = torch.zeros(3, vocab_size)
    logits[0, [10, 70, 200]] = 5.0  # the same maximum on ranks 0, 1 and 3
    logits[1, [65, 66]] = 5.0  # twice on rank 1
    logits[2, :] = 1.0  # every column ties
    shards = _sharded(logits, vocab_size, tp_size, padding_value=-1.0)
    for token_ids in _argmax_on_every_rank(shards):
        assert token_ids.tolist() == logits.argmax(dim=-1).tolist() == [10, 65, 0]


def test_a_shard_of_padding_only_never_wins():
    vocab_size, tp_size = 100, 8  # padded to 128: ranks 7 and up hold no real token
    logits = torch.randn(4, vocab_size)
    shards = _sharded(logits, vocab_size, tp_size, padding_value=1e4)
    assert [valid for _, valid, _ in _shards(vocab_size, tp_size)][-1] == 0
    for token_ids in _argmax_on_every_rank(shards):
        assert torch.equal(token_ids, logits.argmax(dim=-1))


def test_pick_global_argmax_reads_value_id_pairs_in_rank_order():
    gathered = torch.tensor([[1.0, 3.0, 2.0, 40.0, 2.0, 77.0]])  # ranks 0-2: (value, id)
    assert pick_global_argmax(gathered).tolist() == [40]


def test_local_argmax_pair_refuses_what_float32_cannot_carry_exactly():
    with pytest.raises(ValueError):
        local_argmax_pair(torch.zeros(1, 4, dtype=torch.float64), 0, 4)
    with pytest.raises(ValueError):
        local_argmax_pair(torch.zeros(1, 4), FLOAT32_EXACT_INTS - 2, 4)
