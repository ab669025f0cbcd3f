"""The objective (--slo, --goal) and the throughput recipes: the goal's default, the scheduling values
against upstream's tutorial rules, the capture range for the load (the article's 49 → 70 case), gains not
carried up under the throughput goal, and the paired vLLM parsers taking the bundles."""

from __future__ import annotations

import json
import shlex
from math import ceil, lcm
from pathlib import Path

import pytest
from click.testing import CliRunner

from argv_support import flag_value
from optkit.bundle.writer import bundle_files
from optkit.cli.main import cli
from optkit.errors import RequestError
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request
from vllm_support import paired_python

THROUGHPUT = ("sched-capacity-for-load", "cudagraph-capture-sizes-for-load")
TUTORIAL_HIGH_THROUGHPUT_TOKENS = 8192  # Qwen3.6-35B-A3B.md, High throughput row (0.23.0:366, 0.30.0rc2:349)
TUTORIAL_LOW_LATENCY_TOKENS = (1024, 4096)  # the Low latency row: "1024 to 4096"


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _plan(workspace, **fields):
    return plan(parse_request({"model": "qwen3.5-35b", "target": "910c", **fields}), workspace)


def _lock(workspace, **fields) -> dict:
    return json.loads(bundle_files(_plan(workspace, **fields), workspace)["optkit.lock.json"])


# --------------------------------------------------------------------------- the goal and the SLO


@pytest.mark.parametrize("fields, goal", [
    ({}, "latency"),
    ({"concurrency": [1, 4, 8]}, "latency"),
    ({"concurrency": 8}, "latency"),
    ({"concurrency": 9}, "throughput"),
    ({"concurrency": [1, 64]}, "throughput"),
    ({"concurrency": 64, "goal": "latency"}, "latency"),
    ({"concurrency": 1, "goal": "throughput"}, "throughput"),
], ids=["default", "article", "c8", "c9", "c1-and-c64", "asked-latency", "asked-throughput"])
def test_the_goal_defaults_to_latency_up_to_c8(fields, goal):
    assert parse_request(fields).objective_goal == goal


def test_the_slo_is_kept_in_its_canonical_text_and_its_bounds_are_facts(workspace):
    result = _plan(workspace, concurrency=64, slo="TTFT_p99 < 1s, tpot_p99<=25ms, tpot_mean<=20ms")
    assert result.request.slo == "ttft_p99<=1s,tpot_mean<=20ms,tpot_p99<=25ms"
    facts = result.facts
    assert (facts["objective.goal"], facts["objective.tpot_limit_ms"], facts["objective.ttft_limit_ms"]) == \
        ("throughput", 20.0, 1000.0)
    assert _plan(workspace).facts["objective.slo"] == "" and _plan(workspace).facts["objective.tpot_limit_ms"] == 0.0


def test_a_bad_slo_flag_is_a_usage_error_naming_the_flag():
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--slo", "tpot_p99<=20"])
    assert result.exit_code == 2
    assert "Invalid value for '--slo': term 1 'tpot_p99<=20' is not <metric>_<stat><=<value><unit>; add a unit" \
        in result.output


