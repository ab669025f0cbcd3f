"""The condition language: evaluation, typing, and rejection of anything that is not a condition."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from packaging.version import Version

from optkit.catalog.conditions import compile_condition
from optkit.errors import ConditionError

FACTS = {
    "parallel.tp": 2, "parallel.ep": True, "target.soc_family": "ascend910_93", "spec.mtp": True,
    "versions.vllm_ascend": Version("0.23.0"), "workload.concurrency": [1, 4, 8],
    "workload.decode_rows_max": 40, "model.hidden_size": 2048, "model.family": "qwen3.5-moe",
}

TRUE_FALSE = [
    ("eq", "parallel.tp == 2", True),
    ("ne", "parallel.tp != 2", False),
    ("and", "parallel.tp == 2 and spec.mtp", True),
    ("or", "parallel.tp == 4 or spec.mtp", True),
    ("not", "not spec.mtp", False),
    ("precedence", "parallel.tp == 4 and spec.mtp or parallel.ep", True),
    ("parens", "parallel.tp == 4 and (spec.mtp or parallel.ep)", False),
    ("le-boundary", "workload.decode_rows_max <= 40", True),
    ("lt-boundary", "workload.decode_rows_max < 40", False),
    ("in-literal-list", "target.soc_family in ['ascend910_93', 'ascend910b']", True),
    ("not-in", "target.soc_family not in ['ascend910b']", True),
    ("in-fact-list", "8 in workload.concurrency", True),
    ("version-lt", "versions.vllm_ascend < '0.26'", True),
    ("version-ge-pre", "versions.vllm_ascend >= '0.26.0rc1'", False),
    ("version-post", "versions.vllm_ascend < '0.23.0.post1'", True),
    ("bool-literal", "spec.mtp == true", True),
    ("double-quotes", 'model.family == "qwen3.5-moe"', True),
]


@pytest.mark.parametrize("text, expected", [c[1:] for c in TRUE_FALSE], ids=[c[0] for c in TRUE_FALSE])
def test_evaluates(text, expected):
    assert compile_condition(text).evaluate(FACTS) is expected


REJECTED = [
    ("unknown-fact", "parallel.tpp == 2", "unknown fact 'parallel.tpp' (at column 1); did you mean 'parallel.tp'?"),
    ("int-vs-str", "parallel.tp == 'x'", "cannot compare int with str using '==' (at column 13)"),
    ("bare-int", "parallel.tp", "expected a true/false test, but fact 'parallel.tp' is int (at column 1)"),
    ("bool-vs-int", "spec.mtp == 1", "cannot compare bool with int using '==' (at column 10)"),
    ("order-on-str", "model.family < 'a'", "'<' needs numbers or versions, not str (at column 14)"),
    ("bad-choice", "target.soc_family == 'ascend910_39'", "target.soc_family is never 'ascend910_39'"),
    ("bad-version", "versions.vllm_ascend < 'soon'", "'soon' is not a version"),
    ("mixed-list", "1 in [1, 'a']", "list mixes value types"),
    ("in-non-list", "1 in parallel.tp", "'in' needs a list on its right, got int"),
    ("dangling-and", "spec.mtp and", "condition ends too early"),
    ("empty", "", "empty condition"),
    ("call", "exec('x')", "unknown fact 'exec'"),
    ("attribute", "().__class__", "unexpected character '.' (at column 3)"),
    ("semicolon", "spec.mtp; x", "unexpected character ';'"),
    ("lambda", "lambda: 1", "unexpected character ':'"),
    ("dunder", "__builtins__ == 1", "unknown fact '__builtins__'"),
    ("fact-in-list", "1 in [parallel.tp]", "list items must be literal values"),
    ("trailing", "spec.mtp spec.mtp", "unexpected 'spec.mtp'"),
    ("unclosed", "(spec.mtp", "missing ')'"),
]


@pytest.mark.parametrize("text, fragment", [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_rejected_with_reason(text, fragment):
    with pytest.raises(ConditionError) as info:
        compile_condition(text)
    assert fragment in str(info.value)


def test_reports_facts_and_values():
    cond = compile_condition("parallel.tp == 2 and workload.decode_rows_max <= 40 and parallel.tp > 1")
    assert cond.fact_names() == ("parallel.tp", "workload.decode_rows_max")
    assert cond.describe(FACTS).endswith("[parallel.tp = 2, workload.decode_rows_max = 40]")


@given(st.text(max_size=40))
def test_arbitrary_text_never_escapes(text):
    """Any text either compiles to a condition over known facts or raises ConditionError."""
    try:
        cond = compile_condition(text)
    except ConditionError:
        return
    from optkit.catalog.factspec import FACTS as SPECS

    assert set(cond.fact_names()) <= set(SPECS)
