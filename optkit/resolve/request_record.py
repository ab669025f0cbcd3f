"""The request as the run-time holds it: validated on every run by ``Request``'s own validator.

``optkit.resolve.request.Request`` (pydantic) is the schema of request files and flags. Building
its validator means importing pydantic and generating the schema, which costs more than a plan,
so the validator's pydantic-core schema (the fields of ``Request.__pydantic_core_schema__``,
without JSON-schema metadata) is kept in the catalog cache, keyed by the code that defines it,
and a ``SchemaValidator`` is built from it: the same validator, the same checks, on every input,
without pydantic. Its output becomes a ``RequestRecord``.

Errors keep pydantic's wording: when the fast validator rejects an input, ``Request.model_validate``
validates it again and raises its own ``ValidationError`` (a validator that accepted what the
model rejects, or the reverse, is an ``InternalError``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from optkit.catalog.cache import cached, schema_function
from optkit.catalog.frozen import Record, Shape
from optkit.errors import InternalError

# The vLLM release each vllm-ascend minor pins (the default of --vllm-version).
DEFAULT_VLLM_FOR_ASCEND = {"0.18": "0.18.0", "0.23": "0.23.0", "0.26": "0.26.0"}
_CODE = ("resolve/request.py", "resolve/request_record.py")  # what defines the validator


class RequestBehaviour:
    """What a request derives from its fields."""

    __slots__ = ()

    @property
    def k(self) -> int:
        """Speculative tokens per step (0 without MTP)."""
        return (self.num_speculative_tokens or 4) if self.mtp else 0


class RequestRecord(RequestBehaviour, Record):
    """A validated request (``optkit.resolve.request.Request``)."""

    __slots__ = ()


@schema_function
def sorted_levels(value: list[int]) -> list[int]:
    """Concurrency levels, each ≥ 1, deduplicated and sorted."""
    if any(c < 1 for c in value):
        raise ValueError("concurrency levels must be ≥ 1")
    return sorted(set(value))


def parse_request(data: Any) -> RequestRecord:
    """``data`` (a mapping of request fields, by name or alias) validated as a ``Request``.

    Raises pydantic's ``ValidationError`` (the model's own, with its wording) if it is invalid.
    """
    from pydantic_core import ValidationError

    validator, shape = _validator()
    try:
        fields, _, _ = validator.validate_python(data)
    except ValidationError:
        from optkit.resolve.request import Request

        Request.model_validate(data)  # raises the model's own error, in its words
        raise InternalError(f"the cached request validator rejects what Request accepts: {data!r}") from None
    return RequestRecord(shape, {name: fields[name] for name in shape.fields})


def load_request(path: Path) -> RequestRecord:
    """Read a YAML request file (the same fields as the CLI flags); problems are located."""
    from pydantic_core import ValidationError

    from optkit.catalog.loader import expect_mapping, validation_problems
    from optkit.catalog.yamlio import load_yaml
    from optkit.errors import ValidationFailed

    data, lines = load_yaml(path)
    expect_mapping(data, lines)
    try:
        return parse_request(data)
    except ValidationError as exc:
        from optkit.resolve.request import Request

        raise ValidationFailed(validation_problems(exc, lines, Request)) from None


@lru_cache(maxsize=None)
def _validator():
    """The request validator and the record shape (from the cache, else compiled and stored)."""
    from pydantic_core import SchemaError, SchemaValidator

    schema, config, shape = cached("request", None, _compile, code=_CODE)
    try:
        return SchemaValidator(schema, config), shape
    except SchemaError:  # an entry this pydantic-core cannot build: compile afresh
        schema, config, shape = _compile()
        return SchemaValidator(schema, config), shape


def _compile() -> tuple[dict, dict, Shape]:
    """The core schema of ``Request``'s fields, its core config, and its records' shape."""
    from optkit.catalog.frozen import shape_of
    from optkit.resolve.request import Request

    model = Request.__pydantic_core_schema__
    if model.get("type") != "model" or model["schema"].get("type") != "model-fields":
        raise InternalError(f"Request's core schema is a {model.get('type')!r} of {model['schema'].get('type')!r}, "
                            "not a model of model-fields: teach optkit.resolve.request_record")
    return _without_metadata(model["schema"]), dict(model.get("config", {})), shape_of(Request)


def _without_metadata(schema: Any) -> Any:
    """A copy of a core schema without the JSON-schema ``metadata`` of its nodes (validation never reads it)."""
    if isinstance(schema, dict):
        node = isinstance(schema.get("type"), str)
        return {key: _without_metadata(value) for key, value in schema.items() if not (node and key == "metadata")}
    if isinstance(schema, list):
        return [_without_metadata(item) for item in schema]
    return schema
