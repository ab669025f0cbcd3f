"""What run-ladder.sh calls on the host (`optkit measure host|accuracy`) and `optkit report`'s wiring:
the accuracy client against the simulated server, host facts from a fake npu-smi, exit codes."""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support

from simhost import NPU_SMI, SIM, free_port  # noqa: E402
from test_report import HOST, STEPS, TPOT, Lab  # noqa: E402
from optkit.cli.main import cli  # noqa: E402
from optkit.measure import MeasureError  # noqa: E402
from optkit.measure.accuracy import PROMPTS, load_prompt_set, run_prompts  # noqa: E402


@pytest.fixture
def server(tmp_path):
    """The simulated server on a free port, serving the name 'served'."""
    port = free_port()
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"base_ms": {"1": 1.0}, "recipes": {}, "tree": str(tmp_path),
                                   "log": str(tmp_path / "starts.jsonl"), "startup_s": 0.0}))
    proc = subprocess.Popen([sys.executable, str(SIM), "model", "--served-model-name", "served", "--port", str(port)],
                            env={**os.environ, "SIM_PROFILE": str(profile)})
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_the_accuracy_client_records_every_prompts_token_ids(server):
    prompts = load_prompt_set()
    data = run_prompts(server, "served", prompts, min_tokens=True)
    assert [o["id"] for o in data["outputs"]] == [p.id for p in prompts.prompts]
    assert all(len(o["token_ids"]) == prompts.max_tokens for o in data["outputs"])
    q01 = next(o for o in data["outputs"] if o["id"] == "q01")
    assert q01["text"].startswith(" 71 ")  # the simulation answers the arithmetic correctly
    assert data["min_tokens"] is True and data["max_tokens"] == 32


def test_the_accuracy_client_names_the_url_when_the_server_refuses(server):
    with pytest.raises(MeasureError, match=r"/v1/completions: HTTP 404 for the accuracy prompt: .*'other' is not served"):
        run_prompts(server, "other", load_prompt_set(), min_tokens=False)


