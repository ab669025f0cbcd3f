"""Every view of a plan shows the plan's own values (issue 25, item 1 and invariant 2(a)).

A request is planned once; the table, ``plan --json``, ``optkit facts``, ``optkit explain`` and the bundle's files
(serve.sh, env.sh, the lock, README.md, expected.json) must then agree with it: a launch value, a recipe's status and
reason, an estimate and its basis are decided in the plan (``optkit.resolve.plan``) and never re-derived by a view.
The hand-picked cases are the findings; the property runs the same checks over generated requests (hypothesis).
"""

from __future__ import annotations

import json
import re
import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optkit.bundle.launch_check import env_sh_exports, serve_sh_argv
from optkit.bundle.writer import bundle_files
from optkit.cli.render import explain_report, plan_report
from optkit.cli.table import Table
from optkit.errors import OptkitError
from optkit.resolve.plan import load_workspace, plan, request_facts
from optkit.resolve.report import decision_data, facts_json, plan_data
from optkit.resolve.request import Request

MODELS = ["qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-397b-a17b", "qwen3.6-27b", "qwen3.6-35b-a3b"]
RELEASES = ["0.23.0", "0.27.1rc1", "0.30.0rc2"]  # the first, one between, the newest (versions/*.yaml: no tree)
NODE_FLAGS = {"--data-parallel-size-local", "--data-parallel-start-rank", "--data-parallel-address",
              "--data-parallel-rpc-port", "--distributed-executor-backend", "--nnodes", "--node-rank", "--master-addr",
              "--master-port"}  # this node's place in a multi-node layout (serve.sh's variables), not a plan's value
CONFIG_FLAGS = {"--compilation-config": "compilation_config", "--additional-config": "additional_config",
                "--speculative-config": "speculative_config"}


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _text(blocks) -> str:
    """A report's text blocks (its tables' rows as cells joined by ' | ')."""
    lines = []
    for block in blocks:
        if isinstance(block, Table):
            lines += [" | ".join(map(str, row)) for row in block.rows]
        else:
            lines.append(block)
    return "\n".join(lines)


def _flag_values(argv: list[str]) -> dict[str, str | None]:
    """``--flag value`` and bare ``--flag`` of a vllm serve argv (the model, a positional, skipped)."""
    out: dict[str, str | None] = {}
    for i, word in enumerate(argv):
        if word.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            out[word] = None if nxt is None or nxt.startswith("--") else nxt
    return out


