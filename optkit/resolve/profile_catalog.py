"""The model and target catalogs (``models/*.yaml``, ``targets/*.yaml``) as records, and lookup.

Each file is validated by its pydantic model (``optkit.resolve.profiles``, imported only when the
catalog cache misses) and frozen into a record (``optkit.resolve.profile_records``); names (ids
and aliases) must be unique across a catalog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optkit.catalog.cache import cached
from optkit.catalog.frozen import Record
from optkit.catalog.linemap import LineMap
from optkit.errors import Location, Problem, UnknownName, ValidationFailed, close_matches
from optkit.resolve.profile_records import ModelProfileRecord, TargetRecord

# What validates model and target files, besides optkit/catalog/.
_CODE = ("resolve/profiles.py", "resolve/profile_records.py", "resolve/profile_catalog.py")


def load_models(directory: Path) -> dict[str, ModelProfileRecord]:
    """Every ``*.yaml`` in ``directory`` as a model profile, keyed by id."""
    return _load_catalog(directory, "ModelProfile", "model")


def load_targets(directory: Path) -> dict[str, TargetRecord]:
    """Every ``*.yaml`` in ``directory`` as a target, keyed by id."""
    return _load_catalog(directory, "Target", "target")


def find_model(models: dict[str, ModelProfileRecord], name: str) -> ModelProfileRecord:
    """The model ``name`` names (``find_checkpoint``): its id, an alias, its Hugging Face id (``Qwen/Qwen3.5-35B-A3B``,
    the MODEL a bundle's serve.sh defaults to) or a published checkpoint's id; ``UnknownName`` otherwise."""
    return find_checkpoint(models, name)[0]


def find_checkpoint(models: dict[str, ModelProfileRecord], name: str) -> tuple[ModelProfileRecord, Record | None]:
    """The model ``name`` names (case-insensitive) and, when ``name`` is the id of one of its published checkpoints
    (``Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp``, a tutorial's weight table), that checkpoint (the frozen record of a
    ``profiles.Checkpoint``: id, quantization, source); None for an id, an alias or a Hugging Face id that no
    checkpoint carries. ``UnknownName`` lists the close matches among every name of every model."""
    wanted = name.lower()
    for entry in models.values():
        if wanted in entry.names():
            return entry, None
    for entry in models.values():
        for checkpoint in entry.checkpoints:
            if checkpoint.id.lower() == wanted:
                return entry, checkpoint
        if entry.hf_id and entry.hf_id.lower() == wanted:
            return entry, None
    raise _unknown_model(models, name)


def _unknown_model(models: dict[str, ModelProfileRecord], name: str) -> UnknownName:
    """The error for a name no model has: its close matches among every name (ids, aliases, Hub ids), or, when
    none is close, the catalog's ids and aliases (not its long list of checkpoint ids)."""
    every_name = sorted({n for entry in models.values() for n in _all_names(entry)})
    if close_matches(name, every_name, 1):
        return UnknownName("model", name, every_name)
    return UnknownName("model", name, sorted(n for entry in models.values() for n in entry.names()))


def _all_names(entry: ModelProfileRecord) -> list[str]:
    """Every name MODEL may give for ``entry``: id, aliases, Hugging Face id, checkpoint ids."""
    return [*entry.names(), *([entry.hf_id] if entry.hf_id else []), *(c.id for c in entry.checkpoints)]


def find_target(targets: dict[str, TargetRecord], name: str) -> TargetRecord:
    """The target whose id or alias is ``name`` (case-insensitive); ``UnknownName`` otherwise."""
    return _find(targets, name, "target")


def _find(entries: dict, name: str, kind: str):
    wanted = name.lower()
    for entry in entries.values():
        if wanted in entry.names():
            return entry
    raise UnknownName(kind, name, sorted(n for entry in entries.values() for n in entry.names()))


def _load_catalog(directory: Path, schema: str, kind: str) -> dict:
    if not directory.is_dir():
        raise ValidationFailed([Problem(Location(str(directory)), f"{kind} catalog directory not found")])
    return cached(f"{kind}s", directory, lambda: _validate_catalog(directory, schema, kind), code=_CODE)


def _validate_catalog(directory: Path, schema: str, kind: str) -> dict:
    entries: dict[str, tuple[Any, LineMap]] = {}
    problems: list[Problem] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            entry, lines = _load_entry(path, schema)
        except ValidationFailed as exc:
            problems.extend(exc.problems)
            continue
        problems.extend(_duplicate_names(entry, lines, entries, kind))
        if kind == "model":
            problems.extend(_duplicate_hub_ids(entry, lines, entries))
        entries.setdefault(entry.id, (entry, lines))
    if problems:
        raise ValidationFailed(problems)
    return {entry_id: entry for entry_id, (entry, _) in entries.items()}


def _load_entry(path: Path, schema: str) -> tuple[Any, LineMap]:
    from optkit.catalog.frozen import freeze
    from optkit.catalog.loader import parse_model
    from optkit.catalog.yamlio import load_yaml
    from optkit.resolve import profiles

    data, lines = load_yaml(path)
    return freeze(parse_model(getattr(profiles, schema), data, lines), profiles.RECORDS), lines


def _duplicate_names(entry: Any, lines: LineMap, seen: dict, kind: str) -> list[Problem]:
    """Names of ``entry`` already taken by an entry in ``seen`` (or earlier in ``entry`` itself)."""
    taken = {name: (other, other_lines) for other, other_lines in seen.values() for name in other.names()}
    problems = []
    for index, name in enumerate(entry.names()):
        if name in taken:
            other, other_lines = taken[name]
            where = other_lines.location(_name_loc(other, other.names().index(name)))
            message = f"{kind} name {name!r} is already used by {kind} {other.id!r} in {where.file}:{where.line}"
            hint = "names must be unique across the catalog"
            problems.append(Problem(lines.location(_name_loc(entry, index)), message, hint))
        taken[name] = (entry, lines)
    return problems


def _duplicate_hub_ids(entry: Any, lines: LineMap, seen: dict) -> list[Problem]:
    """Hugging Face and checkpoint ids of ``entry`` that name another model already in ``seen``: MODEL given as a
    Hub id must find one profile."""
    taken = {name.lower(): (other, other_lines) for other, other_lines in seen.values() for name in _all_names(other)}
    hub_ids = [(("hf_id",), entry.hf_id)] if entry.hf_id else []
    hub_ids += [(("checkpoints", index, "id"), c.id) for index, c in enumerate(entry.checkpoints)]
    problems = []
    for loc, hub_id in hub_ids:
        if hub_id.lower() in taken:
            other, other_lines = taken[hub_id.lower()]
            where = other_lines.location(("id",))
            message = f"{hub_id!r} already names model {other.id!r} ({where.file}:{where.line})"
            problems.append(Problem(lines.location(loc), message, "a Hub id must name one model of the catalog"))
    return problems


def _name_loc(entry: Any, index: int) -> tuple:
    """Field path of ``entry.names()[index]``: the id, then the aliases."""
    return ("id",) if index == 0 else ("aliases", index - 1)
