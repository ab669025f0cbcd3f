"""Small wording cases a user met (issue 25, item 26): each a table of what optkit says."""

from __future__ import annotations

import pytest

from optkit.resolve.resolver import _signed_ms


@pytest.mark.parametrize("ms, text", [
    (0.0, "no change"), (-0.0, "no change"), (0.0001, "−0.0001 ms"), (1.234, "−1.23 ms"),
    (-0.5, "+0.5 ms"),
], ids=["zero", "negative-zero", "small", "saved", "added"])
def test_a_tpot_change_is_signed_and_never_minus_zero(ms, text):
    assert _signed_ms(ms) == text


def test_a_choice_no_rule_made_names_its_default_once():
    from optkit.resolve.choices import Chosen

    text = Chosen("flashcomm1", False, "", "why", "the default false").text()
    assert text == "flashcomm1 = false (no rule applies; the default false; --flashcomm1 / --no-flashcomm1 fixes it): why"


@pytest.mark.parametrize("slo, words", [
    ("", "Objective: throughput with no SLO given ("), ("tpot_p99<=40ms", "Objective: throughput under SLO tpot_p99<=40ms ("),
], ids=["no-slo", "slo"])
def test_the_objective_line_says_when_no_slo_is_given(slo, words):
    from click.testing import CliRunner

    from optkit.cli.main import cli

    args = ["plan", "qwen3.6-35b", "--goal", "throughput", "--concurrency", "64"] + (["--slo", slo] if slo else [])
    out = CliRunner().invoke(cli, args).output
    assert words in " ".join(out.split()) and "SLO none given" not in out
