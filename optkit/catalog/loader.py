"""Load the recipe catalog: ``recipes/<id>/recipe.yaml`` (+ patches beside it).

The loader is the one place where pydantic's ``ValidationError`` becomes located problems
(``file:line: field.path: message (did you mean …?)``). What it validated is frozen into records
(``optkit.catalog.frozen``) and kept in the catalog cache, so a warm load imports neither pydantic
nor the schema nor YAML. Cross-recipe checks (unknown ids, cycles, missing patch files) are the
lint pass's job (``optkit.catalog.lint``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optkit.catalog.cache import cached
from optkit.catalog.linemap import LineMap
from optkit.catalog.paths import project_root
from optkit.catalog.recipe_records import RecipeRecord
from optkit.errors import Location, Problem, ValidationFailed, did_you_mean

if TYPE_CHECKING:  # validation, on a cache miss only, imports pydantic
    from pydantic import BaseModel, ValidationError

RECIPE_FILE = "recipe.yaml"


@dataclass
class Catalog:
    """All recipes, by id (sorted), with the folder each came from."""

    root: Path
    recipes: dict[str, RecipeRecord] = field(default_factory=dict)
    folders: dict[str, Path] = field(default_factory=dict)
    lines: dict[str, LineMap] = field(default_factory=dict)

    def __getitem__(self, recipe_id: str) -> RecipeRecord:
        return self.recipes[recipe_id]

    def __contains__(self, recipe_id: str) -> bool:
        return recipe_id in self.recipes

    def __iter__(self):
        return iter(self.recipes.values())

    def __len__(self) -> int:
        return len(self.recipes)

    def patch_path(self, recipe_id: str, file: str) -> Path:
        return self.folders[recipe_id] / file

    def location(self, recipe_id: str, path: tuple = ()) -> Location:
        return self.lines[recipe_id].location(path)


def validation_problems(exc: ValidationError, lines: LineMap, model: type[BaseModel]) -> list[Problem]:
    """Turn pydantic errors into located problems, with did-you-mean for near-miss keys.

    A misspelt key yields one problem, not two: the "missing field" error of the field it was
    meant to be is dropped when an unknown key at the same level is a near miss of it.
    """
    errors = exc.errors()
    typo_targets = set()
    problems = []
    for err in errors:
        loc = tuple(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        hint = ""
        if err["type"] == "extra_forbidden":
            message = f"unknown field {loc[-1]!r}"
            hint = did_you_mean(str(loc[-1]), _field_names(model, loc[:-1]))
            if hint:
                typo_targets.add(loc[:-1] + (hint.split("'")[1],))
        elif err["type"] == "missing":
            message = f"missing required field {loc[-1]!r}"
        problems.append((loc, err["type"], Problem(lines.location(loc), message, hint)))
    return [p for loc, kind, p in problems if not (kind == "missing" and loc in typo_targets)]


def _field_names(model: type[BaseModel], path: tuple) -> list[str]:
    """Field names of the (nested) model at ``path``, for did-you-mean."""
    from pydantic import BaseModel

    current: Any = model
    for part in path:
        if isinstance(part, int) or not isinstance(current, type) or not issubclass(current, BaseModel):
            continue
        info = current.model_fields.get(part)
        if info is None:
            return []
        current = _inner_model(info.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _inner_model(annotation: Any) -> Any:
    from pydantic import BaseModel

    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return annotation


def expect_mapping(data: Any, lines: LineMap) -> None:
    """A document's top level must be a mapping of fields; else one problem at its start."""
    if not isinstance(data, dict):
        raise ValidationFailed([Problem(lines.location(()), "expected a mapping of fields at the top level")])


def parse_model(model: type[BaseModel], data: Any, lines: LineMap) -> BaseModel:
    """Validate ``data`` as ``model``; problems are located through ``lines``."""
    from pydantic import ValidationError

    expect_mapping(data, lines)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValidationFailed(validation_problems(exc, lines, model)) from None


def load_recipe(folder: Path, display: str) -> tuple[RecipeRecord, LineMap]:
    """Validate one ``recipe.yaml`` (its ``id`` must equal its folder name); the recipe as a record."""
    from optkit.catalog.frozen import freeze
    from optkit.catalog.schema import RECORDS, Recipe
    from optkit.catalog.yamlio import load_yaml

    data, lines = load_yaml(folder / RECIPE_FILE, display)
    recipe = freeze(parse_model(Recipe, data, lines), RECORDS)
    if recipe.id != folder.name:
        raise ValidationFailed([Problem(lines.location(("id",)),
                                        f"id {recipe.id!r} differs from its folder name {folder.name!r}",
                                        "rename one of them")])
    return recipe, lines


def load_entries(root: Path, folder: str, filename: str, load_one) -> tuple[dict, dict, dict]:
    """Load ``root/folder/<id>/filename`` for every id with ``load_one(path, display)``.

    Returns (entries, folders, line maps) keyed by id; all problems of all files are reported
    together as one ``ValidationFailed``. A successful load is kept in the catalog cache
    (``optkit.catalog.cache``), keyed by the content of ``root/folder``.
    """
    base = root / folder
    entries, names, lines = cached(folder, base, lambda: _validate_entries(base, folder, filename, load_one))
    return entries, {entry_id: base / name for entry_id, name in names.items()}, lines


def _validate_entries(base: Path, folder: str, filename: str, load_one) -> tuple[dict, dict, dict]:
    """(entries, folder names, line maps) by id, each file parsed and validated."""
    entries, names, lines, problems = {}, {}, {}, []
    for sub in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
        display = f"{folder}/{sub.name}/{filename}"
        if not (sub / filename).is_file():
            problems.append(Problem(Location(f"{folder}/{sub.name}"), f"no {filename} in this folder"))
            continue
        try:
            entry, line_map = load_one(sub, display)
        except ValidationFailed as exc:
            problems.extend(exc.problems)
            continue
        entries[entry.id], names[entry.id], lines[entry.id] = entry, sub.name, line_map
    if problems:
        raise ValidationFailed(problems)
    return entries, names, lines


def load_catalog(root: Path | None = None) -> Catalog:
    """Load every recipe under ``root/recipes``; all problems of all files are reported together."""
    root = root or project_root()
    if not (root / "recipes").is_dir():
        raise ValidationFailed([Problem(Location(str(root / "recipes")), "no recipes/ folder here")])
    recipes, folders, lines = load_entries(root, "recipes", RECIPE_FILE, load_recipe)
    return Catalog(root, recipes, folders, lines)
