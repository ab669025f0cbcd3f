"""bench.sh measures the request's SLO (issue 25, finding 9): the SLO's own percentiles and vLLM's --goodput,
accepted by the paired vLLM's own ``vllm bench serve`` parser; the README states the SLO and expected.json's basis."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest

from optkit.bundle.writer import bundle_files
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request
from vllm_support import paired_python

WS = load_workspace()
BASE = {"model": "qwen3.6-35b-a3b", "target": "910c", "concurrency": [64]}


def _files(**fields) -> dict[str, str]:
    files = bundle_files(plan(parse_request({**BASE, **fields}), WS), WS)
    return {name: data.decode() for name, data in files.items() if name.endswith((".sh", ".md", ".json"))}


def _bench_words(bench: str) -> list[str]:
    """The words of bench.sh's ``queue`` call from --percentile-metrics on (the SLO's share of the argv)."""
    body = bench[bench.index("  queue --backend"):bench.index("\n}\n", bench.index("  queue --backend"))]
    words = shlex.split(body.replace("\\\n", " "))
    return words[words.index("--percentile-metrics"):words.index("--save-result")]


@pytest.mark.parametrize("slo, percentiles, goodput", [
    pytest.param(None, "50,90,99", None, id="no-slo"),
    pytest.param("ttft_p95<=1s,tpot_p99.9<=30ms", "50,90,95,99,99.9", ["ttft:1000", "tpot:30"], id="issue-example"),
    pytest.param("tpot_median<=20ms", "50,90,99", ["tpot:20"], id="median-is-p50"),
    pytest.param("itl_p99<=50ms", "50,90,99", None, id="itl-has-no-goodput"),
])
def test_bench_measures_the_slos_own_percentiles_and_goodput(slo, percentiles, goodput):
    words = _bench_words(_files(**({"slo": slo} if slo else {}))["bench.sh"])
    assert words[words.index("--metric-percentiles") + 1] == percentiles
    assert (words[words.index("--goodput") + 1:] if "--goodput" in words else None) == goodput


def test_the_paired_vllm_accepts_the_slo_arguments():
    python = paired_python("0.23.0")
    words = _bench_words(_files(slo="ttft_p95<=1s,tpot_p99.9<=30ms")["bench.sh"])
    code = ("import argparse, json, sys\n"
            "from vllm.benchmarks.serve import add_cli_args, check_goodput_args\n"
            "parser = argparse.ArgumentParser(); add_cli_args(parser)\n"
            "args = parser.parse_args(['--model', 'm', *sys.argv[1:]])\n"
            "print(json.dumps({'goodput': check_goodput_args(args),\n"
            "                  'percentiles': [float(p) for p in args.metric_percentiles.split(',')]}))\n")
    out = subprocess.run([python, "-c", code, *words], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    parsed = json.loads(out.stdout.strip().splitlines()[-1])
    assert parsed == {"goodput": {"ttft": 1000.0, "tpot": 30.0}, "percentiles": [50.0, 90.0, 95.0, 99.0, 99.9]}


def test_the_readme_states_the_slo_and_what_expected_json_is():
    files = _files(slo="ttft_p95<=1s,tpot_p99.9<=30ms")
    readme = files["README.md"]
    assert "SLO: `ttft_p95<=1s,tpot_p99.9<=30ms`" in readme
    assert "--goodput ttft:1000 tpot:30" in readme
    basis = json.loads(files["expected.json"])["basis"]
    assert "the article's" in basis and "not measurements of this request" in basis
    assert re.search(r"compare .*with the SLO", readme)


def test_without_an_slo_the_readme_says_so():
    assert "SLO: none given" in _files()["README.md"]


@pytest.mark.parametrize("fields, longest", [
    pytest.param({}, 1536, id="defaults-1024-in-512-out"),
    pytest.param({"input_len": 8000, "output_len": 2000}, 10000, id="lengths"),
    pytest.param({"length_mix": "1024:256:0.7,8192:512:0.3"}, 8704, id="a-mix's-longest"),
])
def test_the_readme_states_the_context_length(fields, longest):
    """Finding 24: --max-model-len is left to vLLM (the model's maximum), and the README says so with the
    request's longest request and the flag that caps it; serve.sh does not set it (a model without a tutorial page
    of its own: no page command carries one)."""
    files = _files(model="qwen3.5-35b-a3b", **fields)
    assert f"The longest request of this plan is {longest} tokens" in files["README.md"]
    assert f"`--max-model-len {longest}`" in files["README.md"]
    assert "--max-model-len" not in files["serve.sh"]


def test_the_readme_states_the_context_length_its_page_sets():
    """Where the model's own page's command carries --max-model-len (Qwen3.6-35B-A3B.md's single-node command,
    written for A2 and A3), serve.sh sets it and the README says the same value and where it comes from, not
    that it is unset."""
    files = _files()
    value = re.search(r"--max-model-len (\d+)", files["serve.sh"]).group(1)
    line = next(line for line in files["README.md"].splitlines() if line.startswith("Context length"))
    assert f"`--max-model-len {value}` (page:Qwen3.6-35B-A3B.md:" in line and "is not set" not in line