def check_views_agree(result, workspace) -> None:
    """All views of one plan show the plan's values (raises AssertionError naming the view that does not)."""
    data = plan_data(result)
    facts = data["facts"]
    assert facts_json(request_facts(result.given, workspace)) == facts, "`optkit facts` differs from plan --json"
    files = {rel: body.decode("utf-8") for rel, body in bundle_files(result, workspace).items()
             if not rel.startswith("patches/")}
    lock, expected, readme = json.loads(files["optkit.lock.json"]), json.loads(files["expected.json"]), files["README.md"]

    # launch values: serve.sh's argv and env.sh's exports are the plan's
    argv = serve_sh_argv(files["serve.sh"], nodes=result.layout.nodes > 1)
    flags = _flag_values(argv)
    launch = data["launch"]
    for flag, key in CONFIG_FLAGS.items():
        shown = json.loads(flags[flag]) if flag in flags else {}
        assert shown == launch[key], f"serve.sh {flag} {shown} but plan --json launch.{key} {launch[key]}"
        assert lock["launch"][key] == launch[key], f"lock launch.{key} differs from plan --json"
    shown = [w for w in flags if w not in NODE_FLAGS and w not in CONFIG_FLAGS]
    planned = [shlex.split(x["arg"])[0] for x in launch["flags"] + launch["serve_args"]]
    assert shown == ["--served-model-name", "--port", *planned], "serve.sh sets a flag plan --json does not show"
    assert flags["--tensor-parallel-size"] == str(facts["parallel.tp"])
    assert flags.get("--data-parallel-size", "1") == str(facts["parallel.dp"])
    assert flags["--dtype"] == facts["runtime.dtype"]
    assert ("--enable-expert-parallel" in flags) == facts["parallel.ep"]
    assert ("--no-async-scheduling" in flags) == (not facts["workload.async_scheduling"])
    assert ("--enable-prefix-caching" in flags) == facts["workload.prefix_caching"]
    assert ("--enforce-eager" in flags) == facts["runtime.enforce_eager"]
    assert bool(launch["speculative_config"]) == facts["spec.mtp"]
    if facts["spec.mtp"]:
        assert launch["speculative_config"]["num_speculative_tokens"] == facts["spec.num_speculative_tokens"]
    for setting in launch["flags"] + launch["serve_args"]:
        words = shlex.split(setting["arg"])
        assert words[0] in flags and (len(words) == 1 or flags[words[0]] == words[1]), f"serve.sh lacks {setting}"
    for d in launch["derived"]:
        kind, _, key = d["set"].partition(":")
        if kind == "serve":
            assert flags[key] == str(d["value"]), f"serve.sh {key} {flags[key]} but the plan derived {d['value']}"
        else:
            node = launch[kind]
            for part in key.split("."):
                node = node[part]
            assert node == d["value"], f"{d['set']}: launch {node} but the plan derived {d['value']}"
    assert env_sh_exports(files["env.sh"]) == [(e["name"], e["value"]) for e in launch["env"]]
    assert lock["facts"] == facts and lock["selected"] == data["selected"]

    # statuses and reasons: the table, JSON, explain, the lock and README show the plan's
    table = _text(plan_report(result, workspace.catalog, verbose=True))
    again = plan(result.given, workspace)  # `optkit explain` plans the request again: the same plan
    assert plan_data(again) == data, "planning the same request again gives another plan"
    explained = _text(explain_report(again, workspace.catalog, sorted(result.resolution.decisions)))
    # fit before launch: the table and explain print the plan's own fit line (Plan.fit), and only they do
    fit = result.fit.line()
    assert fit.startswith("Fit per device: ") and again.fit.line() == fit
    assert fit in table.splitlines() and fit in explained.splitlines(), "the table or explain differs from Plan.fit"
    for rid, d in data["decisions"].items():
        status = d["status"]
        assert lock["decisions"][rid] == d, f"{rid}: the lock's decision differs from plan --json"
        assert decision_data(result, rid) == d
        assert f"{rid}: {status}\n  {d['reason']}" in explained, f"{rid}: explain does not say {status}"
        if status == "selected":
            assert f"### {rid} — " in readme and f"**Why selected:** {d['reason']}" in readme
            assert re.search(rf"^{re.escape(rid)} \| [^|]+ \| {re.escape(d['reason'])}", table, re.M), rid
        else:
            assert f"- **{rid}** ({status}): {d['reason']}" in readme, f"{rid}: README does not say {status}"
            assert f"{rid} | {status} | {d['reason']}" in table, f"{rid}: the table does not say {status}"
            # no view shows a gain for a recipe the plan does not select
            assert "expected_tpot_saving_ms" not in d and "measured_capacity" not in d, rid
            assert not re.search(r"^  expected gain:", _own_lines(explained, rid), re.M), f"{rid}: explain shows a gain"

    # the article's figures: expected.json and README show those the plan's gain counts, where and on what basis
    for rid in result.selected:
        gain, recipe = result.gain(rid), expected["recipes"][rid]
        counted = {f"c{c}": gain.basis[c] for c in gain.figures} if gain is not None else {}
        shown = {c: basis for g in recipe["gains"] for c, basis in g["counted_at"].items()}
        assert shown == counted, f"{rid}: expected.json counts the article's figures at {shown}, the plan at {counted}"
        assert all("counted_at" not in g for g in recipe["other_reported"])
        assert readme.count("— counted at c") >= sum(1 for g in recipe["gains"])

    # SLO checks: the table, plan --json, the lock and README show the plan's own (Plan.slo_checks), in its words
    checks = [check.data() for check in result.slo_checks]
    assert data["slo_checks"] == checks and lock["slo_checks"] == checks, "plan --json or the lock differs"
    assert bool(checks) == bool(facts["objective.slo"]), "an SLO without its checks, or checks without an SLO"
    assert re.findall(r"^  SLO check: (.*)$", table, re.M) == [c["text"] for c in checks], "the table differs"
    assert re.findall(r"^- SLO check: (.*)$", readme, re.M) == [c["text"] for c in checks], "README differs"

    # estimates: README and expected.json show the plan's, summed over the selected recipes' gains alone
    assert expected["estimate"] == data["estimate"]
    for e in result.estimates:
        counted = sum((result.gain(rid).estimate_ms.get(e.concurrency, 0.0) if result.gain(rid) else 0.0)
                      for rid in result.selected)
        assert e.saved_ms == pytest.approx(counted)
        assert f"- c{e.concurrency}: " in readme and f"{e.saved_ms:.2f} ms" in readme


