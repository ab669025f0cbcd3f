"""optkit port on the real releases: 0.23.0 → 0.23.0.post1 (one refreshed hunk, every other patch exact; the
write on a copy of the catalog) and 0.23.0 → 0.30.0rc2 (moved, upstream, superseded, conflicts)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys

import pytest
from packaging.version import Version

from compat_support import CATALOG, pristine
from optkit.catalog.loader import load_catalog
from optkit.catalog.paths import project_root
from optkit.tree.gitops import git_apply
from optkit.versions.port import LEFT_OUT, port
from optkit.versions.port_write import write_port
from optkit.versions.probes import declared_entry

pytestmark = [pytest.mark.tree]

DATE = dt.date(2026, 12, 1)
FASTPATH = "blocktable-slot-mapping-cpu-fastpath"
FUSED_MOE = "vllm_ascend/ops/fused_moe/fused_moe_0_23_0.py"


@pytest.fixture(scope="module")
def post1():
    return port(CATALOG, None, "0.23.0", "0.23.0.post1", date=DATE)


@pytest.fixture(scope="module")
def newest():
    return port(CATALOG, None, "0.23.0", "0.30.0rc2", date=DATE)


def _patches(report):
    return {(r.recipe, p.patch): p for r in report.recipes for p in r.patches}


def test_post1_refreshes_one_hunk_and_every_other_patch_is_exact(post1):
    patches = _patches(post1)
    merged = {k: p for k, p in patches.items() if p.outcome != "exact"}
    assert [(k[0], p.outcome) for k, p in merged.items()] == [(FASTPATH, "merged")]
    (hunk,) = merged[(FASTPATH, "0001-slot-mapping-cpu-fastpath.patch")].refreshed_hunks
    assert hunk.startswith("vllm_ascend/worker/model_runner_v1.py @@ -3528,7 +3533,8 @@")
    assert "+            self.input_batch.block_table.commit_block_table(num_reqs_padded, snapshot=True)" in hunk
    assert "\n             # Invalidate real-request slots before attention backends derive\n" in hunk  # PR #15362


def test_post1_actions_follow_the_catalog(post1):
    """The fast path is written unless the catalog already carries a post1 patch set, which must then be exactly
    this port's refresh (the runner-group porter's hand port and the tool agree)."""
    actions = {r.recipe: r for r in post1.recipes}
    assert {r.action for k, r in actions.items() if k != FASTPATH} == {"up-to-date"}
    recipe = CATALOG[FASTPATH]
    ported = declared_entry(recipe, Version("0.23.0.post1")) is not declared_entry(recipe, Version("0.23.0"))
    fast = actions[FASTPATH]
    if ported:
        assert fast.action == "up-to-date" and "this port's refresh is identical to it" in fast.why
    else:
        assert (fast.action, fast.new_range, [n.name for n in fast.new_patches]) == (
            "write", ">=0.23.0.post1,<0.24", ["0001-slot-mapping-cpu-fastpath-0.23.0.post1.patch"])


def _catalog_copy(tmp_path):
    root = tmp_path / "catalog"
    for folder in ("recipes", "kernels"):
        shutil.copytree(project_root() / folder, root / folder)
    return load_catalog(root)


def test_post1_write_on_a_copy_of_the_catalog(tmp_path):
    catalog = _catalog_copy(tmp_path)
    report = write_port(catalog, port(catalog, [FASTPATH], "0.23.0", "0.23.0.post1", date=DATE))
    if report.recipes[0].action == "up-to-date":
        pytest.skip("the catalog already carries the post1 patch set (checked by test_post1_actions_follow_the_catalog)")
    name = "0001-slot-mapping-cpu-fastpath-0.23.0.post1.patch"
    assert report.written == [f"recipes/{FASTPATH}/{name}", f"recipes/{FASTPATH}/recipe.yaml"]
    recipe = load_catalog(catalog.root)[FASTPATH]
    entry = declared_entry(recipe, Version("0.23.0.post1"))
    assert (entry.versions, entry.patches) == (">=0.23.0.post1,<0.24", [name])
    assert declared_entry(recipe, Version("0.23.0")).patches == ["0001-slot-mapping-cpu-fastpath.patch"]
    data = (catalog.folders[FASTPATH] / name).read_bytes()
    assert git_apply(pristine("0.23.0.post1"), data, "--check") is None
    assert git_apply(pristine("0.23.0"), data, "--check") is not None
    again = write_port(load_catalog(catalog.root), port(load_catalog(catalog.root), [FASTPATH], "0.23.0",
                                                         "0.23.0.post1", date=dt.date(2030, 1, 1)))
    assert again.written == [] and "identical" in again.recipes[0].why


def test_newest_fused_moe_0_23_0_patches_are_moved(newest):
    """fused_moe_0_23_0.py is gone from 0.30.0rc2; each patch's hunks are found in ops/fused_moe/."""
    touching = {k: p for k, p in _patches(newest).items() if any(f.path == FUSED_MOE for f in p.files)}
    assert sorted(k[0] for k in touching) == ["moe-shared-expert-sidestream-ar", "moe-shared-expert-weight-prefetch",
                                              "moe-skip-dispatch-combine-events"]
    for (recipe, _), patch in touching.items():
        file = next(f for f in patch.files if f.path == FUSED_MOE)
        assert file.outcome == "moved" and file.moved_to in ("vllm_ascend/ops/fused_moe/fused_moe.py",
                                                             "vllm_ascend/ops/fused_moe/shared_experts.py"), file.why
        entry = declared_entry(CATALOG[recipe], Version("0.30.0rc2"))
        assert patch.outcome == (entry.status if entry.status in LEFT_OUT else "moved")
    skip = touching[("moe-skip-dispatch-combine-events", "0001-skip-dispatch-combine-events.patch")]
    assert "fused_moe.py:485 AscendMoERunner._forward_impl" in next(f.why for f in skip.files if f.path == FUSED_MOE)


