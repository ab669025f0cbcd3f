"""Records (optkit.catalog.frozen): what the run-time holds is what pydantic validated, field for field."""

from __future__ import annotations

import pickle
import typing

import pytest
import yaml
from pydantic import BaseModel, Field, computed_field, field_serializer

from optkit.catalog import cache
from optkit.catalog.frozen import Record, Shape, freeze, shape_of
from optkit.catalog.kernels import RECORDS as KERNEL_RECORDS, KernelSpec
from optkit.catalog.loader import parse_model
from optkit.catalog.paths import project_root
from optkit.catalog.schema import RECORDS as RECIPE_RECORDS, Recipe
from optkit.catalog.yamlio import load_yaml
from optkit.errors import InternalError, UnknownName
from optkit.resolve.profiles import RECORDS as PROFILE_RECORDS, ModelProfile, Target
from optkit.catalog.record_schema import Record as VerifiedRecord
from optkit.resolve.request import RECORDS as REQUEST_RECORDS, Request
from optkit.versions.schema import RECORDS as RELEASE_RECORDS, KnobMoves, ReleaseData

ROOT = project_root()
TOP = {Recipe: RECIPE_RECORDS, KernelSpec: KERNEL_RECORDS, ModelProfile: PROFILE_RECORDS, Target: PROFILE_RECORDS,
       Request: REQUEST_RECORDS, ReleaseData: RELEASE_RECORDS, KnobMoves: RELEASE_RECORDS, VerifiedRecord: {}}
FILES = {Recipe: "recipes/*/recipe.yaml", KernelSpec: "kernels/*/kernel.yaml", ModelProfile: "models/*.yaml",
         Target: "targets/*.yaml", ReleaseData: "versions/[0-9]*.yaml", KnobMoves: "versions/moves.yaml"}
MEASUREMENT = {"step": "01-x", "patches": {"0001-x.patch": "ab" * 32}, "tpot_delta_ms": {1: -1.2},
               "noise_ms": {1: 0.05}, "verdict": {1: "gain"}, "reference_tpot_ms": {1: 20.0}, "repeats": 2}
VERIFIED = {  # verified/ ships no record: one as `optkit report --record` writes it
    "record_version": 1, "target": "910c", "model": "qwen3.5-35b-a3b", "release": {"vllm_ascend": "0.23.0", "vllm": "0.23.0"},
    "tree_digest": "cd" * 32, "host": {"npu": "910C", "target": "910c", "cann": "9.0.1", "packages": {"vllm": "0.23.0"}},
    "workload": {"concurrency": [1], "input_len": 32, "output_len": 8, "mtp": False, "num_speculative_tokens": 0,
                 "tp": 2, "dp": 1, "ep": True,
                 "sampling": "greedy", "min_tokens": True},
    "ladder": "incremental", "accuracy_gate": "passed", "recipes": {"a-recipe": MEASUREMENT},
    "results": {"00-baseline/r1/c1.json": "ef" * 32}}
VERIFIED_CAPACITY = {  # with a capacity sweep (optkit ladder --sweep)
    **VERIFIED, "recipes": {"a-recipe": {**MEASUREMENT, "capacity_delta": 4, "capacity_verdict": "gain"}},
    "capacity": {"slo": "tpot_p99<=20ms", "variable": "concurrency", "low": 1, "high": 64, "resolution": 0.1,
                 "prompts_per_concurrency": 10,
                 "steps": {"01-x": {"recipes": ["a-recipe"], "capacity": 8, "upper": 9, "status": "found",
                                    "output_throughput": 400.0, "request_goodput": 2.5, "repeats": 1}}}}
DUMPS = [dict(mode=mode, by_alias=alias, exclude_none=none)
         for mode in ("python", "json") for alias in (False, True) for none in (False, True)]


