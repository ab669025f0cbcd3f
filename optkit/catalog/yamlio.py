"""Read YAML with line numbers, so every error can name ``file:line: field.path``.

``load_yaml`` returns the plain data plus a ``LineMap`` from field paths (tuples of keys and
indices, as pydantic reports them in ``ValidationError.errors()[i]["loc"]``) to 1-based lines.
Only the safe loader is used (libyaml's when available): tags that build Python objects are rejected.

Before anything is built, one pass over the parser's events keeps the limits of
``optkit.catalog.textfile``: nesting deeper than ``MAX_DEPTH`` (libyaml's composer recurses in C
and crashes the process on ~100,000 nested brackets), more than ``MAX_VALUES`` values once
aliases are expanded (a "billion laughs" document), and an alias inside the value it names (a
cycle). Duplicate keys (which YAML loaders silently resolve to the last one) and integers longer
than ``MAX_INT_DIGITS`` are refused with their lines; a scalar its tag cannot build (a date
2026-13-45, ``!!int abc``) is refused at its line, not raised from deep inside PyYAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from optkit.catalog.linemap import LineMap, PathKey, dotted
from optkit.catalog.textfile import MAX_DEPTH, MAX_INT_DIGITS, MAX_VALUES, read_text
from optkit.errors import Location, Problem, ValidationFailed


_INT = "tag:yaml.org,2002:int"
_MERGE = "tag:yaml.org,2002:merge"


class _Walk:
    """Lines of every path of a composed document, and the problems no schema can see."""

    def __init__(self, file: str):
        self.file = file
        self.lines: dict[PathKey, int] = {}
        self.paths: dict[int, PathKey] = {}  # id(node) -> its (first) path, for errors while constructing
        self.duplicates: list[Problem] = []
        self.problems: list[Problem] = []

    def node(self, node: yaml.Node, path: PathKey) -> None:
        self.lines[path] = node.start_mark.line + 1
        self.paths.setdefault(id(node), path)
        if isinstance(node, yaml.MappingNode):
            self.mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.node(item, path + (index,))
        elif node.tag == _INT and sum(c.isdigit() for c in node.value) > MAX_INT_DIGITS:
            digits = sum(c.isdigit() for c in node.value)
            self.problem(path, f"an integer of {digits} digits; no number optkit reads has more than {MAX_INT_DIGITS}")

    def mapping(self, node: yaml.MappingNode, path: PathKey) -> None:
        first_line: dict[tuple, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # a list or mapping as a key: the constructor refuses it ("unhashable key"), at its line
            key, line = key_node.value, key_node.start_mark.line + 1
            self.lines[path + (key,)] = line
            if key_node.tag != _MERGE:
                if (key_node.tag, key) in first_line:
                    self.duplicates.append(Problem(
                        Location(self.file, line, dotted(path + (key,))),
                        f"key {key!r} appears twice, at lines {first_line[key_node.tag, key]} and {line}",
                        "keep one of them"))
                first_line.setdefault((key_node.tag, key), line)
            self.value(value_node, path + (key,))

    def value(self, node: yaml.Node, path: PathKey) -> None:
        # The key's own line stays the reference for the field; children get theirs.
        saved = self.lines[path]
        self.node(node, path)
        self.lines[path] = saved

    def problem(self, path: PathKey, message: str, hint: str = "") -> None:
        self.problems.append(Problem(Location(self.file, self.lines.get(path), dotted(path)), message, hint))


_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it: same marks, faster


_KINDS = {"timestamp": "date", "int": "integer", "float": "number", "bool": "boolean", "binary": "base64 value"}


class _Loader(_Base):
    """The safe loader, with a scalar its tag cannot build (a date 2026-13-45) reported at its line."""

    walk: _Walk

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            tag = node.tag.rsplit(":", 1)[-1]
            path = self.walk.paths.get(id(node), ())
            location = Location(self.walk.file, node.start_mark.line + 1, dotted(path))
            message = f"{node.value!r} is not a valid {_KINDS.get(tag, tag)} ({exc})"
            raise ValidationFailed([Problem(location, message, "quote it if it is meant as text")]) from None


def _check_events(text: str, file: str, parser: type = _Base) -> None:
    """Depth, size with aliases expanded, and alias cycles, from the events alone (nothing is built).

    A parser may stop before optkit's limits are reached: libyaml (PyYAML 6.0.4 on) has a nesting
    limit of its own, and its scanner reads far ahead of the events. Then the text up to the end of
    the line it stopped on is read again by PyYAML's pure-Python parser, which keeps no such limit and
    recurses nowhere, so optkit's own refusal (``nested more than 64 levels deep``) comes first whatever
    the library's; a real syntax error is left to the composer, which reports it with its line.
    """
    try:
        loader = parser(text)
    except yaml.YAMLError:
        return  # a character no YAML may hold: the composer reports it, with its line
    open_: list[list] = []  # per open collection: [anchor, values so far]
    sizes: dict[str, int] = {}
    total = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            count = 0
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(open_) == MAX_DEPTH:
                    raise _problem(file, event, f"nested more than {MAX_DEPTH} levels deep")
                open_.append([event.anchor, 1])
                total += 1
                continue
            if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, count = open_.pop()
            elif isinstance(event, yaml.ScalarEvent):
                anchor, count = event.anchor, 1
                total += 1
            elif isinstance(event, yaml.AliasEvent):
                anchor, count = None, _alias_size(file, event, sizes, open_)
                total += count
            else:
                continue
            if anchor is not None:
                sizes[anchor] = count
            if open_:
                open_[-1][1] += count
            if total > MAX_VALUES:
                raise _problem(file, event, f"holds more than {MAX_VALUES:,} values once its aliases are expanded",
                               "write the values out, or use fewer aliases")
    except yaml.YAMLError as exc:
        if parser is not yaml.SafeLoader:
            _check_events(_through_line(text, getattr(exc, "problem_mark", None)), file, yaml.SafeLoader)
        # else the composer reports the syntax error, with its line
    finally:
        loader.dispose()


def _through_line(text: str, mark) -> str:
    """``text`` up to the end of the line of ``mark`` (all of it without a mark)."""
    if mark is None:
        return text
    end = -1
    for _ in range(mark.line + 1):
        end = text.find("\n", end + 1)
        if end < 0:
            return text
    return text[:end + 1]


def _alias_size(file: str, event: yaml.AliasEvent, sizes: dict[str, int], open_: list[list]) -> int:
    if any(anchor == event.anchor for anchor, _ in open_):
        raise _problem(file, event, f"the alias *{event.anchor} is inside the value &{event.anchor} it names "
                       "(a cycle)", "write the value out")
    return sizes.get(event.anchor, 1)  # an undefined alias: the composer reports it


def _problem(file: str, event: yaml.Event, message: str, hint: str = "") -> ValidationFailed:
    return ValidationFailed([Problem(Location(file, event.start_mark.line + 1), message, hint)])


def load_yaml_text(text: str, file: str) -> tuple[Any, LineMap]:
    """Parse one YAML document (once); any problem becomes a ``ValidationFailed`` at its line."""
    _check_events(text, file)
    loader = _Loader(text)
    walk = loader.walk = _Walk(file)
    try:
        node = loader.get_single_node()
        if node is not None:
            walk.node(node, ())
        if walk.duplicates or walk.problems:
            raise ValidationFailed(walk.duplicates + walk.problems)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise ValidationFailed([Problem(Location(file, line), f"invalid YAML: {problem}")]) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ValidationFailed([Problem(Location(file, line), f"invalid YAML: {exc.reason} "
                                        f"(character #x{exc.character:04x})")]) from None
    except yaml.YAMLError as exc:
        raise ValidationFailed([Problem(Location(file), f"invalid YAML: {exc}")]) from None
    finally:
        loader.dispose()
    return data, LineMap(file, walk.lines)


def walk_text(text: str, file: str) -> _Walk | None:
    """The lines (and duplicate keys) of ``text`` read as YAML, or None if it does not read as YAML.

    For JSON files (``optkit.catalog.jsonio``): JSON as optkit and Hugging Face write it is YAML.
    """
    try:
        _check_events(text, file)
        loader = _Base(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except (yaml.YAMLError, ValidationFailed):
        return None
    walk = _Walk(file)
    if node is not None:
        walk.node(node, ())
    return walk


def load_yaml(path: Path, display: str | None = None) -> tuple[Any, LineMap]:
    """Read and parse a YAML file; ``display`` is the name errors use (default: the path)."""
    name = display or str(path)
    return load_yaml_text(read_text(path, name), name)
