"""``optkit ladder --capture-profiles``: every step's short capture, and ``optkit report`` saying which recipe
signatures each step removed; the simulated server writes a capture of the same format per start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import make_fixture
from optkit.measure.ladder import ladder_files, write_ladder
from optkit.measure.step_profiles import step_profiles, write_step_profiles
from optkit.measure.steps import ladder_steps
from optkit.profile.analysis import analyze
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "measure"))
from simhost import free_port  # noqa: E402

SIM = TESTS / "measure" / "sim_server.py"
WORKSPACE = load_workspace()
REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1], "input_len": 32, "output_len": 8,
           "min_tokens": False}  # no min_tokens: with it the sampler fast path has no effect
SAMPLER, TRANSPOSE = "sampler-greedy-bf16-fastpath", "gdn-conv-weight-transpose-cache"


def _ladder(profile: bool, only=(SAMPLER, TRANSPOSE)):
    full = plan(Request(**REQUEST), WORKSPACE)
    ladder = ladder_steps(full, WORKSPACE.catalog, only=list(only))
    return full, ladder, ladder_files(full, WORKSPACE, ladder, profile=profile)


def test_the_ladder_carries_the_profiler_only_with_profile():
    _, _, plain = _ladder(False)
    assert b"PROFILE_ARGS" not in plain["run-ladder.sh"] and "profile" not in json.loads(plain["ladder.json"])
    _, _, files = _ladder(True)
    script = files["run-ladder.sh"].decode()
    assert "--profiler-config.profiler=torch" in script and "--profiler-config.max_iterations=16" in script
    assert '"--profiler-config.torch_profiler_dir=$PARTIAL/profile"' in script
    assert "capture_profile\n  stop_server" in script
    data = json.loads(files["ladder.json"])["profile"]
    assert data["dims"]["gdn_layers"] == 30 and SAMPLER in data["signatures"]


def _serve(tmp_path: Path, active_env: dict[str, str], profiler: bool):
    port = free_port()
    profile = {"base_ms": {"1": 1.0}, "tree": str(tmp_path), "log": str(tmp_path / "starts.jsonl"),
               "recipes": {SAMPLER: {"env": {"SIM_SAMPLER": "1"}}}}
    (tmp_path / "sim.json").write_text(json.dumps(profile))
    argv = ["tiny", "--port", str(port)] + ([f"--profiler-config.torch_profiler_dir={tmp_path / 'capture'}"]
                                            if profiler else [])
    env = {**os.environ, "SIM_PROFILE": str(tmp_path / "sim.json"), **active_env}
    proc = subprocess.Popen([sys.executable, str(SIM), *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "no answer"
            time.sleep(0.2)
    return proc, port


def _post(port: int, path: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=b"{}", method="POST")
    try:
        return urllib.request.urlopen(request, timeout=60).status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("active", [False, True], ids=["recipe-off", "recipe-on"])
def test_the_simulated_server_writes_a_capture_without_the_active_recipes_signatures(tmp_path, active):
    proc, port = _serve(tmp_path, {"SIM_SAMPLER": "1"} if active else {}, profiler=True)
    try:
        assert _post(port, "/start_profile") == 200 and _post(port, "/stop_profile") == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    result = analyze(tmp_path / "capture", list(WORKSPACE.catalog), make_fixture_dims(), "0.23.0")
    present = {f.recipe for f in result.findings if f.present}
    assert (SAMPLER in present) is not active
    assert TRANSPOSE in present


def test_without_the_profiler_the_simulated_endpoints_refuse(tmp_path):
    proc, port = _serve(tmp_path, {}, profiler=False)
    try:
        assert _post(port, "/start_profile") == 404
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def make_fixture_dims() -> dict[str, int]:
    return {"num_layers": 40, "gdn_layers": 30, "full_attention_layers": 10, "vocab_size": 248320, "hidden_size": 2048}


def _results(tmp_path: Path, ladder: dict, skip: str | None = None) -> Path:
    """results/STEP/r1/profile: the capture a step of the ladder would leave (its recipes' signatures gone)."""
    results = tmp_path / "results"
    for step in ladder["steps"]:
        if step["id"] == skip:
            continue
        make_fixture.write(results / step["id"] / "r1" / "profile", inject=set(make_fixture.INJECTED) - set(step["recipes"]))
    return results


def test_the_report_says_which_signatures_each_step_removed(tmp_path):
    _, _, files = _ladder(True)
    ladder = json.loads(files["ladder.json"])
    rows = step_profiles(ladder, _results(tmp_path, ladder))
    assert [r["step"] for r in rows] == [s["id"] for s in ladder["steps"]]
    assert "disappeared" not in rows[0] and SAMPLER in rows[0]["present"]
    for row, step, before in zip(rows[1:], ladder["steps"][1:], ladder["steps"]):
        added = [r for r in step["recipes"] if r in make_fixture.INJECTED and r not in before["recipes"]]
        assert row["disappeared"] and row["disappeared"] == sorted(added)
        assert row["still_present"] == []
        removed = sum(make_fixture.INJECTED[r] for r in row["disappeared"])
        assert row["wall_delta_us"] == pytest.approx(-removed, rel=0.15)


def test_a_step_whose_recipe_did_not_remove_its_ops_is_flagged(tmp_path):
    _, _, files = _ladder(True, only=(SAMPLER,))
    ladder = json.loads(files["ladder.json"])
    results = tmp_path / "results"
    for step in ladder["steps"]:  # every capture shows every signature: the recipe changed nothing
        make_fixture.write(results / step["id"] / "r1" / "profile")
    rows = step_profiles(ladder, results)
    assert rows[-1]["disappeared"] == [] and rows[-1]["still_present"] == [SAMPLER]


def test_the_report_command_writes_the_step_captures(tmp_path):
    full, ladder_steps_, _ = _ladder(True)
    write_ladder(full, WORKSPACE, ladder_steps_, tmp_path / "ladder", profile=True)
    ladder = json.loads((tmp_path / "ladder" / "ladder.json").read_text())
    missing = ladder["steps"][-1]["id"]
    _results(tmp_path / "ladder", ladder, skip=missing)
    rows, written = write_step_profiles(ladder, tmp_path / "ladder" / "results", tmp_path / "report")
    assert [p.name for p in written] == ["profiles.json", "profiles.md"]
    assert rows[-1]["problem"].startswith("no capture")
    text = (tmp_path / "report" / "profiles.md").read_text()
    assert f"| `{missing}` | — |" in text and SAMPLER in text


def test_a_ladder_without_profile_writes_no_step_captures(tmp_path):
    _, _, files = _ladder(False)
    assert write_step_profiles(json.loads(files["ladder.json"]), tmp_path, tmp_path / "report") == ([], [])