def test_measure_accuracy_writes_accuracy_json(server, tmp_path):
    out = tmp_path / "accuracy.json"
    result = CliRunner().invoke(cli, ["measure", "accuracy", "--url", server, "--served-name", "served",
                                      "--prompts", str(PROMPTS), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(json.loads(out.read_text())["outputs"]) == len(load_prompt_set().prompts)


@pytest.mark.tree
def test_measure_host_reads_npu_smi_cann_and_the_tree(tmp_path, monkeypatch):
    from compat_support import pristine

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npu-smi").write_text(NPU_SMI)
    (bin_dir / "npu-smi").chmod(0o755)
    toolkit = tmp_path / "toolkit" / "aarch64-linux"
    toolkit.mkdir(parents=True)
    (toolkit / "ascend_toolkit_install.info").write_text("version=9.0.1\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path / "toolkit"))
    out = tmp_path / "host.json"
    result = CliRunner().invoke(cli, ["measure", "host", "--tree", str(pristine()), "--python", sys.executable,
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    host = json.loads(out.read_text())
    assert (host["npu"], host["target"], host["driver"], host["cann"]) == ("910C", "910c", "24.1.rc3", "9.0.1")
    assert host["packages"]["vllm_ascend"] is None and host["tree"]["vllm_ascend"] == "0.23.0"
    assert len(host["tree"]["digest"]) == 64 and host["tree"]["applied"] == []
    assert str(tmp_path) not in out.read_text()  # no paths of the host


def test_measure_host_without_npu_smi_says_so(tmp_path, monkeypatch):
    from optkit.measure.host import host_facts

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr("optkit.measure.host.pristine_digest", lambda tree: type("D", (), {
        "digest": "0" * 64, "version": "0.23.0", "files": 1, "applied": []})())
    host = host_facts(tmp_path, sys.executable, {})
    assert set(host) == set(HOST)  # the report tests' host.json has the shape host_facts writes
    assert host["npu"] is None and host["target"] is None
    assert "npu-smi: not found on PATH (not an Ascend host, or the driver is not installed)" in host["notes"]


def test_report_exits_1_on_a_failed_gate_after_writing_the_report(tmp_path):
    lab = Lab(tmp_path)
    for s in lab.steps:
        lab.run(s, 1, TPOT[s], outputs={"t03": {"token_ids": [1, 3]}} if s == STEPS[1] else None)
    result = CliRunner().invoke(cli, ["report", str(lab.ladder)])
    assert result.exit_code == 1
    assert "optkit: error: the accuracy gate failed:" in result.output
    assert "prompt 't03' diverges at token 1" in result.output
    assert (lab.ladder / "report" / "report.html").is_file()


def test_report_record_writes_into_the_given_catalog(tmp_path):
    root = tmp_path / "catalog"  # a folder of one's own, as plan's --catalog takes it
    root.mkdir()
    lab = Lab(tmp_path)
    lab.all()
    result = CliRunner().invoke(cli, ["report", str(lab.ladder), "--record", "--catalog", str(root)])
    assert result.exit_code == 0, result.output
    (path,) = (root / "verified").glob("*.yaml")
    assert f"recorded {path}" in result.output
    assert "sampler-greedy-bf16-fastpath" in path.read_text()


@pytest.mark.parametrize("args, code, words", [
    pytest.param(["report", "{tmp}"], 1, "is not a ladder: it has no ladder.json", id="not-a-ladder"),
    pytest.param(["ladder", "qwen3.5-35b", "-o", "{tmp}/l", "--recipes", "moe-fused-mc2-enable"], 1,
                 "--recipes moe-fused-mc2-enable: the plan does not select it", id="recipe-not-selected"),
    pytest.param(["ladder", "qwen3.5-35b", "-o", "{tmp}/l", "--repeat", "0"], 2, "--repeat", id="bad-repeat"),
])
def test_cli_errors(tmp_path, args, code, words):
    result = CliRunner().invoke(cli, [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == code and words in result.output, result.output


def _failed_run(lab, name: str) -> None:
    """What run-ladder.sh keeps of a run that did not finish: its logs in results/failed/."""
    logs = lab.ladder / "results" / "failed" / name
    logs.mkdir(parents=True)
    (logs / "serve.log").write_text("the server exited\n")


def _no_results(lab):
    _failed_run(lab, f"{STEPS[0]}-r1")


def _step_failed_to_start(lab):
    lab.run(STEPS[0], 1, TPOT[STEPS[0]])
    _failed_run(lab, f"{STEPS[1]}-r1")


def _below_margin(lab):
    for s in lab.steps:
        lab.run(s, 1, TPOT[s], outputs={f"q{n:02d}": {"text": " 0"} for n in range(1, 4)} if s == STEPS[2] else None)


def _accuracy_missing(lab):
    lab.all()
    (lab.ladder / "results" / STEPS[1] / "r1" / "accuracy.json").unlink()


def _rerun_after_a_failure(lab):
    lab.all()
    _failed_run(lab, f"{STEPS[1]}-r1")  # the logs of the failure before the run that succeeded


HOLE = re.compile(r"[:,] *[.;,]|[:,] *\n\n")  # a sentence whose value is missing ("questions: .")


@pytest.mark.parametrize("make, code, error, lines", [
    pytest.param(_no_results, 1, "no step of the ladder in {ladder} has results (none ran, or every run failed; "
                 "results/failed/ keeps an unfinished run's logs): fix the cause and run its run-ladder.sh again, it resumes",
                 ["**No step has results**: none ran, or every run failed (the issues below say which); the tables are empty.",
                  "Exact-match accuracy on the shipped questions: no step has accuracy outputs.",
                  f"- results/failed/{STEPS[0]}-r1: a run that did not finish; its logs (serve.log, bench.log) say why",
                  f"- {STEPS[0]}: no results (not run yet, or its run failed)"], id="no-results-at-all"),
    pytest.param(_step_failed_to_start, 1, "the accuracy gate did not pass: not every comparison was checked:\n"
                 f"  - {STEPS[1]} against {STEPS[0]} not checked: no accuracy outputs for {STEPS[1]}",
                 [f"- results/failed/{STEPS[1]}-r1: a run that did not finish; its logs (serve.log, bench.log) say why",
                  f"Exact-match accuracy on the shipped questions: {STEPS[0]} 100.0%.",
                  f"- **{STEPS[1]} against {STEPS[0]} not checked: no accuracy outputs for {STEPS[1]}**"],
                 id="a-step-failed-to-start"),
    pytest.param(_below_margin, 1, "the accuracy gate failed:\n  - 02-waterfall-hccl-aiv (waterfall-hccl-aiv, tolerance 5 "
                 "points) against 01-sampler-greedy-bf16-fastpath: exact-match accuracy 90.6% is more than 5 points below "
                 "100.0%", ["## Accuracy gate: FAILED"], id="accuracy-below-margin"),
    pytest.param(_accuracy_missing, 1, "the accuracy gate did not pass: not every comparison was checked:\n"
                 f"  - {STEPS[1]} against {STEPS[0]} not checked: no accuracy outputs for {STEPS[1]}",
                 [f"Exact-match accuracy on the shipped questions: {STEPS[0]} 100.0%, {STEPS[2]} 100.0%."],
                 id="missing-accuracy-file"),
    pytest.param(_rerun_after_a_failure, 0, None, ["## Accuracy gate: PASSED", "## Issues", "- none"],
                 id="resumed-after-a-failure"),
])
def test_report_exits_1_unless_every_step_has_results_and_the_gate_passed(tmp_path, make, code, error, lines):
    lab = Lab(tmp_path)
    (lab.ladder / "results").mkdir()  # run-ladder.sh makes it before its first run
    make(lab)
    result = CliRunner().invoke(cli, ["report", str(lab.ladder)])
    assert result.exit_code == code, result.output
    if error:
        assert f"optkit: error: {error.format(ladder=lab.ladder)}\n" in result.output
    text = (lab.ladder / "report" / "report.md").read_text()
    assert [line for line in lines if line not in text.splitlines()] == []
    assert HOLE.findall(text) == []
    assert "Accuracy gate: " + ("PASSED" if code == 0 else "FAILED") in result.output
