"""``optkit lint``: audit a catalog as a whole (like ``spack audit``).

Schema problems come from the loader. Here: references to recipes, kernels and facts that do not
exist, requirement cycles, patch files missing or undeclared, verification claims that the files
cannot back, and two recipes setting one launch setting to different values without a conflict
between them.
"""

from __future__ import annotations

import re
from pathlib import Path

from optkit.catalog.loader import Catalog, load_catalog
from optkit.errors import Location, Problem, ValidationFailed, did_you_mean
from optkit.catalog.factspec import FACTS
from optkit.catalog.enums import VERIFICATION_ORDER, Verification
from optkit.catalog.recipe_records import RecipeRecord

_TEMPLATE = re.compile(r"\$\{([^}]*)\}")


def lint(root: Path | None = None) -> list[Problem]:
    """Every problem in the catalog under ``root`` (default: the shipped one), sorted."""
    try:
        catalog = load_catalog(root)
    except ValidationFailed as exc:
        return exc.problems
    problems: list[Problem] = []
    from optkit.catalog.kernels import lint_kernels

    for check in (_links, _templates, _patches, _kernels, _verification, _settings, _cycles, lint_kernels):
        problems.extend(check(catalog))
    return sorted(problems, key=lambda p: (p.location.file, p.location.line or 0, p.message))


def _links(catalog: Catalog) -> list[Problem]:
    out = []
    for recipe in catalog:
        for field in ("requires", "conflicts"):
            for i, link in enumerate(getattr(recipe, field)):
                names = [(link.recipe, (field, i, "recipe"))]
                names += [(u, (field, i, "unless", j)) for j, u in enumerate(link.unless)]
                for name, path in names:
                    if name == recipe.id:
                        out.append(Problem(catalog.location(recipe.id, path), f"{field} names the recipe itself"))
                    elif name not in catalog:
                        out.append(Problem(catalog.location(recipe.id, path), f"unknown recipe {name!r}",
                                           did_you_mean(name, catalog.recipes)))
    return out


def _template_facts(value) -> list[str]:
    if isinstance(value, str):
        return _TEMPLATE.findall(value)
    if isinstance(value, dict):
        return [n for v in value.values() for n in _template_facts(v)]
    if isinstance(value, list):
        return [n for v in value for n in _template_facts(v)]
    return []


def _templates(catalog: Catalog) -> list[Problem]:
    out = []
    for recipe in catalog:
        fields = {"additional_config": recipe.additional_config, "compilation_config": recipe.compilation_config,
                  "speculative_config": recipe.speculative_config, "env": [e.value for e in recipe.env],
                  "serve_args": recipe.serve_args}
        for field, value in fields.items():
            for name in _template_facts(value):
                if name not in FACTS:
                    out.append(Problem(catalog.location(recipe.id, (field,)), f"unknown fact ${{{name}}}",
                                       did_you_mean(name, FACTS)))
    return out


def _patches(catalog: Catalog) -> list[Problem]:
    out = []
    for recipe in catalog:
        folder = catalog.folders[recipe.id]
        declared = {p.file for p in recipe.patches}
        for i, patch in enumerate(recipe.patches):
            exists = (folder / patch.file).is_file()
            loc = catalog.location(recipe.id, ("patches", i, "status"))
            if patch.status == "present" and not exists:
                out.append(Problem(loc, f"patch {patch.file} is marked present but the file is missing"))
            elif patch.status == "pending" and exists:
                out.append(Problem(loc, f"patch {patch.file} exists; mark it status: present"))
        for stray in sorted(p.name for p in folder.glob("*.patch") if p.name not in declared):
            out.append(Problem(catalog.location(recipe.id, ("patches",)), f"{stray} is in the folder but not declared"))
    return out


def _kernels(catalog: Catalog) -> list[Problem]:
    out = []
    kernels_dir = catalog.root / "kernels"
    for recipe in catalog:
        for i, kernel in enumerate(recipe.kernels):
            spec = kernels_dir / kernel / "kernel.yaml"
            if not spec.is_file() and recipe.verification.level is not Verification.declared:
                out.append(Problem(catalog.location(recipe.id, ("kernels", i)),
                                   f"kernel spec kernels/{kernel}/kernel.yaml is missing"))
    return out


def _verification(catalog: Catalog) -> list[Problem]:
    out = []
    applies = VERIFICATION_ORDER.index(Verification.applies)
    for recipe in catalog:
        level = VERIFICATION_ORDER.index(recipe.verification.level)
        pending = [p.file for p in recipe.patches if p.status == "pending"]
        if level >= applies and pending:
            out.append(Problem(catalog.location(recipe.id, ("verification", "level")),
                               f"level {recipe.verification.level.value} claims patches that are pending: {', '.join(pending)}"))
        if recipe.verification.level is Verification.hardware_verified and recipe.verification.needs_npu:
            out.append(Problem(catalog.location(recipe.id, ("verification",)),
                               "hardware-verified but needs_npu is true"))
    return out


def _flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    else:
        out[prefix] = value


def _settings_of(recipe: RecipeRecord) -> dict:
    flat: dict = {}
    for field in ("additional_config", "compilation_config", "speculative_config"):
        _flatten(field, getattr(recipe, field), flat)
    for env in recipe.env:
        flat[f"env.{env.name}"] = env.value
    return flat


def _settings(catalog: Catalog) -> list[Problem]:
    out = []
    recipes = list(catalog)
    flats = {r.id: _settings_of(r) for r in recipes}
    linked = {(r.id, l.recipe) for r in recipes for l in r.conflicts}
    for i, a in enumerate(recipes):
        for b in recipes[i + 1:]:
            if (a.id, b.id) in linked or (b.id, a.id) in linked:
                continue
            for key in sorted(set(flats[a.id]) & set(flats[b.id])):
                if flats[a.id][key] != flats[b.id][key]:
                    out.append(Problem(catalog.location(b.id), f"{key} = {flats[b.id][key]!r} but {a.id} sets "
                                       f"{flats[a.id][key]!r}, and no conflict links them"))
    return out


def _cycles(catalog: Catalog) -> list[Problem]:
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(catalog.recipes)
    graph.add_edges_from((r.id, l.recipe) for r in catalog for l in r.requires if l.recipe in catalog)
    out = []
    for cycle in sorted(sorted(c) for c in nx.simple_cycles(graph)):
        first = cycle[0]
        out.append(Problem(catalog.location(first, ("requires",)),
                           "requirement cycle: " + " → ".join(cycle + [first])))
    return out


__all__ = ["lint", "Location"]
