"""Cross-command invariant 2(d) of issue 25: ``optkit profile DIR --model …`` and ``optkit plan … --profile DIR``
agree for the same request: each recipe the capture ranks has the plan's status, and the capture's saving
per decode step is the plan's TPOT saving at the capture's load, with the same basis.

Requests are generated (hypothesis, derandomized, few examples: each one plans twice); the captures are
the committed fixtures of tests/profile (tests/profile/make_fixture.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from optkit.cli.main import cli

FIXTURES = Path(__file__).resolve().parent / "profile" / "fixtures"
CAPTURES = ["one-rank", "stalling-copies", "result-copy"]
compared: list[int] = []  # rankings compared (a run where every request is refused would prove nothing)


@st.composite
def requests(draw):
    args = ["--target", draw(st.sampled_from(["910c", "910b"])),
            "--vllm-ascend-version", draw(st.sampled_from(["0.23.0", "0.30.0rc2"])),
            "--goal", draw(st.sampled_from(["latency", "throughput"]))]
    at = None  # the defaults of both commands: plan's concurrencies, the capture taken at c1
    if draw(st.booleans()):
        concurrencies = sorted(draw(st.sets(st.sampled_from([1, 2, 4, 8, 16, 64]), min_size=1, max_size=3)))
        args += ["--concurrency", ",".join(map(str, concurrencies))]
        at = draw(st.sampled_from(concurrencies))
    if draw(st.booleans()):
        args.append("--mtp")
    model = draw(st.sampled_from(["qwen3.5-35b", "qwen3.6-35b", "qwen3.5-27b"]))
    return model, args, at, draw(st.sampled_from(CAPTURES))


def _run(args: list) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@settings(max_examples=6, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_profile_and_plan_profile_agree(request):
    model, args, at, capture = request
    directory = FIXTURES / capture
    load = [] if at is None else ["--profile-at", at]
    code, profiled = _run(["profile", directory, "--model", model, *args, *load, "--json"])
    plan_code, planned = _run(["plan", model, *args, "--profile", directory, *load, "--json"])
    assert code == plan_code, (profiled, planned)
    if code:
        assert profiled.strip().splitlines()[-1] == planned.strip().splitlines()[-1]  # the same refusal
        return
    profile, plan = json.loads(profiled), json.loads(planned)
    at = at or 1
    assert profile["concurrency"] == at
    compared.append(len(profile["ranking"]))
    for row in profile["ranking"]:
        decision = plan["decisions"][row["recipe"]]
        assert row["status"] == decision["status"], row["recipe"]
        if row["signatures"] and row["basis"].startswith("from your profile"):
            basis = decision.get("basis", {}).get(f"c{at}")
            if basis is not None and basis.startswith("from your profile"):  # not a record measured on an NPU
                assert basis == row["basis"]
                assert decision["expected_tpot_saving_ms"][f"c{at}"] == pytest.approx(row["saving_us_per_step"] / 1000)


def test_the_generated_requests_compare_rankings():
    compared.clear()
    test_profile_and_plan_profile_agree()
    assert sum(compared) >= 5, compared
