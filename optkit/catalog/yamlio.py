"""Read YAML with line numbers, so every error can name ``file:line: field.path``.

``load_yaml`` returns the plain data plus a ``LineMap`` from field paths (tuples of keys and
indices, as pydantic reports them in ``ValidationError.errors()[i]["loc"]``) to 1-based lines.
Only the safe loader is used (libyaml's when available): tags that build Python objects are rejected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from optkit.catalog.linemap import LineMap, PathKey
from optkit.errors import Location, Problem, ValidationFailed


def _walk(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk_value(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, path + (index,), lines)


def _walk_value(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> None:
    # The key's own line stays the reference for the field; children get theirs.
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        saved = lines[path]
        _walk(node, path, lines)
        lines[path] = saved


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it: same marks, faster


def load_yaml_text(text: str, file: str) -> tuple[Any, LineMap]:
    """Parse one YAML document (once); a syntax error becomes a ``ValidationFailed`` at its line."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise ValidationFailed([Problem(Location(file, line), f"invalid YAML: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise ValidationFailed([Problem(Location(file), f"invalid YAML: {exc}")]) from None
    finally:
        loader.dispose()
    lines = LineMap(file)
    if node is not None:
        _walk(node, (), lines.lines)
    return data, lines


def load_yaml(path: Path, display: str | None = None) -> tuple[Any, LineMap]:
    """Read and parse a YAML file; ``display`` is the name errors use (default: the path)."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationFailed([Problem(Location(name), f"cannot read: {exc.strerror}")]) from None
    return load_yaml_text(text, name)
