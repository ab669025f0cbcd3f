"""bench.sh's client: every run through one start of vLLM's client when ``PYTHON`` has vLLM (the
``vllm`` command's own ``console_scripts`` entry point, called once per run, so vLLM is imported once
per bench.sh instead of once per concurrency), else ``vllm bench serve`` per run; the same argv
either way. A stand-in ``vllm`` distribution (its metadata and entry point, in a folder on
PYTHONPATH) and a stand-in ``vllm`` command record what each path runs, so no vLLM is needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from optkit.bundle.writer import bundle_files
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WS = load_workspace()
REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4, 8], "input_len": 32, "output_len": 8}
ENTRY = """import json, os, sys
def main():
    with open(os.environ["RUNS_LOG"], "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "argv": sys.argv[1:]}) + "\\n")
    if os.environ.get("FAIL_AT") and os.environ["FAIL_AT"] in sys.argv:
        sys.exit(1)
"""
COMMAND = """#!/usr/bin/env bash
printf '%s\\n' "$(python3 -c 'import json, os, sys; print(json.dumps({"pid": os.getppid(), "argv": sys.argv[1:]}))' "$@")" >> "$RUNS_LOG"
case " $* " in *" ${FAIL_AT:-none} "*) exit 1 ;; esac
"""


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bench-client")
    (root / "bench.sh").write_bytes(bundle_files(plan(Request(**REQUEST), WS), WS)["bench.sh"])
    site = root / "site"  # a stand-in vllm distribution: metadata and the console_scripts entry point
    (site / "vllm-0.0.0.dist-info").mkdir(parents=True)
    (site / "vllm-0.0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.0\n")
    (site / "vllm-0.0.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nvllm = fake_vllm_cli:main\n")
    (site / "fake_vllm_cli.py").write_text(ENTRY)
    (root / "bin").mkdir()
    (root / "bin" / "vllm").write_text(COMMAND)
    (root / "bin" / "vllm").chmod(0o755)
    (root / "bin" / "python-without-vllm").write_text("#!/bin/sh\nexit 1\n")
    (root / "bin" / "python-without-vllm").chmod(0o755)
    return root


def run_bench(bench: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    log = tmp_path / "runs.jsonl"
    full = {"PATH": f"{bench / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": str(bench / "site"), "RUNS_LOG": str(log),
            "PYTHON": sys.executable, "MODEL": "m", "RESULT_DIR": str(bench / "results"), **env}
    proc = subprocess.run(["bash", str(bench / "bench.sh")], env=full, capture_output=True, text=True, timeout=120)
    return proc, [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []


def command_argvs(bench: Path, tmp_path: Path) -> list[list[str]]:
    (tmp_path / "command").mkdir()
    proc, runs = run_bench(bench, tmp_path / "command", BENCH_CLIENT="command")
    assert proc.returncode == 0, proc.stderr
    return [r["argv"][2:] for r in runs]  # after "bench serve"


def test_with_vllm_in_python_every_run_goes_through_one_client_start(bench, tmp_path):
    proc, runs = run_bench(bench, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(runs) == 3 and len({r["pid"] for r in runs}) == 1  # one process for c1, c4 and c8
    assert [r["argv"][:2] for r in runs] == [["bench", "serve"]] * 3
    assert [r["argv"][2:] for r in runs] == command_argvs(bench, tmp_path)  # the same argv as the command's
    assert [r["argv"][r["argv"].index("--max-concurrency") + 1] for r in runs] == ["1", "4", "8"]


@pytest.mark.parametrize("env", [{"BENCH_CLIENT": "command"}, {"PYTHON": "python-without-vllm"}],
                         ids=["asked-for", "no-vllm-in-python"])
def test_otherwise_vllm_bench_serve_runs_once_per_run(bench, tmp_path, env):
    proc, runs = run_bench(bench, tmp_path, **env)
    assert proc.returncode == 0, proc.stderr
    assert len(runs) == 3 and len({r["pid"] for r in runs}) == 3
    assert [r["argv"][:2] for r in runs] == [["bench", "serve"]] * 3
    argv = runs[1]["argv"]
    assert argv[argv.index("--num-prompts") + 1] == "40" and argv[argv.index("--result-filename") + 1] == "c4.json"


@pytest.mark.parametrize("client", ["auto", "command"])
def test_a_failed_run_stops_the_rest_and_fails_bench_sh(bench, tmp_path, client):
    proc, runs = run_bench(bench, tmp_path, FAIL_AT="c4.json", BENCH_CLIENT=client)
    assert proc.returncode != 0
    assert [r["argv"][r["argv"].index("--result-filename") + 1] for r in runs] == ["c1.json", "c4.json"]


def test_the_cost_settings_reach_every_run_in_one_client(bench, tmp_path):
    proc, runs = run_bench(bench, tmp_path, PROMPTS_PER_CONCURRENCY="2", MIN_PROMPTS="3", WARMUPS_PER_CONCURRENCY="0")
    assert proc.returncode == 0, proc.stderr
    sent = [(r["argv"][r["argv"].index("--num-prompts") + 1], r["argv"][r["argv"].index("--num-warmups") + 1])
            for r in runs]
    assert sent == [("3", "0"), ("8", "0"), ("16", "0")]


def test_an_unknown_client_is_refused_naming_the_variable(bench, tmp_path):
    proc, runs = run_bench(bench, tmp_path, BENCH_CLIENT="python")
    assert proc.returncode == 2 and runs == []
    assert "bench.sh: BENCH_CLIENT must be auto or command, got: python" in proc.stderr
