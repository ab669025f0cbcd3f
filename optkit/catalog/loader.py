"""Load the recipe catalog: ``recipes/<id>/recipe.yaml`` (+ patches beside it).

The loader is the one place where pydantic's ``ValidationError`` becomes located problems
(``file:line: field.path: message (did you mean …?)``). What it validated is frozen into records
(``optkit.catalog.frozen``) and kept in the catalog cache, so a warm load imports neither pydantic
nor the schema nor YAML. Cross-recipe checks (unknown ids, cycles, missing patch files) are the
lint pass's job (``optkit.catalog.lint``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optkit.catalog.cache import cached
from optkit.catalog.linemap import LineMap
from optkit.catalog.paths import project_root
from optkit.catalog.recipe_records import RecipeRecord
from optkit.catalog.records import RECORDS_DIR
from optkit.errors import Location, Problem, ValidationFailed, did_you_mean
from optkit.value import field, valueclass

if TYPE_CHECKING:  # validation, on a cache miss only, imports pydantic
    from pydantic import BaseModel, ValidationError

RECIPE_FILE = "recipe.yaml"


@valueclass
class Catalog:
    """All recipes, by id (sorted), with the folder each came from."""

    root: Path
    recipes: dict[str, RecipeRecord] = field(default_factory=dict)
    folders: dict[str, Path] = field(default_factory=dict)
    lines: dict[str, LineMap] = field(default_factory=dict)
    origins: dict[str, Path] = field(default_factory=dict)  # recipe id → the --catalog folder it came from
    extra: list[Path] = field(default_factory=list)  # the --catalog folders, in the order given

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
        elif err["type"] == "model_type":  # pydantic names the class ("instance of LockPatch"): say what is wanted
            message = f"expected a mapping of fields, got {_json_type(err['input'])}"
        problems.append((loc, err["type"], Problem(lines.location(loc), message, hint)))
    return [p for loc, kind, p in problems if not (kind == "missing" and loc in typo_targets)]


def _json_type(value: Any) -> str:
    """``value``'s kind in the words of YAML and JSON files."""
    if value is None:
        return "null"
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "a mapping"}
    return next((word for kind, word in kinds.items() if isinstance(value, kind)), type(value).__name__)


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
    """Validate one ``recipe.yaml`` (its ``id`` must equal its folder name, its patches be files in
    the folder); the recipe as a record."""
    from optkit.catalog.frozen import freeze
    from optkit.catalog.schema import RECORDS, Recipe
    from optkit.catalog.yamlio import load_yaml

    data, lines = load_yaml(folder / RECIPE_FILE, display)
    recipe = freeze(parse_model(Recipe, data, lines), RECORDS)
    if recipe.id != folder.name:
        raise ValidationFailed([Problem(lines.location(("id",)),
                                        f"id {recipe.id!r} differs from its folder name {folder.name!r}",
                                        "rename one of them")])
    linked = [Problem(lines.location(("patches", i, "file")),
                      f"{patch.file} is a symlink (to {os.readlink(folder / patch.file)!r}); a recipe's "
                      "patches are files in its own folder, copied into bundles as they are",
                      "put the patch itself in the folder")
              for i, patch in enumerate(recipe.patches) if (folder / patch.file).is_symlink()]
    if linked:
        raise ValidationFailed(linked)
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


def _validate_entries(base: Path, folder: str, filename: str, load_one, skip=()) -> tuple[dict, dict, dict]:
    """(entries, folder names, line maps) by id, each file parsed and validated (the folders ``skip``
    hold something else)."""
    entries, names, lines, problems = {}, {}, {}, []
    subs = sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")
                  and p.name not in skip) if base.is_dir() else []
    for sub in subs:
        display = f"{folder}/{sub.name}/{filename}"
        linked = next((p for p in (sub, sub / filename) if p.is_symlink()), None)
        if linked is not None:
            problems.append(Problem(Location(display), f"{folder}/{linked.relative_to(base).as_posix()} is a "
                                    f"symlink (to {os.readlink(linked)!r}); the catalog's folders and files are "
                                    "its own", "copy it in instead of linking"))
            continue
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


def load_catalog(root: Path | None = None, extra=()) -> Catalog:
    """Load every recipe under ``root/recipes``, then each folder of ``extra`` (``--catalog DIR``:
    recipe folders like ``recipes/``; its ``verified/`` holds records, read by ``load_records``)
    layered over it with the same loader and errors. A layered id that a shipped recipe has is an
    error unless it says ``replaces_shipped: true``; one id in two extra folders is always an error.
    All problems of all files are reported together."""
    root = root or project_root()
    if not (root / "recipes").is_dir():
        raise ValidationFailed([Problem(Location(str(root / "recipes")), "no recipes/ folder here")])
    recipes, folders, lines = load_entries(root, "recipes", RECIPE_FILE, load_recipe)
    catalog = Catalog(root, dict(recipes), folders, dict(lines), extra=[Path(d) for d in extra])
    problems = []
    for folder in catalog.extra:
        problems += _layer(catalog, folder, shipped=recipes)
    if problems:
        raise ValidationFailed(problems)
    catalog.recipes = dict(sorted(catalog.recipes.items()))
    return catalog


def _layer(catalog: Catalog, folder: Path, shipped: dict) -> list[Problem]:
    """Add the recipes of one ``--catalog`` folder to ``catalog``; the problems that stop it."""
    if not folder.is_dir():
        return [Problem(Location(str(folder)), "catalog folder not found (--catalog / OPTKIT_CATALOG_PATH)")]
    if (folder / "recipes").is_dir() and not (folder / RECIPE_FILE).exists():
        return [Problem(Location(str(folder)), "a catalog root (it holds recipes/), not a folder of recipe folders",
                        f"--catalog takes the recipe folders: give {folder / 'recipes'}; `optkit lint {folder}` "
                        "checks the root on its own")]
    try:
        # its verified/ holds the user's measurement records (optkit.catalog.records), not a recipe
        entries, names, lines = _validate_entries(folder, str(folder), RECIPE_FILE, load_recipe, skip=(RECORDS_DIR,))
    except ValidationFailed as exc:
        return exc.problems
    problems = []
    for rid, recipe in entries.items():
        where = lines[rid].location(("id",))
        if rid in catalog.origins:
            problems.append(Problem(where, f"recipe {rid!r} is also in the catalog {catalog.origins[rid]}",
                                    "an id may come from one --catalog folder only"))
        elif rid in shipped and not recipe.replaces_shipped:
            problems.append(Problem(where, f"recipe {rid!r} is a shipped recipe (recipes/{rid})",
                                    "rename yours, or set replaces_shipped: true to plan with it instead"))
        elif recipe.replaces_shipped and rid not in shipped:
            problems.append(Problem(lines[rid].location(("replaces_shipped",)),
                                    f"replaces_shipped is true but no shipped recipe is called {rid!r}",
                                    did_you_mean(rid, shipped) or "remove replaces_shipped"))
        else:
            catalog.recipes[rid], catalog.lines[rid] = recipe, lines[rid]
            catalog.folders[rid], catalog.origins[rid] = folder / names[rid], folder
    return problems
