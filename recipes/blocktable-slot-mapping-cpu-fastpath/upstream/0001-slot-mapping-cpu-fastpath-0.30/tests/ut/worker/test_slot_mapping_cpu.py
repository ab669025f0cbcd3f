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

import numpy as np
import pytest

from vllm_ascend.worker.slot_mapping_cpu import SLOT_MAPPING_CPU_MAX_TOKENS, slot_mapping_np


def _reference_slots(block_table, block_size, query_start_loc, positions):
    """Slot of every token, one at a time, as _compute_slot_mapping_kernel computes it without DCP."""
    slots = []
    for req_idx in range(len(query_start_loc) - 1):
        for token in range(query_start_loc[req_idx], query_start_loc[req_idx + 1]):
            position = int(positions[token])
            block_id = int(block_table[req_idx, position // block_size])
            slots.append(block_id * block_size + position % block_size)
    return np.array(slots, dtype=np.int32)


def _random_step(rng, num_reqs, max_query_len, block_size, blocks_per_req):
    """A block table, query_start_loc (empty requests included) and positions of one step."""
    query_lens = rng.integers(0, max_query_len + 1, size=num_reqs)
    query_start_loc = np.concatenate([[0], np.cumsum(query_lens)]).astype(np.int32)
    block_table = rng.integers(0, 4096, size=(num_reqs, blocks_per_req)).astype(np.int32)
    positions = []
    for query_len in query_lens:
        start = rng.integers(0, blocks_per_req * block_size - query_len + 1)
        positions.extend(range(start, start + query_len))
    num_tokens = int(query_start_loc[-1])
    # The runner's positions buffer is longer than the step; only its first num_tokens entries count.
    padded = np.concatenate([np.array(positions, dtype=np.int64), rng.integers(0, 10**6, size=8)])
    return block_table, query_start_loc, padded, num_tokens


@pytest.mark.parametrize("block_size", [16, 64, 128])
@pytest.mark.parametrize("seed", range(8))
def test_slot_mapping_np_matches_the_kernel_arithmetic(seed, block_size):
    rng = np.random.default_rng(seed)
    block_table, query_start_loc, positions, num_tokens = _random_step(
        rng, num_reqs=int(rng.integers(1, 9)), max_query_len=5, block_size=block_size, blocks_per_req=6
    )
    slots = slot_mapping_np(block_table, block_size, query_start_loc, positions, num_tokens)
    assert slots.dtype == np.int32
    np.testing.assert_array_equal(slots, _reference_slots(block_table, block_size, query_start_loc, positions))


def test_slot_mapping_np_decode_step():
    # Four requests decoding one token each, at positions 0, 17, 31 and 32 with block size 16.
    block_table = np.array([[7, 0, 0], [3, 9, 0], [5, 2, 0], [1, 4, 8]], dtype=np.int32)
    query_start_loc = np.array([0, 1, 2, 3, 4], dtype=np.int32)
    positions = np.array([0, 17, 31, 32], dtype=np.int64)
    slots = slot_mapping_np(block_table, 16, query_start_loc, positions, 4)
    np.testing.assert_array_equal(slots, np.array([7 * 16, 9 * 16 + 1, 2 * 16 + 15, 8 * 16], dtype=np.int32))


def test_slot_mapping_np_uses_the_kernel_block_size():
    # With hybrid blocks the table holds kernel-block ids: a 128-token allocator block is split into
    # 8 kernel blocks of 16, and slots are computed in kernel blocks.
    kernel_block_size = 16
    block_table = (np.arange(16, dtype=np.int32) + 8 * 3).reshape(1, 16)  # allocator block 3
    query_start_loc = np.array([0, 3], dtype=np.int32)
    positions = np.array([0, 15, 16], dtype=np.int64)
    slots = slot_mapping_np(block_table, kernel_block_size, query_start_loc, positions, 3)
    np.testing.assert_array_equal(slots, np.array([3 * 128, 3 * 128 + 15, 3 * 128 + 16], dtype=np.int32))


def test_slot_mapping_np_empty_step():
    slots = slot_mapping_np(np.zeros((2, 4), dtype=np.int32), 16, np.zeros(3, dtype=np.int32), np.zeros(4), 0)
    assert slots.shape == (0,)


def test_host_path_threshold_covers_small_decode_steps():
    # Concurrency 8 with 4 draft tokens is 40 tokens per decode step: within the host path.
    assert SLOT_MAPPING_CPU_MAX_TOKENS > 8 * (1 + 4)