def _own_lines(explained: str, rid: str) -> str:
    """The lines explain prints under recipe ``rid`` (up to the next recipe's ``id: status`` line)."""
    lines = explained.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{rid}: "))
    out = []
    for line in lines[start + 1:]:
        if re.match(r"^[a-z0-9][a-z0-9.-]*: ", line):
            break
        out.append(line)
    return "\n".join(out)


FINDINGS = [  # issue 25, finding 17: explain said no-effect then "expected gain"; facts named a capture list serve.sh did not run
    pytest.param(dict(model="qwen3.6-35b", target="910c", goal="throughput", concurrency=[32]), id="throughput-c32"),
    pytest.param(dict(model="qwen3.6-35b", target="910c", concurrency=[64]), id="c64-goal-by-default"),
    pytest.param(dict(model="qwen3.5-35b", target="910c", mtp=True), id="flagship-mtp"),
    pytest.param(dict(model="qwen3.5-397b", target="910b", tp=8, dp=2, nodes=2, quantization="w8a8", vllm_ascend_version="0.30.0rc2"),
                 id="two-nodes-0.30"),
    pytest.param(dict(model="qwen3.5-35b", target="910c", slo="tpot_p99<=1ms"), id="slo-infeasible"),  # finding 7
    pytest.param(dict(model="qwen3.6-35b", target="910c", goal="throughput", concurrency=[64],
                      slo="ttft_p95<=1s,tpot_p99.9<=30ms"), id="slo-throughput"),
]


@pytest.mark.parametrize("request_fields", FINDINGS)
def test_the_views_of_a_plan_agree(request_fields, workspace):
    check_views_agree(plan(Request(**request_fields), workspace), workspace)


@pytest.mark.parametrize("request_fields", FINDINGS[:2])
def test_a_recipe_without_effect_shows_no_gain(request_fields, workspace):
    result = plan(Request(**request_fields), workspace)
    rid = "gdn-rearrange-qkv-view"
    assert result.resolution.decisions[rid].status.value == "no-effect"
    assert "expected gain" not in _own_lines(_text(explain_report(result, workspace.catalog, [rid])), rid)
    assert "expected_tpot_saving_ms" not in decision_data(result, rid) and "if_selected" not in decision_data(result, rid)


@pytest.mark.parametrize("request_fields", FINDINGS[:2])
def test_no_fact_names_a_capture_list_the_launch_does_not_run(request_fields, workspace):
    result = plan(Request(**request_fields), workspace)
    captured = result.compilation_config["cudagraph_capture_sizes"]
    assert len(captured) > 1  # the load's range, not the requested concurrency alone
    facts = facts_json(request_facts(result.given, workspace))
    # the one capture fact is what the model's own page's command of this layout captures (0: none), read as the
    # page's, never as the plan's: where it reaches the load the launch runs the page's list, else optkit's
    assert [name for name in facts if "capture" in name] == ["page.command_capture_sizes_max"]
    page_max = facts["page.command_capture_sizes_max"]
    assert page_max < facts["workload.decode_rows_max"] or max(captured) == page_max
    assert facts["workload.decode_rows"] == [max(captured)]


def _condition(name):
    from optkit.catalog.conditions import compile_condition

    compile_condition(f"{name} > 1")


def _derived_expression(name):
    from optkit.catalog.derive import check_expression
    from optkit.catalog.factspec import FACTS

    check_expression({"add": [name, 1]}, FACTS)