def _nested_models(model: type[BaseModel], found: set) -> set:
    """``model`` and every model its fields hold (through lists, dicts, Optional)."""
    if model not in found:
        found.add(model)
        for info in model.model_fields.values():
            stack = [info.annotation]
            while stack:
                annotation = stack.pop()
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    _nested_models(annotation, found)
                stack += typing.get_args(annotation)
    return found


RUN_TIME_MODELS = set().union(*(_nested_models(model, set()) for model in TOP))


def _requests() -> list[Request]:
    cases = [yaml.safe_load(p.read_text(encoding="utf-8"))["request"] for p in sorted((ROOT / "tests/cases").glob("*.yaml"))]
    return [Request.model_validate(data) for data in cases + [{}, {"model_config": "x/config.json", "with": ["a"]}]]


def _validated() -> list[BaseModel]:
    """Every shipped recipe, kernel spec, model and target, and some requests, validated by pydantic."""
    out: list[BaseModel] = []
    for model, pattern in FILES.items():
        out += [parse_model(model, *load_yaml(path)) for path in sorted(ROOT.glob(pattern))]
    return out + _requests() + [VerifiedRecord.model_validate(VERIFIED), VerifiedRecord.model_validate(VERIFIED_CAPACITY)]


VALIDATED = _validated()


def _pairs(model: BaseModel, record: Record):
    """(model, record) for ``model`` and every model nested in it, side by side."""
    yield model, record
    for name in type(model).model_fields:
        yield from _pairs_of(getattr(model, name), getattr(record, name))


def _pairs_of(value, frozen):
    if isinstance(value, BaseModel):
        yield from _pairs(value, frozen)
    elif isinstance(value, (list, tuple)):
        for item, frozen_item in zip(value, frozen, strict=True):
            yield from _pairs_of(item, frozen_item)
    elif isinstance(value, dict):
        for key in value:
            yield from _pairs_of(value[key], frozen[key])


def _frozen(model: BaseModel) -> Record:
    records = next(records for top, records in TOP.items() if isinstance(model, top))
    return freeze(model, records)


# --------------------------------------------------------------------------- what pydantic validated


def test_every_run_time_model_is_covered_by_the_shipped_data():
    seen = {type(m) for model in VALIDATED for m, _ in _pairs(model, _frozen(model))}
    assert sorted(m.__name__ for m in RUN_TIME_MODELS - seen) == []


@pytest.mark.parametrize("model", VALIDATED, ids=lambda m: f"{type(m).__name__}-{getattr(m, 'id', None) or getattr(m, 'version', None) or getattr(m, 'model', None)}")
def test_a_record_has_the_models_fields_and_dumps(model):
    record = _frozen(model)
    for inner, frozen in _pairs(model, record):
        assert list(vars(frozen)) == list(type(inner).model_fields)
        assert frozen._shape.name == type(inner).__name__
    for how in DUMPS:
        assert record.dump(**how) == model.model_dump(**how), how


def test_the_json_dump_is_the_models_byte_for_byte():
    import json

    for model in VALIDATED:
        record = _frozen(model)
        assert json.dumps(record.dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False) == \
            json.dumps(model.model_dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False)


@pytest.mark.parametrize("model, expression", [
    pytest.param(ModelProfile, lambda p: p.facts(), id="model-facts"),
    pytest.param(ModelProfile, lambda p: p.names(), id="model-names"),
    pytest.param(Target, lambda t: (t.names(), t.facts(), t.facts(t.variants[0].id if t.variants else None)),
                 id="target-names-facts"),
    pytest.param(Recipe, lambda r: [g.change for g in r.gains], id="gain-change"),
    pytest.param(Recipe, lambda r: r.changes_launch, id="recipe-changes-launch"),
    pytest.param(Recipe, lambda r: {p.file: r.patch_versions(p.file) for p in r.patches}, id="recipe-patch-versions"),
    pytest.param(Request, lambda r: r.k, id="request-k"),
])
def test_behaviour_is_the_same_on_the_model_and_its_record(model, expression):
    for validated in (m for m in VALIDATED if isinstance(m, model)):
        assert expression(_frozen(validated)) == expression(validated)


