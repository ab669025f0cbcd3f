"""The SLO grammar (optkit.resolve.slo): canonical text, bounds, checks against bench results, errors."""

import pytest

from optkit.resolve.slo import Bound, SloError, parse_slo


def test_canonical_text_round_trips_and_orders():
    slo = parse_slo("TTFT_p99 <= 1s, tpot_p99<20ms, tpot_mean<=15ms, itl_p50<=500us")
    assert slo.text() == "ttft_p99<=1s,tpot_mean<=15ms,tpot_p99<=20ms,itl_p50<=500us"
    assert parse_slo(slo.text()) == slo
    assert slo.bound("ttft") == Bound("ttft", "p99", 1000.0)
    assert slo.bound("tpot").limit_ms == 15.0          # the tightest bound on a metric
    assert slo.bound("tpot", "p99").limit_ms == 20.0
    assert slo.bound("e2el") is None


def test_result_keys_percentiles_and_goodput():
    slo = parse_slo("tpot_p99<=20ms,ttft_median<=300ms,e2el_p99.9<=30s")
    assert [b.result_key for b in slo.bounds] == ["median_ttft_ms", "p99_tpot_ms", "p99.9_e2el_ms"]
    assert slo.percentiles() == ["50", "99", "99.9"]
    assert slo.goodput_args() == ["ttft:300", "tpot:20", "e2el:30000"]


def test_violations_name_the_bound_and_the_measurement():
    slo = parse_slo("tpot_p99<=20ms,ttft_p99<=1s")
    assert slo.met_by({"p99_tpot_ms": 20.0, "p99_ttft_ms": 999.0})
    assert slo.violations({"p99_tpot_ms": 20.5, "p99_ttft_ms": 10}) == ["tpot_p99<=20ms: measured 20.5ms"]
    assert slo.violations({"p99_tpot_ms": True}) == [   # a bool is no measurement
        "ttft_p99<=1s: the result has no p99_ttft_ms", "tpot_p99<=20ms: the result has no p99_tpot_ms"]


@pytest.mark.parametrize("text, words", [
    ("", "empty SLO"),
    ("tpot_p99<=20ms,", "term 2 is empty"),
    ("tpot_p99<=20", "add a unit"),
    ("tpot_p99>=20ms", "use <="),
    ("tpot<=20ms", "name a statistic"),
    ("tbt_p99<=20ms", "unknown metric 'tbt'"),
    ("tpot_p100<=20ms", "not between 0 and 100"),
    ("tpot_p99<=0ms", "above zero"),
    ("tpot_p99<=20ms,tpot_p99<=25ms", "bounded twice"),
    ("tpot_p50<=20ms,tpot_median<=25ms", "tpot_p50 is bounded twice (the median is p50)"),
    ("tpot_median<=20ms,tpot_p50<=25ms", "tpot_p50 is bounded twice (the median is p50)"),
    ("tpot_avg<=20ms", "write mean for the average (e.g. 'tpot_mean<=20ms')"),
    ("ttft_average<=1s", "write mean for the average (e.g. 'ttft_mean<=20ms')"),
    (",".join(f"tpot_p{n}<=1ms" for n in range(1, 18)), "at most 16"),
])
def test_bad_slo_names_the_flag_and_the_fix(text, words):
    with pytest.raises(SloError) as err:
        parse_slo(text, where="request.yaml:3: slo")
    assert str(err.value).startswith("request.yaml:3: slo: ")
    assert words in str(err.value)


def test_not_a_text():
    with pytest.raises(SloError, match="--slo: an SLO is a text"):
        parse_slo(20)
