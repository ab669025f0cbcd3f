"""A user's own checkpoint gets the decisions of the catalog profile of its architecture.

Rules key on architecture facts (model_type, GDN layers, MTP head), never on a profile's name, so
planning from a published ``config.json`` (tests/fixtures/hf/, sources in its README) decides
exactly what the built-in profile decides; and what config.json cannot tell (Qwen3-Next's MTP
layer count) is "unknown", not zero.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optkit.catalog.lint import lint
from optkit.errors import PlanImpossible
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.report import decision_data
from optkit.resolve.request import Request

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "tests" / "fixtures" / "hf"


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _decisions(result) -> dict:
    return {rid: decision_data(result, rid) for rid in result.resolution.decisions}


def _derived(fixture: str, model_id: str, **request) -> Request:
    return Request(model_config=str(HF / fixture), model_id=model_id, **request)


REQUESTS = [
    pytest.param(dict(mtp=True), id="mtp-0.23"),
    pytest.param(dict(), id="no-mtp-0.23"),
    pytest.param(dict(mtp=True, vllm_ascend_version="0.28.0rc1"), id="mtp-0.28"),
    pytest.param(dict(mtp=True, concurrency=[1, 16], tp=4), id="mtp-c16-tp4"),
]


@pytest.mark.parametrize("fixture", ["qwen3.6-27b", "qwen3.5-27b"])
@pytest.mark.parametrize("request_fields", REQUESTS)
def test_dense_checkpoint_decides_like_the_builtin_profile(workspace, fixture, request_fields):
    builtin = plan(Request(model="qwen3.6-27b", **request_fields), workspace)
    derived = plan(_derived(fixture, f"Qwen/{fixture}", **request_fields), workspace)
    assert derived.model.family == "custom"
    assert _decisions(derived) == _decisions(builtin)
    assert derived.selected == builtin.selected


def test_the_dense_mtp_rule_fires_for_a_users_checkpoint(workspace):
    """The issue's case: MTP + static kernel + super kernel fail at the first request on this
    architecture before 0.26, so a plan from the user's config.json must not select all three."""
    result = plan(_derived("qwen3.6-27b", "Qwen/Qwen3.6-27B", mtp=True), workspace)
    assert "mtp-enable-k4" in result.selected
    assert not {"waterfall-static-kernel", "compile-super-kernel"} <= set(result.selected)
    conflict = workspace.catalog["waterfall-static-kernel"].conflicts[1]
    assert "model.family" not in conflict.when and "qwen3_5_text" in conflict.when


@pytest.mark.parametrize("request_fields", REQUESTS[:3])
def test_moe_checkpoint_gets_the_same_statuses(workspace, request_fields):
    """Qwen3.5-35B-A3B: the same selection and statuses; only the ms figures differ, because the
    article's TPOT baseline belongs to its own deployment, not to a user's checkpoint."""
    builtin = plan(Request(model="qwen3.5-35b", **request_fields), workspace)
    derived = plan(_derived("qwen3_5_moe", "Qwen/Qwen3.5-35B-A3B", **request_fields), workspace)
    assert derived.selected == builtin.selected
    assert ({r: d.status for r, d in derived.resolution.decisions.items()}
            == {r: d.status for r, d in builtin.resolution.decisions.items()})
    assert all(e.baseline_ms is None and "none for qwen3.5-35b-a3b (a profile derived from config.json)" in e.basis
               for e in derived.estimates)


def test_qwen3_next_mtp_is_unknown_not_zero(workspace):
    """No num_nextn_predict_layers in a Qwen3-Next config: --mtp is planned, with the risk said."""
    # TP 4, as Qwen3-Next.md serves it (0.30.0rc2 :138): at TP 2 its BF16 weights do not fit (optkit.resolve.fit)
    result = plan(_derived("qwen3-next-80b-a3b-instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct", mtp=True, tp=4),
                  workspace)
    assert result.facts["model.mtp_head"] == "unknown"
    assert "mtp-enable-k4" in result.selected
    risks = [r for r in workspace.catalog["mtp-enable-k4"].risks if r.when == "model.mtp_head == 'unknown'"]
    assert risks and risks[0].severity == "medium" and "num_nextn_predict_layers" in risks[0].text
    assert any("num_nextn_predict_layers is absent" in note and "unknown" in note for note in result.model.sources)


def test_a_checkpoint_without_an_mtp_head_refuses_mtp(workspace):
    with pytest.raises(PlanImpossible) as exc:
        plan(Request(model_config=str(HF / "llama_dense"), mtp=True), workspace)
    assert "model.mtp_head = 'absent'" in str(exc.value)
    assert "drop --mtp (it implies mtp-enable-k4)" in str(exc.value)


@pytest.mark.parametrize(
    "when",
    ["model.family == 'qwen3.6-dense' and spec.mtp", "model.id in ['qwen3.6-27b']"],
    ids=["family", "id"],
)
def test_lint_refuses_rules_on_profile_names(tmp_path, when):
    import shutil

    for name in ("recipes", "kernels"):
        shutil.copytree(ROOT / name, tmp_path / name)
    path = tmp_path / "recipes" / "moe-fused-mc2-enable" / "recipe.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("preconditions:\n", f'preconditions:\n  - when: "{when}"\n    msg: a named rule\n', 1),
                    encoding="utf-8")
    found = [str(p) for p in lint(tmp_path) if "a profile's name" in p.message]
    assert found == [f"recipes/moe-fused-mc2-enable/recipe.yaml:{_line(path, when)}: preconditions[0].when: condition "
                     f"reads {'model.family' if 'family' in when else 'model.id'}, a profile's name, not its "
                     "architecture (key the rule on the facts that cause it (model.hf_model_type, "
                     "model.text_model_type, model.gdn_layers, model.is_moe, model.mtp_head, …))"]


def _line(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in line)
