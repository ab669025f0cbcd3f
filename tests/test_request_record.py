"""The request fast path: Request's own validator, precompiled, agrees with Request.model_validate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic_core import ValidationError

from optkit import __version__
from optkit.bundle import BundleWriteError
from optkit.bundle.lock import catalog_sha256, profiles_sha256, request_from_lock
from optkit.catalog.frozen import freeze
from optkit.catalog.loader import parse_model
from optkit.catalog.paths import project_root
from optkit.catalog.yamlio import load_yaml
from optkit.errors import BundleError, InternalError, ValidationFailed
from optkit.resolve import request_record
from optkit.resolve.plan import load_workspace
from optkit.resolve.request import RECORDS, Request
from optkit.resolve.request_record import RequestRecord, load_request, parse_request
from optkit.tree.patchset import LOCK_VERSION, REWRITE

KEYS = sorted({*Request.model_fields, *(info.alias for info in Request.model_fields.values() if info.alias)})
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 40), st.floats(-2, 50, allow_nan=False), st.text(max_size=5),
    st.sampled_from(["greedy", "sampled", "bfloat16", "float32", "0.23.0", "0.26.0", "qwen3.5-35b", "1", "yes"]),
    st.lists(st.integers(-2, 20), max_size=4), st.lists(st.one_of(st.text(max_size=3), st.integers(0, 3)), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
NAMES = st.one_of(st.none(), st.sampled_from(["qwen3.5-35b", "910c", "752t", "0.23.0", "0.26.0rc1", "x"]))
TYPICAL = {  # values that are often valid, so that accepted requests are common too
    "bool": st.booleans(), "int": st.integers(1, 16), "str": NAMES,
    "concurrency": st.lists(st.integers(0, 32), min_size=1, max_size=4), "sampling": st.sampled_from(["greedy", "sampled"]),
    "dtype": st.sampled_from(["bfloat16", "float16", "float32"]), "num_speculative_tokens": st.integers(0, 17),
    "with_recipes": st.lists(st.sampled_from(["mtp-enable-k4", "nope"]), max_size=2),
    "without_recipes": st.lists(st.sampled_from(["mtp-enable-k4", "nope"]), max_size=2),
}


def _typical(key: str):
    field = next((name for name, info in Request.model_fields.items() if key in (name, info.alias)), key)
    kind = next((t for t in ("bool", "int", "str") if t in str(Request.model_fields[field].annotation)), "") \
        if field in Request.model_fields else ""
    return TYPICAL.get(key, TYPICAL.get(field, TYPICAL.get(kind, VALUES)))


def _value(key: str):
    """Mostly a typical value of the field, sometimes anything."""
    return st.integers(0, 5).flatmap(lambda roll: VALUES if roll == 0 else _typical(key))


RAW = st.lists(st.sampled_from(KEYS + ["concurency", "nope"]), max_size=8, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({key: _value(key) for key in keys}))
ANYTHING = st.one_of(RAW, RAW, RAW, st.none(), st.text(max_size=4), st.lists(st.integers(), max_size=2))
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _errors(exc: ValidationError) -> tuple:
    """A ValidationError as comparable data: its text and each error (exception objects as text)."""
    details = [{**e, "ctx": {k: str(v) for k, v in e.get("ctx", {}).items()}} for e in exc.errors(include_url=False)]
    return str(exc), details


def _by_model(data) -> tuple:
    try:
        return freeze(Request.model_validate(data), RECORDS), None
    except ValidationError as exc:
        return None, _errors(exc)


def _by_cached_validator(data) -> tuple:
    """The precompiled validator alone (no fallback to the model for wording)."""
    validator, shape = request_record._validator()
    try:
        fields, _, _ = validator.validate_python(data)
    except ValidationError as exc:
        return None, _errors(exc)
    return RequestRecord(shape, {name: fields[name] for name in shape.fields}), None


def _by_parse_request(data) -> tuple:
    try:
        return parse_request(data), None
    except ValidationError as exc:
        return None, _errors(exc)


@PROPERTY
@given(RAW)
def test_the_cached_validator_is_the_models(data):
    assert _by_cached_validator(data) == _by_model(data)


@PROPERTY
@given(ANYTHING)
def test_parse_request_accepts_and_words_as_the_model_does(data):
    record, errors = _by_parse_request(data)
    assert (record, errors) == _by_model(data)
    if record is not None:
        assert record.dump(by_alias=True, mode="json") == Request.model_validate(data).model_dump(by_alias=True, mode="json")


@PROPERTY
@given(RAW)
def test_a_request_file_loads_as_the_model_validates_it(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "request.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        assert _outcome(load_request, path) == _outcome(lambda p: freeze(parse_model(Request, *load_yaml(p)), RECORDS), path)


WORKSPACE = load_workspace()
HASHES = {"catalog_sha256": catalog_sha256(WORKSPACE.root), "profiles_sha256": profiles_sha256(WORKSPACE.root),
          "version": __version__}
DEFAULTS = Request().model_dump(mode="json", by_alias=True)
NAMES_OF = {info.alias or name: name for name, info in Request.model_fields.items()}


def _whole(data: dict) -> dict:
    """``data`` with every field it leaves out at its default, as a lock records a request (all fields)."""
    return {**{key: value for key, value in DEFAULTS.items() if key not in data and NAMES_OF[key] not in data}, **data}


@PROPERTY
@given(ANYTHING)
def test_a_lock_gives_back_the_request_the_model_validates(data):
    request = _whole(data) if isinstance(data, dict) else data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "optkit.lock.json"
        path.write_text(json.dumps({"lock_version": LOCK_VERSION, "optkit": HASHES, "request": request}, indent=2),
                        encoding="utf-8")
        got = _outcome(lambda p: request_from_lock(p, WORKSPACE)[0], path)
    model, errors = _by_model(request)
    if model is not None:
        assert got == (model, None)
        return
    *problems, advice = got[1].split("\n")  # each problem located under request, then what to do
    assert problems and all(p.startswith(f"{path}:") and ": request" in p for p in problems), got[1]
    assert advice == REWRITE and "pydantic" not in got[1]


def _outcome(load, path: Path) -> tuple:
    try:
        return load(path), None
    except (ValidationFailed, BundleWriteError, BundleError) as exc:
        return None, str(exc)


def test_a_request_file_that_is_no_mapping_is_located(tmp_path):
    path = tmp_path / "request.yaml"
    path.write_text("- a list\n")
    with pytest.raises(ValidationFailed, match="request.yaml:1: expected a mapping of fields at the top level"):
        load_request(path)


def test_a_validator_that_disagrees_with_the_model_is_a_bug(monkeypatch):
    class RejectsAll:
        def validate_python(self, data):
            raise ValidationError.from_exception_data("Request", [{"type": "missing", "loc": ("tp",), "input": data}])

    monkeypatch.setattr(request_record, "_validator", lambda: (RejectsAll(), None))
    with pytest.raises(InternalError, match="rejects what Request accepts"):
        parse_request({})


def test_a_cached_schema_this_pydantic_core_cannot_build_is_compiled_afresh(monkeypatch):
    monkeypatch.setattr(request_record, "cached", lambda *args, **kwargs: ({"type": "no-such-schema"}, {}, None))
    request_record._validator.cache_clear()
    try:
        validator, shape = request_record._validator()
        assert shape.fields == tuple(Request.model_fields)
    finally:
        request_record._validator.cache_clear()


def test_the_validator_schema_holds_no_metadata_and_only_registered_functions():
    schema, config, shape = request_record._compile()
    text = repr(schema)
    assert "metadata" not in text and "pydantic_js" not in text
    assert "sorted_levels" in text  # the concurrency validator, a registered light function
    assert config["extra_fields_behavior"] == "forbid" and shape.fields == tuple(Request.model_fields)


def test_a_warm_run_builds_no_request_model(tmp_path):
    """Second process: the validator comes from the cache; pydantic (and Request's module) stay unimported."""
    code = ("import sys; from optkit.resolve.request_record import parse_request\n"
            "r = parse_request({'model': 'qwen3.5-35b', 'concurrency': [8, 1, 8]})\n"
            "print(r.concurrency, sorted(m for m in sys.modules if m == 'pydantic' or m.startswith('pydantic.')"
            " or m == 'optkit.resolve.request'))")
    env = dict(os.environ, OPTKIT_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(project_root()), *filter(None, [env.get("PYTHONPATH")])])
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert (tmp_path / "cache" / "catalog" / "request.pickle").is_file(), (
        "Request's core schema must pickle through the catalog cache's loader: a function validator "
        "must be a plain function in a light module, registered with optkit.catalog.cache.schema_function")
    assert runs[0].startswith("[1, 8] ['optkit.resolve.request'")  # cold: compiled from the model
    assert runs[1] == "[1, 8] []\n"