def _template(name):
    from optkit.resolve.plan import substitute

    substitute({"cudagraph_capture_sizes": f"${{{name}}}"}, request_facts(Request(model="qwen3.5-35b"),
                                                                            load_workspace()), "my-recipe")


@pytest.mark.parametrize("use", [_condition, _derived_expression, _template], ids=["condition", "derived", "template"])
@pytest.mark.parametrize("old, new", [("compile.capture_size_max", "workload.decode_rows_max"),
                                      ("compile.cudagraph_capture_sizes", "workload.decode_rows")],
                         ids=["capture-size-max", "capture-sizes"])
def test_a_renamed_fact_is_refused_with_its_new_name(use, old, new):
    """A user catalog written against the old fact names gets the new name, never an internal error."""
    with pytest.raises((OptkitError, ValueError), match=f"it is called '{re.escape(new)}' now"):
        use(old)


def test_a_valid_recipe_left_out_says_what_it_would_change(workspace):
    result = plan(Request(model="qwen3.5-35b", target="910c", mtp=True), workspace)
    rid = "gdn-l2norm-fused-recurrent-kernel"  # slower at c8 with the article's numbers
    data = decision_data(result, rid)
    assert data["status"] == "regresses" and "expected_tpot_saving_ms" not in data
    assert data["if_selected"]["expected_tpot_saving_ms"]["c8"] < 0
    assert "  if selected: " in _own_lines(_text(explain_report(result, workspace.catalog, [rid])), rid)


def test_the_article_figures_a_bundle_lists_are_those_the_plan_counts(workspace):
    """The flagship with MTP counts the c1 figure measured with MTP off (its basis says so); expected.json and
    README called that same figure "measured with MTP off", not applicable, by a match of their own."""
    result = plan(Request(model="qwen3.5-35b", target="910c", mtp=True), workspace)
    files = bundle_files(result, workspace)
    rid = "moe-skip-dispatch-combine-events"
    entry = json.loads(files["expected.json"])["recipes"][rid]
    assert [g["counted_at"]["c1"] for g in entry["gains"]] == ["reported with MTP off"]
    assert entry["other_reported"] == []
    readme = files["README.md"].decode()
    assert "— counted at c1 (reported with MTP off), c4 (extrapolated from c1; reported with MTP off)" in readme


def _requests():
    """Requests over model × target × release × TP/DP/nodes × goal/SLO × concurrency × lengths × sampling × MTP/k."""
    mtp = st.booleans()
    return st.builds(
        dict, model=st.sampled_from(MODELS), target=st.sampled_from(["910b", "910c"]),
        vllm_ascend_version=st.sampled_from(RELEASES), tp=st.sampled_from([1, 2, 4, 8, 16]),
        dp=st.sampled_from([1, 2, 4, "auto"]), nodes=st.sampled_from([None, 1, 2]),
        goal=st.sampled_from([None, "latency", "throughput"]),
        slo=st.sampled_from([None, "tpot_p99<=50ms", "ttft_p95<=1s,tpot_p99<=30ms", "ttft_p99<=2s", "tpot_p99<=1ms",
                             "tpot_mean<=1ms,ttft_p95<=1s"]),  # the last two infeasible by any plan's estimate
        concurrency=st.lists(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 512]), min_size=1, max_size=3, unique=True),
        input_len=st.sampled_from([128, 1024, 8192]), output_len=st.sampled_from([64, 512, 2048]),
        sampling=st.sampled_from(["greedy", "sampled"]), min_tokens=st.booleans(), mtp=mtp,
        num_speculative_tokens=st.sampled_from([None, 1, 3, 6]), enforce_eager=st.sampled_from([False, False, True]),
        shared_prefix_len=st.sampled_from([0, 0, 64]),
    ).map(lambda r: {**r, "num_speculative_tokens": r["num_speculative_tokens"] if r["mtp"] else None})


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=_requests())
def test_every_view_agrees_over_generated_requests(fields, workspace):
    try:
        result = plan(Request(**{k: v for k, v in fields.items() if v is not None}), workspace)
    except OptkitError:
        return  # a request optkit refuses is refused cleanly (an OptkitError), which is all asked of it here
    check_views_agree(result, workspace)
