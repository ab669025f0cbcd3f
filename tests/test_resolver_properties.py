"""Property tests: on random catalogs the resolver's plan is valid and optimal (vs brute force)."""

from __future__ import annotations

from itertools import product
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from optkit.catalog.loader import Catalog
from optkit.errors import PlanImpossible
from optkit.resolve.facts import compute_facts
from optkit.resolve.plan import load_workspace
from optkit.resolve.request_record import parse_request
from optkit.versions.onrelease import declared_verdicts
from optkit.resolve.resolver import _SOFT, Status, _Classifier, _holds, resolve, version_ranges
from optkit.catalog.frozen import freeze
from optkit.catalog.schema import RECORDS, Recipe

WS = load_workspace()
FACTS = compute_facts(parse_request({"model": "qwen3.5-35b", "mtp": True}), WS.models["qwen3.5-35b-a3b"], WS.targets["910c"])
TRUE, FALSE = "parallel.tp == 2", "parallel.tp == 4"
BASE = {
    "title": "random recipe", "summary": "a random recipe for property tests", "kind": "config",
    "provenance": {"article": {"part": 2, "section": "s", "quote": "quote"}, "seed_map": "X",
                   "upstream": {"status": "new", "evidence": "none"}},
    "verification": {"level": "declared", "needs_npu": True},
}


def recipe(data: dict):
    """A recipe as the loader gives it: validated, then frozen into a record."""
    return freeze(Recipe.model_validate(data), RECORDS)


UPSTREAM = {"versions": ">=0.23", "status": "upstream", "msg": "already there",
            "probe": [{"file": "vllm_ascend/x.py", "present": ["x"]}]}


@st.composite
def catalogs(draw):
    n = draw(st.integers(1, 7))
    ids = [f"r{i}" for i in range(n)]
    recipes = {}
    for rid in ids:
        cond = st.sampled_from([TRUE, TRUE, FALSE])
        others = st.sampled_from(ids)
        data = dict(BASE, id=rid, versions={"vllm_ascend": draw(st.sampled_from([">=0.23", ">=0.23", "<0.20"]))})
        if draw(st.integers(0, 5)) == 0:
            data["releases"] = [UPSTREAM]
        data["preconditions"] = [{"when": draw(cond), "msg": "pre"} for _ in range(draw(st.integers(0, 1)))]
        data["effective_when"] = [{"when": draw(cond), "msg": "eff"} for _ in range(draw(st.integers(0, 1)))]
        data["requires"] = [{"recipe": draw(others), "msg": "req", "when": draw(st.sampled_from([None, TRUE, FALSE]))}
                            for _ in range(draw(st.integers(0, 2)))]
        data["conflicts"] = [{"recipe": draw(others), "msg": "con", "unless": draw(st.lists(others, max_size=1)),
                              "when": draw(st.sampled_from([None, TRUE]))} for _ in range(draw(st.integers(0, 2)))]
        ms = draw(st.sampled_from([None, 0.1, 0.3, 0.3, 1.0, -0.5]))
        if ms is not None:
            data["gains"] = [{"metric": "tpot", "concurrency": 1, "delta": -ms, "unit": "ms", "quote": "quote"}]
        if draw(st.integers(0, 6)) == 0:
            data["risks"] = [{"severity": "high", "text": "danger"}]
        if draw(st.integers(0, 8)) == 0:
            data["implied_by"] = TRUE
        data["requires"] = [l for l in data["requires"] if l["recipe"] != rid]
        data["conflicts"] = [l for l in data["conflicts"] if l["recipe"] != rid]
        recipes[rid] = recipe(data)
    with_ids = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))
    without_ids = [r for r in draw(st.lists(st.sampled_from(ids), max_size=1, unique=True)) if r not in with_ids]
    return Catalog(Path("."), recipes), with_ids, without_ids


def _no_baseline(_c):
    return None


def brute_force(catalog, with_ids, without_ids):
    """Independent statement of validity and of the objective, by enumeration."""
    forced = {rid: "--with" for rid in with_ids}
    for r in catalog:
        if r.implied_by and r.id not in forced and _holds(r.implied_by, FACTS):
            forced[r.id] = "implied"
    classify = _Classifier(FACTS, set(without_ids), forced, _no_baseline, version_ranges(catalog, FACTS),
                           verdicts=declared_verdicts(catalog, FACTS["versions.vllm_ascend"]))
    d = {r.id: classify(r) for r in catalog}
    upstream = {rid for rid, x in d.items() if x.status is Status.upstream}
    ids = sorted(catalog.recipes)
    best = None
    for bits in product([True, False], repeat=len(ids)):
        chosen = {rid for rid, b in zip(ids, bits) if b}
        if chosen & upstream:
            continue
        if any(rid not in chosen for rid in forced if rid not in upstream):
            continue
        if any(d[rid].status is not Status.selected and not (d[rid].forced and d[rid].status in _SOFT)
               for rid in chosen):
            continue
        present = chosen | upstream
        ok = all(l.recipe in present for rid in chosen for l in catalog[rid].requires if _holds(l.when, FACTS))
        ok = ok and not any(l.recipe in chosen and not (set(l.unless) & present)
                            for rid in chosen for l in catalog[rid].conflicts if _holds(l.when, FACTS))
        if not ok:
            continue
        score = (sum(d[r].benefit.weight_us() for r in chosen),
                 sum(1 for r in chosen if not d[r].benefit.quantified))
        if best is None or score > best[0]:
            best = (score, chosen)
    return best


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogs())
def test_plan_is_valid_and_optimal(case):
    catalog, with_ids, without_ids = case
    expected = brute_force(catalog, with_ids, without_ids)
    try:
        result = resolve(catalog, FACTS, with_ids, without_ids, _no_baseline)
    except PlanImpossible as exc:
        assert expected is None, f"resolver says impossible, brute force found {expected}"
        assert exc.reasons and str(exc).startswith("no valid plan")
        return
    assert expected is not None, f"resolver returned {result.selected} for an infeasible request"
    assert set(result.selected) == expected[1]


def test_upstream_requirement_is_met_without_selecting():
    base = dict(BASE, versions={"vllm_ascend": ">=0.23"})
    a = recipe(dict(base, id="a", requires=[{"recipe": "b", "msg": "needs b"}]))
    b = recipe(dict(base, id="b", releases=[UPSTREAM]))
    result = resolve(Catalog(Path("."), {"a": a, "b": b}), FACTS, [], [], _no_baseline)
    assert result.selected == ["a"] and result.upstream == ["b"]
