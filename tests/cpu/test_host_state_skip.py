"""runner-decode-host-state-skip on CPU: which device writes _prepare_inputs may skip.

The recipe's patch adds ``vllm_ascend/worker/host_state_tracker.py`` (numpy only) and a dirty
flag to ``BlockTable``. Every release range's patch runs on its trees: 0.23.0 (post1 has the same
block_table.py), and the 0.30 re-derivation on 0.28.0rc1, 0.29.0rc1 and 0.30.0rc2, whose
block_table.py files all differ. The tracker is tested two ways: a table of step sequences with the
decisions each step must get, and a replay of random step sequences against a model of the
runner's device buffers, where the image left by the skipping runner must equal the one the
upstream runner (which writes everything every step) leaves. The dirty flag is tested on the
patched ``BlockTable`` itself, run among fakes of its vLLM imports. The runner glue in
model_runner_v1.py cannot run without an NPU; it is checked by tests/test_compat.py (applies,
compiles, pyflakes) only.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fake_block_table import load_block_table, load_helper  # noqa: E402
from patched_tree import patched_tree  # noqa: E402

pytestmark = [pytest.mark.tree]

RECIPE = "runner-decode-host-state-skip"
RELEASES = ["0.23.0", "0.28.0rc1", "0.29.0rc1", "0.30.0rc2"]
MAX_NUM_REQS = 6
MAX_TOKENS = 64
RESET = "reset"  # a _dummy_run between steps


@pytest.fixture(scope="module", params=RELEASES)
def tree(request, tmp_path_factory):
    return patched_tree(tmp_path_factory.mktemp(f"host-state-{request.param}"), [RECIPE], request.param)


@pytest.fixture(scope="module")
def tracker_module(tree):
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield load_helper(tree, "host_state_tracker", monkeypatch)


@pytest.fixture
def groups(tree, monkeypatch):
    """A patched MultiGroupBlockTable with two KV cache groups (block sizes 16 and 64)."""
    module, _ = load_block_table(tree, monkeypatch)
    return module.MultiGroupBlockTable(MAX_NUM_REQS, 256, MAX_TOKENS, False, torch.device("cpu"), block_sizes=[16, 64])


# Each step: (num_scheduled_tokens, block table dirty) or RESET; expected (commit, fill tails, copy layout).
DECISIONS = {
    "first-step-does-everything": ([([1], False)], [(True, True, True)]),
    "steady-decode-skips-everything": ([([1], True), ([1], False), ([1], False)],
                                       [(True, True, True), (False, False, False), (False, False, False)]),
    "dirty-block-table-commits": ([([2], True), ([2], True)], [(True, True, True), (True, False, False)]),
    "shrink-fills-tails": ([([1, 1, 1], True), ([1, 1], False)], [(True, True, True), (True, True, True)]),
    "grow-commits-new-rows-without-tail-fill": ([([1], True), ([1, 1], False)],
                                                [(True, True, True), (True, False, True)]),
    "same-total-reordered-counts-copy-layout": ([([1, 2], True), ([2, 1], False)],
                                                [(True, True, True), (False, False, True)]),
    "spec-decode-steady": ([([5, 5], True), ([5, 5], False)], [(True, True, True), (False, False, False)]),
    "dummy-run-resets": ([([1], True), RESET, ([1], False)], [(True, True, True), (True, True, True)]),
}


@pytest.mark.parametrize(("sequence", "expected"), DECISIONS.values(), ids=DECISIONS.keys())
def test_step_decisions(tracker_module, sequence, expected):
    tracker = tracker_module.HostStateTracker(context_parallel=False, async_spec_decode=False)
    got = []
    for step in sequence:
        if step == RESET:
            tracker.reset()
            continue
        counts, dirty = step
        copies = tracker.begin_step(np.array(counts, dtype=np.int32), dirty)
        got.append((copies.commit_block_table, copies.fill_tails, copies.copy_token_layout))
    assert got == expected


def test_context_parallel_keeps_every_write(tracker_module):
    tracker = tracker_module.HostStateTracker(context_parallel=True, async_spec_decode=False)
    for _ in range(3):
        assert tracker.begin_step(np.array([1], dtype=np.int32), False) == tracker_module.ALL_COPIES
        assert tracker.discard_mask_changed(np.array([False]))


@pytest.mark.parametrize(
    ("context_parallel", "async_spec_decode", "from_cpu"),
    [(False, False, True), (False, True, False), (True, False, False), (True, True, False)],
    ids=["plain", "async-spec-decode-uses-device-path", "context-parallel", "both"],
)
def test_positions_from_cpu_only_when_host_positions_are_exact(tracker_module, context_parallel,
                                                               async_spec_decode, from_cpu):
    tracker = tracker_module.HostStateTracker(context_parallel=context_parallel, async_spec_decode=async_spec_decode)
    assert tracker.positions_from_cpu is from_cpu
    tracker.begin_step(np.array([1], dtype=np.int32), True)
    tracker.reset()
    assert tracker.positions_from_cpu is from_cpu  # a static property of the run, not of the step


def test_discard_mask_copied_only_when_it_changes(tracker_module):
    tracker = tracker_module.HostStateTracker(context_parallel=False, async_spec_decode=False)
    mask = np.array([False, True])
    assert tracker.discard_mask_changed(mask)
    mask[1] = False  # the runner reuses its arrays: the tracker must have kept its own copy
    assert tracker.discard_mask_changed(mask)
    assert not tracker.discard_mask_changed(np.array([False, False]))
    assert tracker.discard_mask_changed(np.array([False, False, False]))
    tracker.reset()
    assert tracker.discard_mask_changed(np.array([False, False, False]))


MUTATIONS = {
    "append_row": lambda t: t.append_row(([9], [9]), 0),
    "add_row": lambda t: t.add_row(([9, 10], [11]), 1),
    "clear_row": lambda t: t.clear_row(0),
    "move_row": lambda t: t.move_row(0, 2),
    "swap_row": lambda t: t.swap_row(0, 1),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_every_row_mutator_sets_the_dirty_flag(groups, mutate):
    groups.add_row(([1, 2], [3]), 0)
    groups.add_row(([4], [5]), 1)
    assert groups.dirty
    groups.mark_committed()
    assert not groups.dirty and not any(table.dirty for table in groups.block_tables)
    mutate(groups)
    assert groups.dirty and all(table.dirty for table in groups.block_tables)


def test_appending_no_blocks_keeps_the_table_clean(groups):
    groups.add_row(([1], [2]), 0)
    groups.mark_committed()
    groups.append_row(([], []), 0)
    assert not groups.dirty


def test_change_with_equal_row_sum_is_committed(groups, tracker_module):
    """The article's np[0].sum() checksum misses this swap; the dirty flag does not."""
    tracker = tracker_module.HostStateTracker(context_parallel=False, async_spec_decode=False)
    groups.add_row(([2, 7], [1]), 0)
    groups.add_row(([4, 5], [1]), 1)
    one_token_each = np.array([1, 1], dtype=np.int32)
    assert tracker.begin_step(one_token_each, groups.dirty).commit_block_table
    groups.commit_block_table(2)
    groups.mark_committed()
    checksum = groups[0].block_table.np[0].sum()

    groups.swap_row(0, 1)

    assert groups[0].block_table.np[0].sum() == checksum  # a checksum would skip the commit
    assert tracker.begin_step(one_token_each, groups.dirty).commit_block_table
    groups.commit_block_table(2)
    assert groups[0].block_table.gpu[:2].tolist() == groups[0].block_table.cpu[:2].tolist()