def test_an_unknown_variant_is_the_same_error_on_model_and_record():
    target = next(m for m in VALIDATED if isinstance(m, Target))
    errors = []
    for side in (target, _frozen(target)):
        with pytest.raises(UnknownName) as exc:
            side.variant("nope")
        errors.append(str(exc.value))
    assert errors[0] == errors[1]


# --------------------------------------------------------------------------- generic over fields


class _Extended(ModelProfile):
    new_field: int = Field(3, description="A field another engineer adds.")
    new_note: str | None = Field(None, alias="new-note", description="One with an alias.")


def test_a_field_added_to_a_model_is_on_its_record_with_its_behaviour():
    base = next(m for m in VALIDATED if isinstance(m, ModelProfile))
    extended = _Extended.model_validate({**base.model_dump(), "new-note": "hi"})
    record = freeze(extended, PROFILE_RECORDS)
    assert record.new_field == 3 and record.new_note == "hi"
    assert record.facts() == base.facts()  # the subclass takes ModelProfile's record class
    for how in DUMPS:
        assert record.dump(**how) == extended.model_dump(**how)


class _Serialized(BaseModel):
    x: int = 1

    @field_serializer("x")
    def _double(self, x: int) -> int:
        return 2 * x


class _Computed(BaseModel):
    x: int = 1

    @computed_field
    @property
    def y(self) -> int:
        return self.x


class _Excluded(BaseModel):
    x: int = Field(1, exclude=True)


@pytest.mark.parametrize("model, what", [
    pytest.param(_Serialized, "field serializers", id="field-serializer"),
    pytest.param(_Computed, "computed fields", id="computed-field"),
    pytest.param(_Excluded, "field 'x' excluded from dumps", id="excluded-field"),
])
def test_a_model_whose_dump_a_record_cannot_reproduce_is_refused(model, what):
    with pytest.raises(InternalError, match=f"cannot reproduce model_dump with {what}"):
        shape_of(model)


# --------------------------------------------------------------------------- a record as a value


def _recipe() -> Record:
    return _frozen(next(m for m in VALIDATED if isinstance(m, Recipe)))


def test_a_record_is_frozen():
    record = _recipe()
    with pytest.raises(AttributeError, match="Recipe is frozen: cannot set 'title'"):
        record.title = "other"
    with pytest.raises(AttributeError, match="Recipe is frozen: cannot delete 'title'"):
        del record.title


def test_records_are_equal_by_class_shape_and_values():
    a, b = _recipe(), _recipe()
    assert a == b and a is not b
    assert a != Record(a._shape, dict(vars(a)))  # same values, another class
    assert a != type(a)(Shape("Other", a._shape.fields, a._shape.aliases), dict(vars(a)))
    assert a != type(a)(a._shape, {**vars(a), "title": "other"})
    assert hash(a.provenance) == hash(_recipe().provenance)  # hashable when its values are


def test_a_record_pickles_through_the_caches_loader():
    record = _recipe()
    assert cache._unpickle(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)) == record


def test_repr_names_the_model_and_its_fields():
    rule = _recipe().provenance.article
    assert repr(rule).startswith("ArticleRef(part=") and "section=" in repr(rule)


def test_dump_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="mode must be 'python' or 'json'"):
        _recipe().dump(mode="yaml")


def test_freeze_leaves_plain_values_alone():
    assert freeze({"a": [1, (2, "x")], "b": None}, {}) == {"a": [1, (2, "x")], "b": None}


def test_the_cached_catalog_holds_records(tmp_path, monkeypatch):
    from optkit.catalog.loader import load_catalog
    from optkit.catalog.recipe_records import GainRecord, RecipeRecord

    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path))
    for _ in range(2):  # cold, then warm
        catalog = load_catalog(ROOT)
        assert all(type(r) is RecipeRecord for r in catalog)
        assert all(type(g) is GainRecord for r in catalog for g in r.gains)

