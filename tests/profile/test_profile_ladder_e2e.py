"""``ladder --capture-profiles`` end to end on this CPU machine: the real ladder bundle and its unchanged
run-ladder.sh, real `optkit apply` on a copy of the real vllm-ascend 0.23.0 tree, the real vLLM 0.23.0
benchmark client, and the simulated server (tests/measure/sim_server.py), which writes an Ascend
profiler capture per start without the signatures of the recipes it finds active; then the real
`optkit report`, which must say that the sampler step removed the full-vocabulary Cast."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "measure"))

from compat_support import scratch_tree  # noqa: E402
from simhost import SimHost  # noqa: E402
from optkit.cli.main import cli  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.tree]
SAMPLER = "sampler-greedy-bf16-fastpath"
SIGNS = {SAMPLER: {"tree": [["vllm_ascend/sample/sampler.py", "def greedy_argmax_suffices"]], "delta_ms": {"1": -1.0}}}


def test_ladder_profile_and_report_end_to_end(tmp_path):
    if importlib.util.find_spec("vllm") is None:
        message = "vLLM 0.23.0 is not installed (scripts/test installs it)"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    ladder = tmp_path / "ladder"
    written = CliRunner().invoke(cli, ["ladder", "qwen3.5-35b", "--target", "910c", "--concurrency", "1",
                                       "--input-len", "32", "--output-len", "8", "--no-min-tokens", "--recipes", SAMPLER,
                                       "--capture-profiles",
                                       "-o", str(ladder)], catch_exceptions=False)
    assert written.exit_code == 0, written.output
    host = SimHost(tmp_path / "host", scratch_tree(tmp_path),
                   {"base_ms": {"1": 12.0}, "ttft_ms": 10.0, "noise_ms": 0.1, "startup_s": 0.3, "seed": 3,
                    "recipes": SIGNS})
    run = subprocess.run(["bash", str(ladder / "run-ladder.sh"), "--tree", str(host.tree)], cwd=host.root,
                         env=host.env(), capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "profiling: one request of 24 tokens at c1 into profile/" in run.stdout + run.stderr
    steps = [s["id"] for s in json.loads((ladder / "ladder.json").read_text())["steps"]]
    for step in steps:
        assert list((ladder / "results" / step / "r1" / "profile").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT"))
    starts = host.starts()
    assert all(any(a.startswith("--profiler-config.torch_profiler_dir=") for a in s["argv"]) for s in starts)
    report = CliRunner().invoke(cli, ["report", str(ladder)], catch_exceptions=False)
    assert report.exit_code == 0, report.output
    rows = json.loads((ladder / "report" / "profiles.json").read_text())["steps"]
    last = rows[-1]
    assert last["disappeared"] == [SAMPLER] and last["still_present"] == []
    assert last["wall_delta_us"] == pytest.approx(-10.0, abs=1.0)  # the injected Cast: 9 µs + its 1 µs launch gap
    assert "Step captures (c1)" in report.output