class DeviceImage:
    """The runner's device input buffers that the skips concern, plus the writes one step makes."""

    def __init__(self) -> None:
        self.seq_lens = np.full(MAX_NUM_REQS, -7)
        self.req_indices = np.full(MAX_TOKENS, -7)
        self.query_pos = np.full(MAX_TOKENS, -7)
        self.num_scheduled_tokens = np.full(MAX_NUM_REQS, -7)
        self.discard_mask = np.zeros(MAX_NUM_REQS, dtype=bool)

    def write(self, counts, seq_lens, discard, copies, discard_changed) -> None:
        """What _prepare_inputs writes; everything when ``copies`` is the upstream ALL_COPIES."""
        num_reqs, total = len(counts), int(counts.sum())
        self.seq_lens[:num_reqs] = seq_lens
        if copies.fill_tails:
            self.seq_lens[num_reqs:] = 0
        if copies.copy_token_layout:
            self.req_indices[:total] = np.repeat(np.arange(num_reqs), counts)
            self.query_pos[:total] = np.concatenate([np.arange(c) for c in counts])
            self.num_scheduled_tokens[:num_reqs] = counts
        if discard_changed:
            self.discard_mask[:num_reqs] = discard

    def read(self, num_reqs: int, total: int):
        """The parts the step's consumers read."""
        return (self.seq_lens.tolist(), self.req_indices[:total].tolist(), self.query_pos[:total].tolist(),
                self.num_scheduled_tokens[:num_reqs].tolist(), self.discard_mask[:num_reqs].tolist())


