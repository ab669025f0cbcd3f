"""``optkit tune`` refuses what it cannot search, each refusal naming the flag and the fix, never overwrites a
directory holding trials, and with --k8s writes an Indexed Job that is valid Kubernetes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for k8s_support

from k8s_support import schema_problems  # noqa: E402
from optkit.bundle.k8s import KUBERNETES_VERSION  # noqa: E402
from optkit.cli.main import cli  # noqa: E402

BASE = ["tune", "qwen3.5-35b", "--target", "910c"]
SLO = ["--slo", "tpot_p90<=40ms"]


def tune(*args: str):
    return CliRunner().invoke(cli, [*BASE, *args])


@pytest.mark.parametrize("args, code, words", [
    pytest.param([*SLO, "--fix", "foo=1"], 1, "--fix foo=…: no such knob; the knobs are layout, speculative", id="fix-unknown"),
    pytest.param([*SLO, "--range", "layout=1:2"], 1, "--range layout=…: layout is a choice among TP1xDP1",
                 id="range-on-a-choice"),
    pytest.param([*SLO, "--choices", "max-num-seqs=1,2"], 1, "max-num-seqs is an integer range; use --range",
                 id="choices-on-a-range"),
    pytest.param([*SLO, "--range", "max-num-seqs=9:2"], 1, "--range max-num-seqs=9:2: LOW 9 is above HIGH 2", id="range-low-high"),
    pytest.param([*SLO, "--fix", "layout=TPx"], 1, "--fix layout=TPx: 'TPx' is not TP<t>xDP<d>", id="fix-bad-layout"),
    pytest.param([*SLO, "--choices", "flashcomm1=maybe"], 1, "each value is on or off", id="choices-bad-value"),
    pytest.param([*SLO, "--fix", "max-num-seqs"], 2, "'max-num-seqs': write NAME=VALUE", id="fix-no-value"),
    pytest.param([*SLO, "--workers", "2"], 2, "--workers goes with --k8s", id="workers-without-k8s"),
    pytest.param([*SLO, "--fix", "layout=TP1xDP1"], 1, "is refused by the resolver: qwen3.5-35b-a3b does not fit",
                 id="fix-refused-point"),
    pytest.param([*SLO, "--choices", "capture-share=2"], 1, "each value is a share above 0 and at most 1",
                 id="choices-bad-share"),
    pytest.param([*SLO, "--goal", "latency"], 2, "searches for throughput under the SLO: drop --goal latency",
                 id="goal-latency"),
    pytest.param([], 2, "optkit tune searches for the best throughput under an SLO: add --slo", id="no-slo"),
])
def test_tune_refuses_bad_input_with_the_flag_and_the_fix(tmp_path, args, code, words):
    result = tune(*args, "-o", str(tmp_path / "t"))
    assert result.exit_code == code and words in result.output, result.output
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("occupant", ["study.db", "study.journal", "trials/0000/server.log"])
def test_tune_refuses_a_directory_holding_trials(tmp_path, occupant):
    assert tune(*SLO, "-o", str(tmp_path / "t")).exit_code == 0
    (tmp_path / "t" / occupant).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "t" / occupant).write_text("")
    result = tune(*SLO, "--budget", "5", "-o", str(tmp_path / "t"))
    assert result.exit_code == 1 and "holds a tune's trials (study.db / trials/)" in result.output, result.output
    assert '"budget": 30' in (tmp_path / "t" / "tune.json").read_text()  # untouched


def test_the_tune_job_is_valid_kubernetes(tmp_path):
    result = tune(*SLO, "--k8s", "--workers", "3", "-o", str(tmp_path / "t"))
    assert result.exit_code == 0, result.output
    text = (tmp_path / "t" / "k8s" / "tune-job.yaml").read_text()
    assert schema_problems(text) == [], f"against Kubernetes {KUBERNETES_VERSION}"
    job = yaml.safe_load(text)
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    spec = job["spec"]["template"]["spec"]
    assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == \
        "kubernetes.io/hostname"
    container = spec["containers"][0]
    assert container["args"][container["args"].index("--storage") + 1] == "journal"
    assert "$(WORKER_INDEX)" in container["args"]
    broken = text.replace("completionMode", "completionMod")
    assert schema_problems(broken) == ["document 0 (Job): spec: Additional properties are not allowed "
                                       "('completionMod' was unexpected)"]
