"""Run-time records: validated pydantic models, frozen into plain objects that need no pydantic.

pydantic validates at the edge (recipe, kernel, model and target files; request files, flags and
locks). What the run-time holds afterwards is a ``Record``: the model's fields as attributes in
field order, immutable, equal by value, nested models frozen too, and a ``dump`` that gives what
``model_dump`` gives. ``freeze`` reads the fields from the model class, so a field added to a
model is on its record with no change here.

Behaviour (properties, methods) lives in a mixin class that the pydantic model and its record
class both inherit, so it is written once. Which record class a model becomes is a mapping that
the loader owning the model passes to ``freeze``; a model without behaviour becomes a plain
``Record``. A record pickles as its class, its ``Shape`` (model name, fields, aliases) and its
values: the catalog cache stores records, and building them back needs neither pydantic nor the
model classes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

from optkit.errors import InternalError


class Shape:
    """The layout of one model's records: the model's name, its field names in order, their aliases."""

    __slots__ = ("name", "fields", "aliases")

    def __init__(self, name: str, fields: tuple[str, ...], aliases: tuple[str, ...]):
        self.name, self.fields, self.aliases = name, fields, aliases

    def _key(self) -> tuple:
        return self.name, self.fields, self.aliases

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Shape) and self._key() == other._key())

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self):
        return Shape, self._key()

    def __repr__(self) -> str:
        return f"Shape({self.name!r}, {self.fields!r}, {self.aliases!r})"


class Record:
    """A validated model's values, frozen: read them as attributes, compare them, ``dump`` them."""

    __slots__ = ("__dict__", "_shape")

    def __init__(self, shape: Shape, values: dict[str, Any]):
        """``values``: every field of ``shape``, in its order (``freeze`` and the fast paths build them)."""
        object.__setattr__(self, "_shape", shape)
        object.__setattr__(self, "__dict__", values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._shape.name} is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self._shape.name} is frozen: cannot delete {name!r}")

    def __reduce__(self):
        return type(self), (self._shape, self.__dict__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return type(self) is type(other) and self._shape == other._shape and self.__dict__ == other.__dict__

    def __hash__(self) -> int:  # as a frozen pydantic model: unhashable if a value is (a list, a dict)
        return hash((self._shape.name, *self.__dict__.values()))

    def __repr__(self) -> str:
        return f"{self._shape.name}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    def dump(self, mode: str = "python", by_alias: bool = False, exclude_none: bool = False) -> dict[str, Any]:
        """What ``model_dump(mode=…, by_alias=…, exclude_none=…)`` of the validated model gives."""
        if mode not in ("python", "json"):
            raise ValueError(f"mode must be 'python' or 'json', not {mode!r}")
        data = _plain(self, by_alias, exclude_none)
        if mode == "json":  # pydantic-core's own conversion (enums, dates, tuples), as model_dump uses
            from pydantic_core import to_jsonable_python

            return to_jsonable_python(data)
        return data


def _plain(value: Any, by_alias: bool, exclude_none: bool) -> Any:
    if isinstance(value, Record):
        shape, values = value._shape, value.__dict__
        keys = shape.aliases if by_alias else shape.fields
        return {key: _plain(values[name], by_alias, exclude_none) for name, key in zip(shape.fields, keys)
                if not (exclude_none and values[name] is None)}
    if isinstance(value, list):
        return [_plain(item, by_alias, exclude_none) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item, by_alias, exclude_none) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_plain(item, by_alias, exclude_none) for item in value)
    return value


RecordTypes = Mapping[type, type[Record]]


def freeze(value: Any, records: RecordTypes) -> Any:
    """``value`` with every pydantic model in it (nested ones too) turned into a record.

    ``records`` maps a model class to its record class (a subclass of a listed model takes the
    listed one's); models not in it become a plain ``Record``.
    """
    from pydantic import BaseModel

    def frozen(item: Any) -> Any:
        if isinstance(item, BaseModel):
            model = type(item)
            shape = shape_of(model)
            record = next((records[klass] for klass in model.__mro__ if klass in records), Record)
            return record(shape, {name: frozen(getattr(item, name)) for name in shape.fields})
        if isinstance(item, list):
            return [frozen(inner) for inner in item]
        if isinstance(item, dict):
            return {key: frozen(inner) for key, inner in item.items()}
        if isinstance(item, tuple):
            return tuple(frozen(inner) for inner in item)
        return item

    return frozen(value)


@lru_cache(maxsize=None)
def shape_of(model: type) -> Shape:
    """The ``Shape`` of a pydantic model class; refuses models whose dumps a record cannot reproduce."""
    fields = model.model_fields
    decorators = model.__pydantic_decorators__
    unsupported = [what for what, found in (("field serializers", decorators.field_serializers),
                                            ("model serializers", decorators.model_serializers),
                                            ("computed fields", decorators.computed_fields),
                                            ("extra fields", model.model_config.get("extra") == "allow")) if found]
    unsupported += [f"field {name!r} excluded from dumps" for name, info in fields.items() if info.exclude]
    if unsupported:
        raise InternalError(f"{model.__name__}: a record cannot reproduce model_dump with {', '.join(unsupported)} "
                            "(teach optkit.catalog.frozen, or drop them)")
    aliases = tuple(info.serialization_alias or info.alias or name for name, info in fields.items())
    return Shape(model.__name__, tuple(fields), aliases)
