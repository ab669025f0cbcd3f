"""run-ladder.sh when a step fails: the server of a patched step crashes at start (injected by the
simulation). The tree must be reverted, the step's logs kept in results/failed/, no results filed
for it, and the exit status non-zero. Fast: the step runs alone (--only) and never reaches the
benchmark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support

from compat_support import pristine, scratch_tree  # noqa: E402
from simhost import SimHost  # noqa: E402
from optkit.measure.ladder import write_ladder  # noqa: E402
from optkit.measure.steps import ladder_steps  # noqa: E402
from optkit.resolve.plan import load_workspace, plan  # noqa: E402
from optkit.resolve.request import Request  # noqa: E402
from optkit.tree.inspect import tree_checksum  # noqa: E402

pytestmark = pytest.mark.tree

SAMPLER = "sampler-greedy-bf16-fastpath"


def test_a_crashing_server_fails_the_step_and_leaves_the_tree_clean(tmp_path):
    workspace = load_workspace()
    full = plan(Request(model="qwen3.5-35b", concurrency=[1], min_tokens=False), workspace)  # no min_tokens: with it the sampler fast path has no effect
    write_ladder(full, workspace, ladder_steps(full, workspace.catalog, only=[SAMPLER]), tmp_path / "ladder")
    signs = {"tree": [["vllm_ascend/sample/sampler.py", "def greedy_argmax_suffices"]]}
    host = SimHost(tmp_path / "host", scratch_tree(tmp_path), {
        "base_ms": {"1": 20.0}, "recipes": {SAMPLER: signs}, "crash": SAMPLER})
    proc = subprocess.run(["bash", str(tmp_path / "ladder" / "run-ladder.sh"), "--tree", str(host.tree),
                           "--only", "1"], cwd=host.root, env=host.env(), capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "applying the patches of 01-sampler-greedy-bf16-fastpath" in out
    assert "the server exited before /health answered" in out
    assert "sim: sampler-greedy-bf16-fastpath makes the server crash at start (injected)" in out
    assert "reverting the tree" in out and "run it again to resume" in out
    assert tree_checksum(host.tree) == tree_checksum(pristine())
    results = tmp_path / "ladder" / "results"
    assert not (results / "01-sampler-greedy-bf16-fastpath").exists()
    assert "makes the server crash" in (results / "failed" / "01-sampler-greedy-bf16-fastpath-r1" / "serve.log").read_text()
    assert [s["active"] for s in host.starts()] == [[SAMPLER]]  # the patch was on the tree when it started
