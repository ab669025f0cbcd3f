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

import itertools
import random
from unittest.mock import MagicMock

import pytest
import torch

from vllm_ascend.sample.min_tokens_cache import (
    MinTokensSpecMaskCache,
    apply_min_tokens_spec_cached,
    min_tokens_mask_indices,
)

VOCAB = 64
CPU = torch.device("cpu")


class _PerStepMinTokens:
    """Per-position min-tokens masking of the spec-decode target logits, as
    MinTokensLogitsProcessor.apply_with_spec_decode does it: draft position j of a request is
    masked while len(output) + j < min_tokens."""

    def __init__(self, min_toks):
        self.min_toks = min_toks
        self.apply_with_spec_decode = MagicMock(side_effect=self._apply_with_spec_decode)

    def _apply_with_spec_decode(self, logits, num_draft_tokens):
        first_rows = list(itertools.accumulate(num_draft_tokens, initial=0))
        for req_idx, (min_tok, output, stop_ids, _) in self.min_toks.items():
            for j in range(num_draft_tokens[req_idx]):
                if stop_ids and len(output) + j < min_tok:
                    logits[first_rows[req_idx] + j, sorted(stop_ids)] = float("-inf")
        return logits


def _episode(seed, num_reqs=4, max_drafts=3, steady=True):
    """min_toks (batch row -> (min_tokens, output ids, stop ids, structured output)) and draft counts."""
    rng = random.Random(seed)
    num_draft_tokens = [rng.randint(0, max_drafts) for _ in range(num_reqs)]
    min_toks = {}
    for row in rng.sample(range(num_reqs), rng.randint(1, num_reqs)):
        output = [rng.randrange(VOCAB) for _ in range(rng.randint(0, 5))]
        remaining = rng.randint(num_draft_tokens[row], 8) if steady else rng.randint(-2, num_draft_tokens[row] - 1)
        min_toks[row] = (len(output) + remaining, output, set(rng.sample(range(VOCAB), rng.randint(1, 3))), False)
    return min_toks, num_draft_tokens


def _logits(num_draft_tokens, dtype=torch.float32):
    generator = torch.Generator().manual_seed(sum(num_draft_tokens))
    return torch.randn(sum(num_draft_tokens), VOCAB, generator=generator).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", range(12))
def test_steady_state_is_served_from_the_cache_and_masks_as_upstream(seed, dtype):
    min_toks, num_draft_tokens = _episode(seed)
    logits = _logits(num_draft_tokens, dtype)
    expected = _PerStepMinTokens(min_toks).apply_with_spec_decode(logits.clone(), num_draft_tokens)

    processor = _PerStepMinTokens(min_toks)
    out = apply_min_tokens_spec_cached(
        MinTokensSpecMaskCache(), processor, logits.clone(), num_draft_tokens, pin_memory=False
    )
    processor.apply_with_spec_decode.assert_not_called()
    assert out.dtype == dtype
    assert torch.equal(out, expected)


@pytest.mark.parametrize("seed", range(12))
def test_near_the_min_tokens_tail_upstream_masks(seed):
    min_toks, num_draft_tokens = _episode(seed, steady=False)
    logits = _logits(num_draft_tokens)
    processor = _PerStepMinTokens(min_toks)
    out = apply_min_tokens_spec_cached(
        MinTokensSpecMaskCache(), processor, logits.clone(), num_draft_tokens, pin_memory=False
    )
    processor.apply_with_spec_decode.assert_called_once()
    expected = _PerStepMinTokens(min_toks).apply_with_spec_decode(logits.clone(), num_draft_tokens)
    assert torch.equal(out, expected)


@pytest.mark.parametrize(
    "min_toks",
    [
        {0: (9, [1], {5}, True)},  # structured output: upstream may give the stop tokens back
        {3: (9, [1], {5}, False)},  # a stale batch row: upstream's to report
    ],
    ids=["structured-output", "stale-row"],
)
def test_structured_output_and_stale_rows_are_left_to_upstream(min_toks):
    num_draft_tokens = [2, 2]
    processor = MagicMock(min_toks=min_toks)
    processor.apply_with_spec_decode.side_effect = lambda logits, _: logits
    apply_min_tokens_spec_cached(
        MinTokensSpecMaskCache(), processor, _logits(num_draft_tokens), num_draft_tokens, pin_memory=False
    )
    processor.apply_with_spec_decode.assert_called_once()


def test_no_min_tokens_request_leaves_the_logits_alone():
    logits = _logits([2, 1])
    processor = _PerStepMinTokens({})
    out = apply_min_tokens_spec_cached(MinTokensSpecMaskCache(), processor, logits, [2, 1], pin_memory=False)
    assert out is logits
    processor.apply_with_spec_decode.assert_not_called()


def test_the_mask_is_rebuilt_only_when_the_batch_structure_changes():
    cache = MinTokensSpecMaskCache()
    min_toks = {0: (10, [1, 2], {7}, False), 1: (12, [], {3, 4}, False)}
    num_draft_tokens = [2, 3]
    first = cache.get_min_tokens_spec_mask_indices(min_toks, num_draft_tokens, CPU, pin_memory=False)
    min_toks[0][1].extend([5, 6, 8])  # outputs grow by accepted drafts + bonus: still steady
    assert cache.get_min_tokens_spec_mask_indices(min_toks, num_draft_tokens, CPU, pin_memory=False) is first

    min_toks[2] = (20, [], {9}, False)  # a request joins the batch
    joined = cache.get_min_tokens_spec_mask_indices(min_toks, [2, 3, 1], CPU, pin_memory=False)
    assert joined is not first
    fresh = min_tokens_mask_indices(min_toks, [2, 3, 1])
    assert [t.tolist() for t in joined] == [list(part) for part in fresh]
    assert all(t.dtype == torch.int64 for t in joined)

    min_toks[0] = (6, [1, 2, 5, 6, 8], {7}, False)  # one token short of its two drafts: not steady
    assert cache.get_min_tokens_spec_mask_indices(min_toks, [2, 3, 1], CPU, pin_memory=False) is None


def test_mask_indices_in_one_vocab_shard_and_the_runner_layout():
    min_toks = {0: (9, [], {3, 40}, False), 1: (9, [], {33}, False)}
    num_draft_tokens = [2, 1]
    full = min_tokens_mask_indices(min_toks, num_draft_tokens)
    assert (full.rows, full.toks) == ([0, 0, 1, 1, 2], [3, 40, 3, 40, 33])
    assert (full.bonus_rows, full.bonus_toks) == ([0, 0, 1], [3, 40, 33])

    shard = min_tokens_mask_indices(min_toks, num_draft_tokens, vocab_range=(32, 64))
    assert (shard.rows, shard.toks) == ([0, 1, 2], [8, 8, 1])  # shard-local columns

    # Model runner layout: request r owns num_draft + 1 logits rows, its bonus row last.
    interleaved = min_tokens_mask_indices(min_toks, num_draft_tokens, interleaved=True)
    assert interleaved.rows == [0, 0, 1, 1, 3]
    assert interleaved.bonus_rows == [2, 2, 4]
