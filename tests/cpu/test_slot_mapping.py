"""blocktable-slot-mapping-cpu-fastpath on CPU: the host slot mapping against the Triton kernel's math.

The recipe's patch adds ``vllm_ascend/worker/slot_mapping_cpu.py`` (numpy only) and makes
``BlockTable.compute_slot_mapping`` use it for steps under 80 tokens. Each release's patch runs on
that release's tree: 0.23.0 (post1's block_table.py is the same file) and 0.30.0rc2. The reference
is a numpy port of the kernel the release launches: vLLM's ``_compute_slot_mapping_kernel`` on
0.23.0 (vllm-0.23.0 vllm/v1/worker/block_table.py:325-380), vllm-ascend's own Ascend-tuned kernel
on 0.30.0rc2 (vllm_ascend/ops/triton/compute_slot_mapping.py:11-95, tiles and a gathered table
window). The patched ``BlockTable`` itself runs among fakes of its imports, with the kernel
replaced by the port, so both of its paths are compared on the same inputs. What the NPU adds (the
launch saving, the asynchronous copies) is not checked here.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fake_block_table import (PAD_SLOT_ID, AttentionSpec, CircularSpec, MambaSpec, ascend_slot_mapping_kernel_port,  # noqa: E402
                              compute_slot_mapping_kernel_port, kv_cache_group, load_block_table, load_helper)
from patched_tree import load_defs, patched_tree  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPE = "blocktable-slot-mapping-cpu-fastpath"
RELEASES = ["0.23.0", "0.30.0rc2"]
MAX_NUM_REQS = 8
MAX_NUM_BATCHED_TOKENS = 128
SENTINEL = 123_456_789  # marks slot_mapping entries a path must leave alone


@pytest.fixture(scope="module", params=RELEASES)
def tree(request, tmp_path_factory):
    return patched_tree(tmp_path_factory.mktemp(f"slots-{request.param}"), [RECIPE], request.param)


@pytest.fixture(scope="module")
def slot_mapping_cpu(tree):
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield load_helper(tree, "slot_mapping_cpu", monkeypatch)


@pytest.fixture
def block_table_module(tree, monkeypatch):
    return load_block_table(tree, monkeypatch)


def kernel_port(tree):
    """The reference for the release of ``tree``: a port of the kernel its block_table.py launches."""
    ascend_kernel = tree / "vllm_ascend/ops/triton/compute_slot_mapping.py"
    if not ascend_kernel.is_file():
        return compute_slot_mapping_kernel_port
    next_power_of_2 = load_defs(ascend_kernel, ["_next_power_of_2"], {})["_next_power_of_2"]

    def ascend(num_tokens, max_num_tokens, query_start_loc, positions, table, width, block_size, out):
        # The constants block_table.py:171-181 launches it with (one rank, 1024-token tiles).
        ascend_slot_mapping_kernel_port(
            num_tokens, max_num_tokens, query_start_loc, positions, table, width, block_size, out,
            TOTAL_CP_WORLD_SIZE=1, PAD_ID=PAD_SLOT_ID, TILE_BLOCK_SIZE=1024,
            BLOCK_TABLE_WINDOW_SIZE=next_power_of_2(-(-1024 // block_size) + 1))
    return ascend


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
def test_host_slots_equal_kernel_port(tree, slot_mapping_cpu, step, block_size, extra_rows, seed):
    query_start_loc, positions, max_len = step
    num_reqs, num_tokens = len(query_start_loc) - 1, len(positions)
    width = -(-max_len // block_size) + 2  # rows wider than needed, like max_num_blocks_per_req
    # Block ids below 2**24: the Ascend kernel gathers them as float32.
    table = np.random.default_rng(seed).integers(0, 50_000, size=(num_reqs + extra_rows, width), dtype=np.int32)
    expected = np.full(MAX_NUM_BATCHED_TOKENS, SENTINEL, dtype=np.int32)
    kernel_port(tree)(num_tokens, MAX_NUM_BATCHED_TOKENS, query_start_loc, positions, table.reshape(-1), width,
                      block_size, expected)

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
    # num_tokens. The runner fills [num_tokens, num_tokens_padded) with -1 itself
    # (model_runner_v1.py:3124-3126 in 0.23.0, :3580-3583 in 0.30.0rc2), which is all attention reads.
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


def test_circular_group_pads_before_the_host_path(tree, block_table_module):
    """0.30's circular tail caches fill PAD and return before any slot computation, host arrays or not."""
    module, kernel = block_table_module
    table = module.BlockTable(16, MAX_NUM_REQS, 40, MAX_NUM_BATCHED_TOKENS, False, torch.device("cpu"),
                              kv_cache_group=kv_cache_group(CircularSpec()))
    if not getattr(table, "is_circular_group", False):
        pytest.skip("this release has no circular caches")
    table.add_row([3], 0)
    query_start_loc, positions = np.array([0, 2], dtype=np.int32), np.array([5, 6])
    table.compute_slot_mapping(1, torch.from_numpy(query_start_loc), torch.from_numpy(positions),
                               query_start_loc, positions)
    assert kernel.grids == [] and (table.slot_mapping.gpu == PAD_SLOT_ID).all()


