"""Resolver scenarios as data: each tests/cases/*.yaml is a request and what the plan must show."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from optkit.errors import OptkitError
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.report import facts_data
from optkit.resolve.request_record import RequestRecord, parse_request

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "tests" / "cases").glob("*.yaml"))
WORKSPACE = load_workspace()
KNOWN_KEYS = {"facts", "status", "reason_contains", "reason_lacks", "facts_in_reason", "launch", "not_both",
              "speculative_config_empty", "error_contains", "notes_contain", "env"}


def load_case(path: Path) -> tuple[dict, dict]:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    request = dict(case["request"])
    if "model_config" in request:
        request["model_config"] = str(ROOT / request["model_config"])
    expect = case["expect"]
    assert set(expect) <= KNOWN_KEYS, f"{path.name}: unknown expectation keys {set(expect) - KNOWN_KEYS}"
    return request, expect


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_scenario(path):
    request, expect = load_case(path)
    if "error_contains" in expect:
        with pytest.raises(OptkitError) as info:
            plan(parse_request(request), WORKSPACE)
        for fragment in expect["error_contains"]:
            assert fragment in str(info.value), str(info.value)
        return
    result = plan(parse_request(request), WORKSPACE)
    decisions = result.resolution.decisions
    facts = facts_data(result)
    for name, value in expect.get("facts", {}).items():
        assert facts[name] == value, f"fact {name}: {facts[name]!r}"
    for rid, status in expect.get("status", {}).items():
        assert decisions[rid].status.value == status, f"{rid}: {decisions[rid].status.value}: {decisions[rid].reason}"
    for rid, fragment in expect.get("reason_contains", {}).items():
        assert fragment in decisions[rid].reason, decisions[rid].reason
    for rid, fragments in expect.get("reason_lacks", {}).items():  # another request's numbers, say
        assert not [f for f in fragments if f in decisions[rid].reason], decisions[rid].reason
    for rid, fact_values in expect.get("facts_in_reason", {}).items():
        for name, value in fact_values.items():
            assert decisions[rid].facts.get(name) == value, decisions[rid].facts
    for a, b in expect.get("not_both", []):
        assert not {a, b} <= set(result.selected)
    for rid, fragment in expect.get("notes_contain", {}).items():
        assert any(fragment in note for note in decisions[rid].notes), decisions[rid].notes
    if "env" in expect:
        assert [s.key for s in result.env] == expect["env"]
    for section, fragment in expect.get("launch", {}).items():
        assert getattr(result, section) == fragment
    if expect.get("speculative_config_empty"):
        assert result.speculative_config == {}
    _invariants(result)


def _invariants(result) -> None:
    """What holds for every plan: selected recipes' preconditions hold, links are respected."""
    from optkit.catalog.conditions import compiled

    chosen = set(result.selected) | set(result.resolution.upstream)
    for rid in result.selected:
        recipe = WORKSPACE.catalog[rid]
        for rule in recipe.preconditions:
            assert compiled(rule.when).evaluate(result.facts.values), f"{rid}: {rule.when}"
        for link in recipe.requires:
            if link.when is None or compiled(link.when).evaluate(result.facts.values):
                assert link.recipe in chosen, f"{rid} requires {link.recipe}"
        for link in recipe.conflicts:
            if link.when is None or compiled(link.when).evaluate(result.facts.values):
                assert link.recipe not in result.selected or set(link.unless) & chosen, f"{rid} ⟂ {link.recipe}"


def test_every_recipe_ends_somewhere_with_a_reason():
    result = plan(parse_request({"model": "qwen3.5-35b", "mtp": True}), WORKSPACE)
    assert set(result.resolution.decisions) == set(WORKSPACE.catalog.recipes)
    assert all(d.reason for d in result.resolution.decisions.values())


def test_plan_is_deterministic():
    from optkit.resolve.report import plan_data

    request: RequestRecord = parse_request({"model": "qwen3.5-35b", "mtp": True})
    first = plan_data(plan(request, WORKSPACE))
    second = plan_data(plan(request, load_workspace()))
    assert first == second