def test_a_bad_slo_in_a_request_file_names_file_line_and_field(tmp_path):
    path = tmp_path / "request.yaml"
    path.write_text("model: qwen3.5-35b\nconcurrency: 64\nslo: 'tpot_p99>=20ms'\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["plan", "--request", str(path)])
    assert result.exit_code == 1
    assert f"{path}:3: slo: " in result.output and "use <=" in result.output


def test_the_latency_goal_keeps_todays_plan(workspace):
    """Today's requests (c <= 8, and any request asking for latency) select no throughput recipe and derive nothing."""
    for fields in ({"mtp": True}, {"concurrency": 64, "goal": "latency"}):
        result = _plan(workspace, **fields)
        assert not set(THROUGHPUT) & set(result.selected) and result.derivations == []
        assert result.resolution.decisions["sched-capacity-for-load"].status.value == "no-effect"
    assert "cudagraph-capture-sizes-spec-aware" in _plan(workspace, mtp=True).selected


# --------------------------------------------------------------------------- the tutorials' rules

GRID = [dict(version=v, dp=dp, mtp=mtp, flashcomm1=fc, slo=slo)
        for v in ("0.23.0", "0.30.0rc2") for dp in (1, 4) for mtp in (False, True) for fc in (False, True)
        for slo in (None, "tpot_p99<=25ms")]


@pytest.mark.parametrize("case", GRID, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_throughput_bundles_follow_the_tutorials_rules(workspace, case):
    c = 64
    fields = {"concurrency": c, "goal": "throughput", "dp": case["dp"], "mtp": case["mtp"],
              "flashcomm1": case["flashcomm1"], "vllm_ascend_version": case["version"]}
    if case["slo"]:
        fields["slo"] = case["slo"]
    lock = _lock(workspace, **fields)
    argv, tp, dp = lock["launch"]["argv"], 2, case["dp"]
    k = 4 if case["mtp"] else 0
    seqs, tokens = int(flag_value(argv, "--max-num-seqs")), int(flag_value(argv, "--max-num-batched-tokens"))
    # "set --max-num-seqs * --data-parallel-size greater than or equal to the test concurrency", no more than needed
    assert seqs * dp >= c and (seqs - 1) * dp < c
    assert int(flag_value(argv, "--data-parallel-size") or 1) == dp
    # a whole decode batch fits one step; 8192 for throughput (the tutorial's row), the low-latency range's top with a TPOT bound
    assert tokens >= seqs * (1 + k)
    wanted = TUTORIAL_LOW_LATENCY_TOKENS[1] if case["slo"] else TUTORIAL_HIGH_THROUGHPUT_TOKENS
    assert tokens == max(wanted, seqs * (1 + k))
    if case["flashcomm1"]:  # vllm-ascend: "the max_num_batched_tokens should be divisible by tp_size"
        assert tokens % tp == 0
    assert "--enable-chunked-prefill" in argv
    # capture sizes: the load's decode batch sizes, each a whole number of requests × (1 + k), up to the load
    compilation = json.loads(flag_value(argv, "--compilation-config"))
    sizes = compilation["cudagraph_capture_sizes"]
    assert compilation["cudagraph_mode"] == "FULL_DECODE_ONLY"
    assert sizes == sorted(set(sizes)) and len(sizes) <= 32
    step = lcm(tp, 1 + k) if case["flashcomm1"] else 1 + k  # the smallest step every size is a multiple of
    rows = ceil(c / dp) * (1 + k)  # the decode rows of the full load per DP rank
    assert rows <= sizes[-1] < rows + step and sizes[0] == step
    assert all(s % (1 + k) == 0 for s in sizes)  # vLLM rounds sizes to multiples of 1 + k under spec decode
    if case["flashcomm1"]:  # "With sequence parallelism / FlashComm1, use capture sizes that are multiples of TP size"
        assert all(s % tp == 0 for s in sizes)
    assert {d["set"] for d in lock["launch"]["derived"]} == {
        "serve:--max-num-seqs", "serve:--max-num-batched-tokens", "compilation_config:cudagraph_capture_sizes"}


@pytest.mark.parametrize("c, k, sizes", [
    (7, 6, [7, 14, 28, 49]),
    (10, 6, [7, 14, 28, 56, 70]),
], ids=["c7-stops-at-49", "c10-reaches-70"])
def test_the_articles_49_to_70_case(workspace, c, k, sizes):
    """49 = 7 × 7 and 70 = 10 × 7 (1 + k = 7, the seed map's inference: the article gives no k): a range that stops at 49 holds c7's steps, not c10's (the
    article's c10 ran 173 → 477 tok/s once the range reached 70). Without sequence parallelism, as the article's sizes are not
    multiples of TP (the throughput goal would otherwise choose FlashComm1: tests/test_choices.py)."""
    result = _plan(workspace, concurrency=c, goal="throughput", mtp=True, num_speculative_tokens=k, flashcomm1=False)
    assert result.compilation_config["cudagraph_capture_sizes"] == sizes
    assert result.facts["workload.decode_rows_max"] == sizes[-1]


def test_batched_tokens_are_a_multiple_of_tp_under_flashcomm1(workspace):
    argv = _lock(workspace, concurrency=8193, goal="throughput", flashcomm1=True)["launch"]["argv"]
    assert (flag_value(argv, "--max-num-seqs"), flag_value(argv, "--max-num-batched-tokens")) == ("8193", "8194")


def test_the_capture_range_is_bounded_at_large_loads(workspace):
    sizes = _plan(workspace, concurrency=1024, goal="throughput", mtp=True, num_speculative_tokens=3
                  ).compilation_config["cudagraph_capture_sizes"]
    assert len(sizes) == 32 and sizes[0] == 4 and sizes[-1] == 4096


def test_explain_says_why_each_scheduling_value_was_chosen():
    result = CliRunner().invoke(cli, ["explain", "sched-capacity-for-load", "qwen3.5-35b", "--concurrency", "64",
                                      "--dp", "4", "--slo", "tpot_p99<=25ms", "--vllm-ascend-version", "0.30.0rc2"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "sets --max-num-seqs = 16 (sched-capacity-for-load): ceil_div(workload.concurrency_max = 64, " \
           "parallel.dp = 4) = 16" in text
    assert "because max-num-seqs × DP ≥ the concurrency (upstream's rule)" in text
    assert "(a rule, unquantified: no measured number for this value)" in text
    assert "upstream 0.30.0rc2: docs/source/tutorials/models/Qwen3.6-35B-A3B.md:215 — max-num-seqs × DP ≥ the " \
           "concurrency" in text


# --------------------------------------------------------------------------- the objective's numbers


def test_gains_are_not_carried_up_under_the_throughput_goal_but_regressions_are(workspace):
    latency = _plan(workspace, concurrency=64, goal="latency").resolution.decisions
    throughput = _plan(workspace, concurrency=64, goal="throughput", flashcomm1=False).resolution.decisions
    rid = "moe-skip-dispatch-combine-events"  # the article measured it at c1 (it needs the overlap FlashComm1 turns off)
    assert latency[rid].benefit.basis[64] == "extrapolated from c1"
    assert throughput[rid].benefit.per_concurrency[64] is None
    assert throughput[rid].benefit.basis[64] == "unquantified under the throughput goal (extrapolated from c1 only)"
    assert throughput[rid].status.value == "selected"
    assert throughput["gdn-l2norm-fused-recurrent-kernel"].status.value == "regresses"


def test_low_concurrency_recipes_drop_out_at_large_batches(workspace):
    """The M <= 40 fused op and the < 80-token CPU fast path gate themselves on the load's decode rows."""
    decisions = _plan(workspace, concurrency=64, goal="throughput", mtp=True, async_scheduling=False
                      ).resolution.decisions
    assert decisions["op-matmul-allreduce-add-rmsnorm-910c"].status.value == "excluded"
    assert decisions["blocktable-slot-mapping-cpu-fastpath"].status.value == "no-effect"
    small = _plan(workspace, concurrency=4, goal="throughput", mtp=True, async_scheduling=False).resolution.decisions
    assert small["blocktable-slot-mapping-cpu-fastpath"].status.value == "selected"


def test_upstreams_mtp_advice_is_a_risk_by_architecture_under_the_throughput_goal(workspace):
    from optkit.catalog.conditions import compiled

    recipe = workspace.catalog["mtp-enable-k4"]
    risk = next(r for r in recipe.risks if "below two concurrent requests" in r.text)
    assert "model.id" not in risk.when and "model.family" not in risk.when
    holds = lambda **f: compiled(risk.when).evaluate(_plan(workspace, mtp=True, **f).facts.values)  # noqa: E731
    assert holds(concurrency=64) and not holds(concurrency=[1, 4, 8]) and not holds(concurrency=64, goal="latency")
    assert not holds(concurrency=64, model="qwen3.6-27b")  # dense: the advice is the MoE tutorial's


def test_upstreams_k1_advice_is_a_documented_disagreement_shown_where_k_differs(workspace):
    from optkit.catalog.conditions import compiled

    recipe = workspace.catalog["mtp-enable-k4"]
    risk = next(r for r in recipe.risks if "num_speculative_tokens 1" in r.text)
    assert "documented disagreement" in risk.text
    holds = lambda **f: compiled(risk.when).evaluate(_plan(workspace, mtp=True, **f).facts.values)  # noqa: E731
    assert holds() and holds(model="qwen3.6-35b") and not holds(num_speculative_tokens=1)
    assert not holds(model="qwen3.6-27b")  # the dense architecture's tutorial gives no such advice
    cited = {t.release for t in recipe.tutorials if t.supports.startswith("k = 1")}
    assert {"0.23.0", "0.30.0rc2"} <= cited
    readme = bundle_files(_plan(workspace, mtp=True), workspace)["README.md"].decode()
    assert "We recommend setting num_speculative_tokens to 1" in readme


def test_a_plan_stays_deterministic(workspace):
    fields = dict(concurrency=64, goal="throughput", dp=4, mtp=True, slo="tpot_p99<=25ms")
    assert bundle_files(_plan(workspace, **fields), workspace) == bundle_files(_plan(workspace, **fields), workspace)


# --------------------------------------------------------------------------- the paired vLLM parsers


@pytest.mark.vllm
@pytest.mark.parametrize("version, vllm", [("0.23.0", "0.23.0"), ("0.30.0rc2", "0.30.0")])
@pytest.mark.parametrize("dp", [1, 4])
def test_the_paired_vllm_parses_every_throughput_argv(workspace, version, vllm, dp):
    from optkit.bundle.check import check_vllm
    python = paired_python(vllm)
    lock = _lock(workspace, concurrency=64, slo="tpot_p99<=25ms", goal="throughput", dp=dp, mtp=True,
                 vllm_ascend_version=version)
    check = check_vllm(lock, python=python)
    assert check.status == "pass", (check.problems, check.note, shlex.join(lock["launch"]["argv"]))
    assert check.note.startswith(f"vLLM {vllm};")


# --------------------------------------------------------------------------- by architecture, and reproducible

HF = Path(__file__).resolve().parent / "fixtures" / "hf"


def test_a_user_checkpoint_of_the_architecture_gets_the_same_rules(workspace):
    """Nothing keys on a model name: a config.json of the Qwen3.5/3.6 MoE architecture plans like the profile."""
    fields = dict(concurrency=64, goal="throughput", mtp=True, dp=4)
    mine = plan(parse_request({"model_config": str(HF / "qwen3_5_moe"), "model_id": "me/my-moe", **fields}), workspace)
    ours = _plan(workspace, **fields)
    assert [(d.target, d.value) for d in mine.derivations] == [(d.target, d.value) for d in ours.derivations]
    risk = next(r for r in workspace.catalog["mtp-enable-k4"].risks if "below two concurrent" in r.text)
    from optkit.catalog.conditions import compiled

    assert compiled(risk.when).evaluate(mine.facts.values)


def test_a_throughput_bundle_replans_from_its_lock_byte_for_byte(tmp_path):
    runner = CliRunner()
    first = runner.invoke(cli, ["plan", "qwen3.5-35b", "--concurrency", "64", "--slo", "tpot_p99<=25ms", "--dp", "4",
                                "--mtp", "-o", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    again = runner.invoke(cli, ["plan", "--from-lock", str(tmp_path / "a" / "optkit.lock.json"), "-o", str(tmp_path / "b")])
    assert again.exit_code == 0, again.output
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)


@pytest.mark.parametrize("fields, advice", [
    (dict(concurrency=64), {"local DP groups", "prefix caching"}),
    (dict(concurrency=64, dp=4, prefix_caching=True, flashcomm1=True), set()),
    (dict(concurrency=64, model="qwen3.6-27b"), {"prefix caching"}),  # dense: no DP-attention advice
    (dict(concurrency=64, dp=8), {"prefix caching"}),
    (dict(concurrency=64, dp="auto"), {"prefix caching"}),  # the load's DP: 2 groups of 32
], ids=["dp1-moe", "as-upstream", "dense", "dp8", "dp-auto"])
def test_the_throughput_rows_advice_holds_where_the_plan_differs_from_them(workspace, fields, advice):
    from optkit.catalog.conditions import compiled

    facts = _plan(workspace, goal="throughput", **fields).facts.values
    risks = [r for r in workspace.catalog["sched-capacity-for-load"].risks if r.text.startswith("Advice")]
    found = {topic for r in risks if compiled(r.when).evaluate(facts)
             for topic in ("local DP groups", "prefix caching") if topic in r.text}
    assert found == advice


def test_explain_json_carries_the_derived_values():
    result = CliRunner().invoke(cli, ["explain", "sched-capacity-for-load", "qwen3.5-35b", "--concurrency", "64", "--json"])
    assert result.exit_code == 0, result.output
    derived = json.loads(result.output)["sched-capacity-for-load"]["derived"]
    assert [(d["set"], d["value"], d["basis"]) for d in derived] == [
        ("serve:--max-num-seqs", 64, "rule"), ("serve:--max-num-batched-tokens", 8192, "rule")]


# --------------------------------------------------------------------------- honest objectives (issue 25 item 4)


@pytest.mark.parametrize("fields, checks", [
    (dict(slo="tpot_p99<=1ms"), [("tpot_p99<=1ms", "infeasible", 6.338)]),
    (dict(slo="tpot_p99<=1ms", mtp=True), [("tpot_p99<=1ms", "infeasible", 4.572)]),
    (dict(slo="tpot_mean<=20ms,ttft_p99<=1s"), [("ttft_p99<=1s", "no-estimate", None),
                                                ("tpot_mean<=20ms", "within-estimate", -12.662)]),
    (dict(slo="tpot_p10<=1ms"), [("tpot_p10<=1ms", "no-estimate", None)]),
    (dict(slo="tpot_p99<=1ms", model="qwen3.6-27b"), [("tpot_p99<=1ms", "no-estimate", None)]),  # no baseline
    (dict(), []),
], ids=["p99-below-estimate", "p99-below-mtp-estimate", "mean-and-ttft", "low-percentile", "no-estimate", "no-slo"])
def test_an_slo_is_held_against_the_plans_own_estimate(workspace, fields, checks):
    result = _plan(workspace, **fields)
    assert [(c.bound, c.verdict, c.margin_ms) for c in result.slo_checks] == checks
    out = CliRunner().invoke(cli, ["plan", fields.get("model", "qwen3.5-35b"), "--target", "910c", "--json",
                                   *(["--slo", fields["slo"]] if "slo" in fields else []),
                                   *(["--mtp"] if fields.get("mtp") else [])])
    assert out.exit_code == 0, out.output
    assert [(c["bound"], c["verdict"]) for c in json.loads(out.output)["slo_checks"]] == [c[:2] for c in checks]


def test_the_plan_table_says_an_slo_is_infeasible_with_its_margin():
    out = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--target", "910c", "--slo", "tpot_p99<=1ms"])
    assert out.exit_code == 0, out.output
    assert "SLO check: tpot_p99<=1ms: infeasible by the plan's own estimate" in " ".join(out.output.split())
    assert "6.34 ms over the bound" in " ".join(out.output.split())


@pytest.mark.parametrize("fields, refused", [
    (dict(goal="latency", concurrency=512, mtp=True), r"--goal latency at concurrency 512: a decode step of c512 × "
                                                       r"\(1 \+ k = 5\) = 2560 tokens is above 512.*--goal throughput"),
    (dict(goal="latency", concurrency=1024), r"--goal latency at concurrency 1024: a decode step of c1024: 1024 "
                                             r"tokens"),
    (dict(goal="latency", concurrency=102, mtp=True), None),  # 510 tokens: within vLLM's capture range
    (dict(goal="throughput", concurrency=512, mtp=True), None),  # the throughput goal sizes the load
], ids=["latency-c512-mtp", "latency-c1024", "latency-c102-mtp", "throughput-c512-mtp"])
def test_the_latency_goal_refuses_a_load_its_shapes_cannot_serve(workspace, fields, refused):
    if refused is None:
        _plan(workspace, **fields)
    else:
        with pytest.raises(RequestError, match=refused):
            _plan(workspace, **fields)
