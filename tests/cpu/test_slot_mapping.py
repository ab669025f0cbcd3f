"""blocktable-slot-mapping-cpu-fastpath on CPU: the host slot mapping against the Triton kernel's math.

The recipe's patch adds ``vllm_ascend/worker/slot_mapping_cpu.py`` (numpy only) and makes
``BlockTable.compute_slot_mapping`` use it for steps under 80 tokens. The reference is a numpy port
of vLLM's ``_compute_slot_mapping_kernel`` (``fake_block_table.compute_slot_mapping_kernel_port``,
ported line by line from vllm-0.23.0 vllm/v1/worker/block_table.py:325-380). The patched
``BlockTable`` itself runs among fakes of its vLLM imports, with the kernel replaced by the port,
so both of its paths are compared on the same inputs. What the NPU adds (the launch saving, the
asynchronous copies) is not checked here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support (fake_block_table)

from fake_block_table import (PAD_SLOT_ID, compute_slot_mapping_kernel_port, load_block_table,  # noqa: E402
                              load_helper, patched_tree)

pytestmark = [pytest.mark.tree]

RECIPE = "blocktable-slot-mapping-cpu-fastpath"
MAX_NUM_REQS = 8
MAX_NUM_BATCHED_TOKENS = 128
SENTINEL = 123_456_789  # marks slot_mapping entries a path must leave alone


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return patched_tree(tmp_path_factory, RECIPE)


@pytest.fixture(scope="module")
def slot_mapping_cpu(tree):
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield load_helper(tree, "slot_mapping_cpu", monkeypatch)


@pytest.fixture
def block_table_module(tree, monkeypatch):
    return load_block_table(tree, monkeypatch)


@st.composite
def steps(draw, max_tokens=79):
    """A step: per-request computed lengths and query lengths (some empty), positions, query_start_loc."""
    num_reqs = draw(st.integers(1, MAX_NUM_REQS))
    query_lens = draw(st.lists(st.integers(0, 12), min_size=num_reqs, max_size=num_reqs)
                      .filter(lambda lens: 0 < sum(lens) <= max_tokens))
    computed = draw(st.lists(st.integers(0, 400), min_size=num_reqs, max_size=num_reqs))
    query_start_loc = np.zeros(num_reqs + 1, dtype=np.int32)
    query_start_loc[1:] = np.cumsum(query_lens)
    positions = np.concatenate([np.arange(c, c + q, dtype=np.int64) for c, q in zip(computed, query_lens)])
    return query_start_loc, positions, max(c + q for c, q in zip(computed, query_lens))


@given(step=steps(), block_size=st.sampled_from([1, 2, 3, 16, 128]), extra_rows=st.integers(0, 3),
       seed=st.integers(0, 2**32 - 1))
@settings(max_examples=300, deadline=None)
def test_host_slots_equal_kernel_port(slot_mapping_cpu, step, block_size, extra_rows, seed):
    query_start_loc, positions, max_len = step
    num_reqs, num_tokens = len(query_start_loc) - 1, len(positions)
    width = -(-max_len // block_size) + 2  # rows wider than needed, like max_num_blocks_per_req
    table = np.random.default_rng(seed).integers(0, 50_000, size=(num_reqs + extra_rows, width), dtype=np.int32)
    expected = np.full(MAX_NUM_BATCHED_TOKENS, SENTINEL, dtype=np.int32)
    compute_slot_mapping_kernel_port(num_tokens, MAX_NUM_BATCHED_TOKENS, query_start_loc, positions,
                                     table.reshape(-1), width, block_size, expected)

    got = slot_mapping_cpu.slot_mapping_np(table, block_size, query_start_loc, positions, num_tokens)

    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expected[:num_tokens])


def _block_table(module, block_size, kernel_size):
    kernel_sizes = None if kernel_size == block_size else [kernel_size]
    return module.BlockTable(block_size, MAX_NUM_REQS, 40, MAX_NUM_BATCHED_TOKENS, False, torch.device("cpu"),
                             kernel_sizes)


@given(step=steps(), sizes=st.sampled_from([(16, 16), (128, 128), (128, 64), (128, 16), (64, 32)]),
       seed=st.integers(0, 2**32 - 1))
@settings(max_examples=150, deadline=None)
def test_block_table_host_path_matches_its_kernel_path(tree, step, sizes, seed):
    """Physical block size, kernel block size: unequal sizes are hybrid blocks (logical table)."""
    query_start_loc, positions, max_len = step
    num_reqs, num_tokens = len(query_start_loc) - 1, len(positions)
    physical, kernel_size = sizes
    blocks_needed = -(-max_len // physical)
    rng = np.random.default_rng(seed)
    physical_ids = [rng.choice(10_000, size=blocks_needed, replace=False) for _ in range(num_reqs)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        module, kernel = load_block_table(tree, monkeypatch)
        table = _block_table(module, physical, kernel_size)
        for row, ids in enumerate(physical_ids):
            table.add_row(ids.tolist(), row)
        table.commit_block_table(num_reqs)
        qsl, pos = torch.from_numpy(query_start_loc), torch.from_numpy(positions)

        table.compute_slot_mapping(num_reqs, qsl, pos)
        by_kernel = table.slot_mapping.gpu.clone()
        table.slot_mapping.gpu.fill_(SENTINEL)
        table.compute_slot_mapping(num_reqs, qsl, pos, query_start_loc, positions)
        by_host = table.slot_mapping.gpu.clone()

    assert kernel.grids == [(num_reqs + 1,)], "the host path must not launch the kernel"
    np.testing.assert_array_equal(by_host[:num_tokens].numpy(), by_kernel[:num_tokens].numpy())
    req = np.repeat(np.arange(num_reqs), np.diff(query_start_loc))
    physical_slots = [physical_ids[r][p // physical] * physical + p % physical for r, p in zip(req, positions)]
    np.testing.assert_array_equal(by_host[:num_tokens].numpy(), physical_slots)
    # PAD: the kernel pads up to max_num_batched_tokens, the host path writes nothing past
    # num_tokens. The runner fills [num_tokens, num_tokens_padded) with -1 itself when
    # pcp_size == 1 (model_runner_v1.py:3124-3126), which is all attention reads.
    assert (by_kernel[num_tokens:MAX_NUM_BATCHED_TOKENS] == PAD_SLOT_ID).all()
    assert (by_host[num_tokens:] == SENTINEL).all()


@pytest.mark.parametrize(
    ("num_tokens", "host_qsl", "host_positions", "qsl_end_offset", "host_path"),
    [
        (1, True, True, 0, True),
        (79, True, True, 0, True),
        (80, True, True, 0, False),
        (79, False, True, 0, False),
        (79, True, False, 0, False),
        (79, False, False, 0, False),
        (40, True, True, -1, False),
    ],
    ids=["one-token", "79-tokens", "80-tokens-kernel", "no-host-qsl", "no-host-positions", "no-host-arrays",
         "qsl-not-ending-at-num-tokens"],
)
def test_host_path_gate(block_table_module, num_tokens, host_qsl, host_positions, qsl_end_offset, host_path):
    module, kernel = block_table_module
    table = _block_table(module, 16, 16)
    table.add_row(list(range(1, 11)), 0)
    query_start_loc = np.array([0, num_tokens + qsl_end_offset], dtype=np.int32)
    positions = np.arange(num_tokens, dtype=np.int64)
    table.compute_slot_mapping(1, torch.from_numpy(query_start_loc), torch.from_numpy(positions),
                               query_start_loc if host_qsl else None, positions if host_positions else None)
    assert (kernel.grids == []) is host_path


def test_multi_group_passes_host_arrays_and_skips_mamba_groups(block_table_module):
    module, kernel = block_table_module
    groups = module.MultiGroupBlockTable(MAX_NUM_REQS, 512, MAX_NUM_BATCHED_TOKENS, False, torch.device("cpu"),
                                         block_sizes=[16, 32])
    groups.block_tables[1].is_mamba_group = True
    groups.add_row(([5, 6], [7]), 0)
    query_start_loc, positions = np.array([0, 3], dtype=np.int32), np.array([15, 16, 17])
    groups.compute_slot_mapping(1, torch.from_numpy(query_start_loc), torch.from_numpy(positions),
                                query_start_loc_cpu=query_start_loc, positions_cpu=positions)
    assert kernel.grids == []
    assert groups[0].slot_mapping.gpu[:3].tolist() == [5 * 16 + 15, 6 * 16 + 0, 6 * 16 + 1]
    assert (groups[1].slot_mapping.gpu == 0).all()


def test_commit_block_table_reuses_one_staging_tensor(block_table_module):
    module, _ = block_table_module
    table = _block_table(module, 16, 16)
    table.add_row([3, 4], 0)
    table.commit_block_table(1)
    staging = table._bt_pinned
    table.add_row([8, 9, 10], 1)
    table.commit_block_table(2)
    assert table._bt_pinned is staging
    assert table.block_table.gpu[:2].tolist() == table.block_table.cpu[:2].tolist()
    table.add_row([11], 2)
    table.commit_block_table(3, snapshot=True)  # the _dummy_run path: a fresh clone, staging untouched
    assert table.block_table.gpu[:3].tolist() == table.block_table.cpu[:3].tolist()
    assert table._bt_pinned is staging and staging[2].tolist() != table.block_table.cpu[2].tolist()
