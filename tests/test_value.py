"""optkit.value: the value classes the plan path uses instead of dataclasses behave as dataclasses do."""

import dataclasses
import pickle

import pytest

from optkit.value import FrozenInstanceError, field, fields, is_value, replace, valueclass


def _pair(frozen: bool):
    """The same class twice: as a dataclass and as a value class."""
    def body():
        class Base:
            kind: str
            size: int = 2
        return Base

    def sub(base, deco):
        class Sub(base):
            tags: list = (dataclasses.field if deco is dataclasses.dataclass else field)(default_factory=list)
        return deco(Sub) if deco is not dataclasses.dataclass else dataclasses.dataclass(frozen=frozen)(Sub)

    dc_base = dataclasses.dataclass(frozen=frozen)(body())
    ok_base = valueclass(frozen=frozen)(body())
    return sub(dc_base, dataclasses.dataclass), sub(ok_base, valueclass(frozen=frozen))


@pytest.mark.parametrize("frozen", [False, True])
def test_behaves_as_the_dataclass(frozen):
    dc, ok = _pair(frozen)
    for args, kwargs in [(("a",), {}), (("a", 3), {}), ((), {"kind": "b", "tags": [1]}), (("a",), {"size": 5})]:
        d, o = dc(*args, **kwargs), ok(*args, **kwargs)
        assert (d.kind, d.size, d.tags) == (o.kind, o.size, o.tags)
        assert repr(d).split("(", 1)[1] == repr(o).split("(", 1)[1]
        assert o == ok(*args, **kwargs) and o != ok("other") and o != d
    assert fields(ok) == tuple(f.name for f in dataclasses.fields(dc)) == ("kind", "size", "tags")
    assert ok("a").tags is not ok("a").tags  # a factory per instance
    assert not hasattr(ok, "tags")  # the factory is no shared class attribute
    for bad_args, bad_kwargs in [((), {}), (("a", 1, [], 4), {}), (("a",), {"kind": "b"}), (("a",), {"colour": 1})]:
        with pytest.raises(TypeError):
            dc(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError):
            ok(*bad_args, **bad_kwargs)
    if frozen:
        assert hash(ok("a", 1, ())) == hash(ok("a", 1, ()))
        with pytest.raises(FrozenInstanceError):
            ok("a").size = 3
        with pytest.raises(AttributeError):
            del ok("a").kind
    else:
        with pytest.raises(TypeError):
            hash(ok("a"))
        o = ok("a")
        o.size = 9
        assert o.size == 9


@valueclass(frozen=True)
class Point:
    x: int
    y: int = 0

    def __post_init__(self):
        if self.x < 0:
            raise ValueError("x below zero")

    def __repr__(self):
        return f"<{self.x},{self.y}>"


def test_replace_post_init_pickle_and_own_methods():
    p = Point(1, 2)
    assert replace(p, y=5) == Point(1, 5) and repr(p) == "<1,2>"
    with pytest.raises(ValueError):
        replace(p, x=-1)
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)
    assert pickle.loads(pickle.dumps(p)) == p
    assert is_value(Point) and not is_value(int)


def test_a_field_without_default_after_one_with_is_refused():
    class Bad:
        a: int = 1
        b: int

    with pytest.raises(TypeError, match="non-default field 'b'"):
        valueclass(Bad)
