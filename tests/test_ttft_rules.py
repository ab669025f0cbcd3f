"""The TTFT bound read by rules (sched-capacity-for-load): a TTFT bound alone sizes --max-num-batched-tokens to
prefill the longest input in one step beside the full decode batch (8192 to 16384); with a TPOT bound too the
TPOT value holds and the trade is a risk; past what a step holds, a risk says the TTFT bound is unquantified."""

from __future__ import annotations

import json

import pytest

from optkit.bundle.writer import bundle_files
from optkit.catalog.conditions import compiled
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request

LONG_CONTEXT_TOKENS = 16384  # Qwen3.6-35B-A3B.md, Long context row (0.23.0:365, 0.30.0rc2:348)


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _plan(workspace, **fields):
    return plan(parse_request({"model": "qwen3.5-35b", "target": "910c", "concurrency": 64, "goal": "throughput",
                               **fields}), workspace)


def _tokens(workspace, **fields) -> int:
    argv = json.loads(bundle_files(_plan(workspace, **fields), workspace)["optkit.lock.json"])["launch"]["argv"]
    return int(argv[argv.index("--max-num-batched-tokens") + 1])


def _risks(workspace, **fields) -> list[str]:
    result = _plan(workspace, **fields)
    recipe = workspace.catalog["sched-capacity-for-load"]
    return [r.text for r in recipe.risks if r.when and "ttft" in r.when and compiled(r.when).evaluate(result.facts.values)]


@pytest.mark.parametrize("fields, tokens", [
    ({"slo": "ttft_p99<=1s"}, 8192),                                           # 1024 + 64 rows fit 8192
    ({"slo": "ttft_p99<=1s", "input_len": 12000}, 12000 + 64),                 # one step for the longest prompt
    ({"slo": "ttft_p99<=1s", "input_len": 12000, "mtp": True}, 12000 + 64 * 5),
    ({"slo": "ttft_p99<=1s", "input_len": 12000, "dp": 4}, 12000 + 16),        # the decode batch of one DP group
    ({"slo": "ttft_p99<=1s", "input_len": 12001, "flashcomm1": True}, 12066),  # a multiple of TP under FlashComm1
    ({"slo": "ttft_p99<=1s", "input_len": 32768}, LONG_CONTEXT_TOKENS),        # capped at the long-context row
    ({"slo": "ttft_p99<=1s", "length_mix": "1024:256:0.7,12000:512:0.3"}, 12064),  # the mix's longest input
    ({"slo": "ttft_p99<=1s,tpot_p99<=25ms", "input_len": 12000}, 4096),        # both bounded: TPOT's value holds
    ({"slo": "tpot_p99<=25ms", "input_len": 12000}, 4096),                     # today's TPOT rule, unchanged
    ({"input_len": 12000}, 8192),                                              # no TTFT bound: today's 8192
], ids=["short-prompt", "long-prompt", "mtp", "dp4", "flashcomm1", "past-the-cap", "mix", "both", "tpot-only", "no-slo"])
def test_the_batched_tokens_follow_the_ttft_bound(workspace, fields, tokens):
    assert _tokens(workspace, **fields) == tokens


@pytest.mark.parametrize("fields, says", [
    ({"slo": "ttft_p99<=1s"}, []),
    ({"slo": "ttft_p99<=1s", "input_len": 16000}, []),
    ({"slo": "ttft_p99<=1s", "input_len": 16384}, ["exceeds 16384 batched tokens"]),
    ({"slo": "ttft_p99<=1s", "length_mix": "1024:256,32768:64"}, ["exceeds 16384 batched tokens"]),
    ({"slo": "ttft_p99<=1s,tpot_p99<=25ms"}, []),
    ({"slo": "ttft_p99<=1s,tpot_p99<=25ms", "input_len": 4096}, ["trades one against the other"]),
    ({"input_len": 32768}, []),
    ({"slo": "tpot_p99<=25ms", "input_len": 32768}, []),
], ids=["fits", "fits-below-the-cap", "past-the-cap", "mix-past-the-cap", "both-fit", "both-trade",
        "no-ttft-bound", "tpot-only"])
def test_a_risk_says_when_the_ttft_bound_rests_on_more_than_one_prefill_step(workspace, fields, says):
    risks = _risks(workspace, **fields)
    assert len(risks) == len(says) and all(s in r for s, r in zip(says, risks))
    assert all("unquantified" in r for r in risks)


def test_explain_shows_the_ttft_rule_and_only_the_risks_that_hold():
    from click.testing import CliRunner

    from optkit.cli.main import cli

    args = ["explain", "sched-capacity-for-load", "qwen3.5-35b", "--concurrency", "64", "--goal", "throughput",
            "--dp", "4", "--vllm-ascend-version", "0.30.0rc2"]
    long = CliRunner().invoke(cli, [*args, "--slo", "ttft_p99<=1s", "--input-len", "12000"])
    assert long.exit_code == 0, long.output
    text = " ".join(long.output.split())
    assert "sets --max-num-batched-tokens = 12016" in text
    assert "min(workload.prefill_step_tokens_max = 12016, 16384)" in text
    assert "Qwen3.5-27B-Qwen3.6-27B.md:307 — an input longer than the budget prefills in rounds" in text
    assert "Qwen3.6-35B-A3B.md:348 — long context: 16384 batched tokens" in text
    assert "risk (medium): The SLO bounds TTFT" not in text
    assert "this plan runs one DP group" not in text  # the dp == 1 advice does not hold at --dp 4
    both = CliRunner().invoke(cli, [*args, "--slo", "ttft_p99<=1s,tpot_p99<=25ms", "--input-len", "8192"])
    assert "risk (medium): The SLO bounds TTFT and TPOT, and --max-num-batched-tokens trades one against the other" \
        in " ".join(both.output.split())
