"""Value classes that cost nothing to define: what ``@dataclass`` gives optkit, without its start-up.

``@dataclass`` writes the source of ``__init__``, ``__repr__``, ``__eq__`` (and ``__setattr__`` and
``__hash__`` when frozen) for every class and compiles it with ``exec``: about half a millisecond
per class. The plan path defines some forty such classes, so a warm ``optkit plan`` spent about a
fifth of its own time creating classes. ``@valueclass`` builds the same methods from shared functions
instead: a class costs some microseconds, an instance about what a dataclass instance costs.

What it keeps of dataclasses (and all optkit uses): fields from annotations, base classes' fields
first; defaults and ``field(default_factory=...)``; positional and keyword arguments;
``__post_init__``; ``frozen=True`` (assignment raises, instances hash by their fields; without
it, instances with ``__eq__`` are unhashable, as with dataclasses); ``repr`` and ``==`` by fields
and exact class; ``fields()`` and ``replace()``; pickling, as plain classes pickle. Not kept:
ordering, ``slots``, ``kw_only``, ``InitVar``, per-field options other than ``default_factory``.

Importable from every stage (the package face).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")
_MISSING: Any = object()
FIELDS = "__optkit_fields__"


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen value."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made per instance: ``tags: list[str] = field(default_factory=list)``."""
    return _Factory(default_factory)


def valueclass(cls: type[T] | None = None, *, frozen: bool = False):
    """Make ``cls`` a value class (``@valueclass`` or ``@valueclass(frozen=True)``)."""
    if cls is None:
        return lambda klass: _make(klass, frozen)
    return _make(cls, frozen)


def is_value(cls: type) -> bool:
    return isinstance(cls, type) and FIELDS in cls.__dict__


def fields(obj_or_cls) -> tuple[str, ...]:
    """The field names of a value class or instance, in ``__init__`` order."""
    return getattr(obj_or_cls, FIELDS)


def replace(obj: T, **changes: Any) -> T:
    """A copy of ``obj`` with ``changes`` (``dataclasses.replace``): ``__init__`` runs again."""
    names = fields(obj)
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{type(obj).__qualname__} has no field {sorted(unknown)[0]!r}")
    return type(obj)(**{name: changes[name] if name in changes else getattr(obj, name) for name in names})


def _make(cls: type[T], frozen: bool) -> type[T]:
    names: dict[str, None] = {}
    defaults: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for name, note in klass.__dict__.get("__annotations__", {}).items():
            if isinstance(note, str) and note.startswith(("ClassVar", "typing.ClassVar")):
                continue
            names[name] = None
            if name in klass.__dict__:
                defaults[name] = klass.__dict__[name]
            elif is_value(klass) and name in klass.__dict__["__optkit_defaults__"]:
                defaults[name] = klass.__dict__["__optkit_defaults__"][name]
            else:
                defaults.pop(name, None)  # declared again without a default: it has none
    order = tuple(names)
    seen_default = False
    for name in order:
        if name in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__qualname__}: non-default field {name!r} follows a field with a default")
    for name, default in defaults.items():
        if isinstance(default, _Factory) and name in cls.__dict__:
            delattr(cls, name)  # as dataclasses do: the class attribute would be shared
    own = cls.__dict__
    class_hash = own.get("__hash__", _MISSING)
    explicit_hash = not (class_hash is _MISSING or (class_hash is None and "__eq__" in own))
    setattr(cls, FIELDS, order)
    cls.__optkit_defaults__ = defaults
    # as dataclasses do: a method the class defines itself is kept
    for name, method in (("__init__", _init(cls, order, defaults)), ("__repr__", _repr), ("__eq__", _eq)):
        if name not in own:
            setattr(cls, name, method)
    if frozen:
        if "__setattr__" in own or "__delattr__" in own:
            raise TypeError(f"{cls.__qualname__}: a frozen value class may not define __setattr__ or __delattr__")
        cls.__setattr__ = _frozen_setattr
        cls.__delattr__ = _frozen_delattr
    if not explicit_hash:
        # compared by value: hashable by value when frozen, else unhashable (dataclasses' rule)
        cls.__hash__ = _hash if frozen else None  # type: ignore[assignment]
    return cls


def _init(cls: type, order: tuple[str, ...], defaults: dict[str, Any]):
    count = len(order)
    post_init = getattr(cls, "__post_init__", None)
    qualname = cls.__qualname__

    def __init__(self, *args, **kwargs):
        if len(args) > count:
            raise TypeError(f"{qualname}() takes {count} positional arguments but {len(args)} were given")
        put = object.__setattr__
        for name, arg in zip(order, args):
            put(self, name, arg)
        if len(args) < count or kwargs:
            for name in order[len(args):]:
                if name in kwargs:
                    put(self, name, kwargs.pop(name))
                    continue
                default = defaults.get(name, _MISSING)
                if default is _MISSING:
                    raise TypeError(f"{qualname}() missing required argument: {name!r}")
                put(self, name, default.make() if isinstance(default, _Factory) else default)
            if kwargs:
                extra = sorted(kwargs)[0]
                if extra in order:
                    raise TypeError(f"{qualname}() got multiple values for argument {extra!r}")
                raise TypeError(f"{qualname}() got an unexpected keyword argument {extra!r}")
        if post_init is not None:
            self.__post_init__()

    __init__.__qualname__ = f"{qualname}.__init__"
    return __init__


def _values(self) -> tuple:
    return tuple([getattr(self, name) for name in getattr(self, FIELDS)])


def _repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in getattr(self, FIELDS))
    return f"{type(self).__qualname__}({shown})"


def _eq(self, other):
    if other.__class__ is self.__class__:
        return _values(self) == _values(other)
    return NotImplemented


def _hash(self) -> int:
    return hash(_values(self))


def _frozen_setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a frozen {type(self).__qualname__}")


def _frozen_delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r} of a frozen {type(self).__qualname__}")