def _groups(module, specs):
    return module.MultiGroupBlockTable(MAX_NUM_REQS, 512, MAX_NUM_BATCHED_TOKENS, False, torch.device("cpu"),
                                       block_sizes=[16, 32], kv_cache_groups=[kv_cache_group(s) for s in specs])


def test_multi_group_passes_host_arrays_and_skips_mamba_groups(block_table_module):
    module, kernel = block_table_module
    groups = _groups(module, [AttentionSpec(), MambaSpec()])
    assert groups.block_tables[1].is_mamba_group
    groups.add_row(([5, 6], [7]), 0)
    query_start_loc, positions = np.array([0, 3], dtype=np.int32), np.array([15, 16, 17])
    groups.compute_slot_mapping(1, torch.from_numpy(query_start_loc), torch.from_numpy(positions),
                                query_start_loc_cpu=query_start_loc, positions_cpu=positions)
    assert kernel.grids == [] and kernel.fused == []
    assert groups[0].slot_mapping.gpu[:3].tolist() == [5 * 16 + 15, 6 * 16 + 0, 6 * 16 + 1]
    assert (groups[1].slot_mapping.gpu == 0).all()


def test_several_attention_groups_keep_the_release_launch(tree, block_table_module):
    """0.30 fuses the groups' kernels into one launch (kept); 0.23 launches one per group (host path)."""
    module, kernel = block_table_module
    groups = _groups(module, [AttentionSpec(), AttentionSpec()])
    groups.add_row(([5, 6], [7]), 0)
    query_start_loc, positions = np.array([0, 3], dtype=np.int32), np.array([15, 16, 17])
    groups.compute_slot_mapping(1, torch.from_numpy(query_start_loc), torch.from_numpy(positions),
                                query_start_loc_cpu=query_start_loc, positions_cpu=positions)
    fused = hasattr(module, "compute_slot_mapping_fused_groups")
    assert kernel.grids == [] and kernel.fused == ([(2, 1)] if fused else [])
    if not fused:
        assert groups[1].slot_mapping.gpu[:3].tolist() == [7 * 32 + 15, 7 * 32 + 16, 7 * 32 + 17]


def test_commit_block_table(tree, block_table_module):
    """0.23: one reused pinned staging tensor (a fresh clone for _dummy_run's snapshot=True). From
    0.24.0rc1 upstream commits with a plain copy_to_gpu, so the 0.30 patch leaves it alone."""
    module, _ = block_table_module
    table = _block_table(module, 16, 16)
    table.add_row([3, 4], 0)
    table.commit_block_table(1)
    if tree.name.endswith("0.30.0rc2"):
        assert not hasattr(table, "_bt_pinned")
        assert table.block_table.gpu[:1].tolist() == table.block_table.cpu[:1].tolist()
        return
    staging = table._bt_pinned
    table.add_row([8, 9, 10], 1)
    table.commit_block_table(2)
    assert table._bt_pinned is staging
    assert table.block_table.gpu[:2].tolist() == table.block_table.cpu[:2].tolist()
    table.add_row([11], 2)
    table.commit_block_table(3, snapshot=True)  # the _dummy_run path: a fresh clone, staging untouched
    assert table.block_table.gpu[:3].tolist() == table.block_table.cpu[:3].tolist()
    assert table._bt_pinned is staging and staging[2].tolist() != table.block_table.cpu[2].tolist()
