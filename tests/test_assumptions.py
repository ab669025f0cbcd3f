"""The workload a plan assumes (optkit.resolve.assumptions): decided once, shown by every view, and the
decisions that rest on a default name it with the flag that changes it (issue 25, finding 8 and item 5)."""

from __future__ import annotations

import json

import pytest

from optkit.bundle.writer import bundle_files
from optkit.cli.render import explain_report, plan_report
from optkit.resolve.assumptions import DEFAULT_LENGTHS, DEFAULTS
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.report import plan_data
from optkit.resolve.request import Request
from optkit.resolve.request_record import parse_request

WS = load_workspace()
CHATBOT = {"model": "qwen3.6-35b-a3b", "target": "910c", "concurrency": [64]}
FAST, ARGMAX = "sampler-greedy-bf16-fastpath", "sampler-vocab-parallel-greedy-argmax"


def _plan(**fields):
    return plan(parse_request({**CHATBOT, **fields}), WS)


@pytest.mark.parametrize("fields, recipe, status, assumes", [
    pytest.param({}, FAST, "no-effect", ["min_tokens"], id="chatbot-defaults-fast-path-idle-under-min-tokens"),
    pytest.param({}, ARGMAX, "no-effect", ["min_tokens"], id="chatbot-defaults-argmax-idle-under-min-tokens"),
    pytest.param({"min_tokens": False}, FAST, "selected", ["sampling", "logprobs", "penalties"],
                 id="no-min-tokens-fast-path-rests-on-greedy"),
    pytest.param({"min_tokens": False}, ARGMAX, "selected",
                 ["sampling", "logprobs", "penalties", "structured_output"], id="no-min-tokens-argmax"),
    pytest.param({"mtp": True}, ARGMAX, "selected",
                 ["sampling", "min_tokens", "logprobs", "penalties", "structured_output"], id="mtp-argmax-with-the-mask-cache"),
    pytest.param({"sampling": "sampled"}, FAST, "excluded", [], id="sampled-stated-not-assumed"),
    pytest.param({"sampling": "sampled", "min_tokens": False}, "sched-capacity-for-load", "selected", [],
                 id="a-recipe-reading-no-workload-switch"),
])
def test_decisions_name_the_defaults_they_rest_on(fields, recipe, status, assumes):
    d = _plan(**fields).resolution.decisions[recipe]
    assert (d.status.value, d.assumes) == (status, assumes), d.reason


def test_the_defaults_are_the_requests():
    fields = Request.model_fields
    assert {name: fields[name].default for name in DEFAULTS} == DEFAULTS
    assert (fields["input_len"].default, fields["output_len"].default) == DEFAULT_LENGTHS


@pytest.mark.parametrize("fields, words", [
    pytest.param({}, "greedy sampling, temperature 0 (the default; --sampling sampled changes it)", id="default"),
    pytest.param({"sampling": "sampled"}, "sampling with temperature > 0 (as requested; --sampling greedy changes it)",
                 id="sampled"),
    pytest.param({"min_tokens": False}, "no min_tokens (as requested; --min-tokens changes it)", id="no-min-tokens"),
    pytest.param({"input_len": 4096}, "4096 tokens in / 512 out (as requested;", id="lengths"),
])
def test_the_header_states_the_workload(fields, words):
    header = next(b for b in plan_report(_plan(**fields), WS.catalog) if isinstance(b, str)
                  and b.startswith("Workload assumed: "))
    assert words in header


def test_the_table_row_names_the_flag_that_changes_a_default():
    rows = [b for b in plan_report(_plan(), WS.catalog) if not isinstance(b, str)]
    cells = {row[0]: row[-1] for table in rows for row in table.rows}
    assert cells[FAST].endswith("[assumes, by default: min_tokens set (--no-min-tokens)]")


def test_every_view_states_the_same_assumptions():
    result = _plan()
    files = bundle_files(result, WS)
    lock = json.loads(files["optkit.lock.json"])
    data = plan_data(result)
    assert lock["assumptions"] == data["assumptions"] == [a.data() for a in result.assumptions]
    assert lock["decisions"][FAST]["assumes"] == data["decisions"][FAST]["assumes"] == ["min_tokens"]
    readme = files["README.md"].decode() if isinstance(files["README.md"], bytes) else files["README.md"]
    line = next(ln for ln in readme.splitlines() if ln.startswith("Workload assumed"))
    assert all(a.text() in line for a in result.assumptions)
    assert "assumes, by default: min_tokens set (--no-min-tokens)" in readme


def test_explain_says_what_the_plan_says():
    result = _plan()
    lines = explain_report(result, WS.catalog, [FAST])
    assert lines[0] == next(b for b in plan_report(result, WS.catalog) if isinstance(b, str)
                            and b.startswith("Workload assumed: "))
    assert "  assumes, by default: min_tokens set (--no-min-tokens)" in lines