@pytest.mark.parametrize("recipe, outcome", [
    ("compile-super-kernel", "upstream"),
    ("gdn-conv-weight-transpose-cache", "upstream"),
    ("worker-pinned-staging-reuse", "superseded"),
])
def test_newest_left_out(newest, recipe, outcome):
    found = next(r for r in newest.recipes if r.recipe == recipe)
    assert [p.outcome for p in found.patches] == [outcome] and found.action == "left-out"


@pytest.mark.parametrize("recipe, patch, outcome, words", [
    pytest.param("mc2-token-capacity-1024", "0001-mc2-token-capacity-1024.patch", "conflict",
                 "min(num_tokens_per_tp_rank, _MC2_TOKENS_PER_RANK_LIMIT)", id="constant-named-upstream"),
    pytest.param("rejection-greedy-presampled", "0001-rejection-greedy-presampled.patch", "conflict", "<<<<<<< 0.30.0rc2",
                 id="greedy-dispatch-rewritten"),
    pytest.param("rope-update-cos-sin-merge", "0001-update-cos-sin-merge.patch", "merged", "", id="context-moved"),
    pytest.param("rope-dsv4-return-view", "0001-rope-dsv4-return-view.patch", "offset", "", id="moved-lines"),
    pytest.param("static-kernel-compile-fixes", "0001-cann-compat-relative-include.patch", "exact", "", id="unchanged"),
])
def test_newest_outcomes(newest, recipe, patch, outcome, words):
    found = _patches(newest)[(recipe, patch)]
    assert found.outcome == outcome, found.why
    assert words in found.worksheet
    assert bool(found.worksheet) == (outcome == "conflict")


def test_cli_json_is_deterministic():
    cmd = [sys.executable, "-m", "optkit", "port", FASTPATH, "--to", "0.23.0.post1", "--date", "2026-12-01", "--json"]
    runs = [subprocess.run(cmd, capture_output=True, text=True, timeout=600) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout
    data = json.loads(runs[0].stdout)
    (patch,) = data["recipes"][0]["patches"]
    assert (data["from"], data["to"], patch["outcome"], len(patch["refreshed_hunks"])) == ("0.23.0", "0.23.0.post1",
                                                                                         "merged", 1)
    assert "Last-Update: 2026-12-01\n" in patch["refreshed"]


ROPE = "rope-dsv4-return-view"


def test_newest_rope_patch_names_the_dspark_caller_that_relies_on_the_copy(newest):
    """The 0.23 patch drops forward's in-place copy; 0.30's DeepSeek-V4 DSpark ropes kv through it in place and
    drops the return value (dspark.py:186-197): the merge is clean, the review names that caller."""
    review = _patches(newest)[(ROPE, "0001-rope-dsv4-return-view.patch")].review
    assert review.changed == ("ComplexExpRotaryEmbedding.forward",)
    words = [c.words() for c in review.callers]
    assert "vllm_ascend/models/deepseek_v4/dspark.py:191 (DeepseekV4DSparkModel._project_shared_kv via " \
           "_apply_dsv4_rope; calls _apply_dsv4_rope(), result unused)" in words
    assert all("minimax" not in w for w in words)  # its rotary_emb is get_rope(...), not this class


def test_newest_rope_port_without_the_hand_written_patch_is_held_for_review(tmp_path):
    """Without the hand-written 0.30 patch set the port would write the 0.23 one at moved lines: it is held."""
    catalog = _catalog_copy(tmp_path)
    path = catalog.folders[ROPE] / "recipe.yaml"
    text = path.read_text()
    assert text.count("    patches: [0001-rope-dsv4-return-view-0.30.patch]\n") == 1
    path.write_text(text.replace("    patches: [0001-rope-dsv4-return-view-0.30.patch]\n", ""))
    catalog = load_catalog(catalog.root)
    (held,) = port(catalog, [ROPE], "0.23.0", "0.30.0rc2", date=DATE).recipes
    assert held.action == "needs-review" and "dspark" not in held.why and f"--reviewed {ROPE} writes it" in held.why
    assert held.new_patches  # what --reviewed would write is still shown
    (consented,) = port(catalog, [ROPE], "0.23.0", "0.30.0rc2", date=DATE, reviewed=[ROPE]).recipes
    assert consented.action == "write"


def test_post1_has_no_new_callers(post1):
    """0.23.0.post1 adds no caller of anything the patches change: every action is today's."""
    assert [k for k, p in _patches(post1).items() if p.needs_review] == []