def _mutation(draw, num_groups=2):
    kind = draw(st.sampled_from(["append", "add", "clear", "move", "swap", "none"]))
    row, other = draw(st.integers(0, MAX_NUM_REQS - 1)), draw(st.integers(0, MAX_NUM_REQS - 1))
    ids = tuple(draw(st.lists(st.integers(1, 99), min_size=1, max_size=2)) for _ in range(num_groups))
    return kind, row, other, ids


def _apply_mutation(groups, mutation) -> None:
    kind, row, other, ids = mutation
    room = all(t.num_blocks_per_row[row] + len(i) <= t.max_num_blocks_per_req for t, i in zip(groups.block_tables, ids))
    if kind == "append" and room:
        groups.append_row(ids, row)
    elif kind in ("add", "append"):
        groups.add_row(ids, row)
    elif kind == "clear":
        groups.clear_row(row)
    elif kind == "move":
        groups.move_row(row, other)
    elif kind == "swap":
        groups.swap_row(row, other)


@st.composite
def runs(draw):
    """Steps of a run: block-table mutations, then either a dummy run or a real step."""
    events = []
    for _ in range(draw(st.integers(1, 25))):
        mutations = [_mutation(draw) for _ in range(draw(st.integers(0, 2)))]
        if draw(st.integers(0, 9)) == 0:
            events.append(("dummy", mutations, draw(st.integers(1, MAX_NUM_REQS))))
            continue
        counts = np.array(draw(st.lists(st.integers(1, 3), min_size=1, max_size=MAX_NUM_REQS)), dtype=np.int32)
        seq_lens = draw(st.lists(st.integers(1, 500), min_size=len(counts), max_size=len(counts)))
        discard = draw(st.lists(st.booleans(), min_size=len(counts), max_size=len(counts)))
        events.append(("step", mutations, (counts, np.array(seq_lens), np.array(discard))))
    return events


@given(run=runs())
@settings(max_examples=200, deadline=None)
def test_skipping_runner_leaves_the_same_device_image_as_upstream(tree, tracker_module, run):
    tracker = tracker_module.HostStateTracker(context_parallel=False, async_spec_decode=False)
    upstream, skipping = DeviceImage(), DeviceImage()
    with pytest.MonkeyPatch.context() as monkeypatch:
        module, _ = load_block_table(tree, monkeypatch)
        groups = module.MultiGroupBlockTable(MAX_NUM_REQS, 256, MAX_TOKENS, False, torch.device("cpu"),
                                             block_sizes=[16, 64])
        for kind, mutations, payload in run:
            for mutation in mutations:
                _apply_mutation(groups, mutation)
            if kind == "dummy":  # _dummy_run: dummy seq_lens, padded rows committed then zeroed
                num_reqs = payload
                for image in (upstream, skipping):
                    image.seq_lens[:num_reqs], image.seq_lens[num_reqs:] = 1000, 0
                groups.commit_block_table(MAX_NUM_REQS)
                for table in groups.block_tables:
                    table.block_table.gpu[num_reqs:].fill_(0)
                tracker.reset()
                continue
            counts, seq_lens, discard = payload
            num_reqs = len(counts)
            copies = tracker.begin_step(counts, groups.dirty)
            if copies.commit_block_table:
                groups.commit_block_table(num_reqs)
                groups.mark_committed()
            upstream.write(counts, seq_lens, discard, tracker_module.ALL_COPIES, True)
            skipping.write(counts, seq_lens, discard, copies, tracker.discard_mask_changed(discard))

            assert skipping.read(num_reqs, int(counts.sum())) == upstream.read(num_reqs, int(counts.sum()))
            for table in groups.block_tables:
                assert table.block_table.gpu[:num_reqs].tolist() == table.block_table.cpu[:num_reqs].tolist()
                # The attention builders zero the padded rows past num_reqs on the device.
                table.block_table.gpu[num_reqs:].fill_(0)
