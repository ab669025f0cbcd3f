"""``--set``: a request's launch values over the rules (optkit.resolve.overrides), decided once and shown everywhere."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli
from optkit.errors import RequestError
from optkit.resolve.overrides import canonical_set, parse_set
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request

LOAD = {"model": "qwen3.5-35b", "concurrency": [64], "goal": "throughput"}


@pytest.fixture(scope="module")
def ws():
    return load_workspace()


def _serve(result, flag):
    return next(s.key.split()[1] for s in result.serve_args if s.key.split()[0] == flag)


def test_canonical_text_is_sorted_and_checked():
    assert canonical_set("max-num-seqs=48, capture-up-to=16") == "capture-up-to=16,max-num-seqs=48"
    assert canonical_set(["max-num-seqs=48", "max-num-batched-tokens=8192"]) == \
        "max-num-batched-tokens=8192,max-num-seqs=48"
    assert canonical_set({"max-num-seqs": 8}) == "max-num-seqs=8"
    assert parse_set("capture-up-to=16,max-num-seqs=48") == {"capture-up-to": 16, "max-num-seqs": 48}
    for bad, words in [("foo=1", "no knob"), ("max-num-seqs=0", "out of range"), ("max-num-seqs", "NAME=VALUE"),
                       ("max-num-seqs=x", "integer"), (["max-num-seqs=4", "max-num-seqs=8"], "twice"), (True, "expected")]:
        with pytest.raises(ValueError, match=words):
            canonical_set(bad)


def test_a_set_value_replaces_the_rule_in_every_view(ws):
    rule = plan(parse_request(LOAD), ws)
    assert _serve(rule, "--max-num-seqs") == "64"
    tuned = plan(parse_request({**LOAD, "set": "max-num-seqs=24,capture-up-to=16,max-num-batched-tokens=2048"}), ws)
    assert _serve(tuned, "--max-num-seqs") == "24"
    assert _serve(tuned, "--max-num-batched-tokens") == "2048"
    assert max(tuned.compilation_config["cudagraph_capture_sizes"]) == 16
    by_target = {d.target: d for d in tuned.derivations}
    assert by_target["serve:--max-num-seqs"].basis == "set"
    assert "set by the request" in by_target["serve:--max-num-seqs"].how
    # the fit reads the same value the argv carries
    assert "24 × 1536" in tuned.fit.line() and "64 × 1536" in rule.fit.line()
    # the lock keeps the request as given, so the set values replay
    from optkit.bundle.writer import bundle_files

    lock = json.loads(bundle_files(tuned, ws)["optkit.lock.json"])
    assert lock["request"]["set"] == "capture-up-to=16,max-num-batched-tokens=2048,max-num-seqs=24"
    assert "--max-num-seqs 24" in bundle_files(tuned, ws)["serve.sh"].decode()


def test_a_source_labels_the_values_measured(ws):
    tuned = plan(parse_request({**LOAD, "set": "max-num-seqs=24", "set_source": "measured on host-a by optkit tune"}), ws)
    d = next(d for d in tuned.derivations if d.target == "serve:--max-num-seqs")
    assert d.basis == "measured" and "measured on host-a" in d.how


def test_vllm_refusal_and_unused_values_are_refused(ws):
    with pytest.raises(RequestError, match="vLLM refuses to start"):
        plan(parse_request({**LOAD, "set": "max-num-seqs=400,max-num-batched-tokens=256"}), ws)
    # under the latency goal no recipe derives --max-num-seqs: a set value would be read by nothing
    with pytest.raises(RequestError, match="no selected recipe derives --max-num-seqs"):
        plan(parse_request({"model": "qwen3.5-35b", "concurrency": [1, 4], "set": "max-num-seqs=8"}), ws)


def test_the_flag_names_itself_when_refused():
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--set", "bogus=1"])
    assert result.exit_code == 2 and "--set" in result.output and "bogus" in result.output
    ok = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--concurrency", "64", "--set", "max-num-seqs=24", "--json"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.output)
    assert any(d["set"] == "serve:--max-num-seqs" and d["value"] == 24 and d["basis"] == "set"
               for d in data["launch"]["derived"])
