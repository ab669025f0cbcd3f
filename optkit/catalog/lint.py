"""``optkit lint``: audit a catalog as a whole (like ``spack audit``).

Schema problems come from the loader. Here: references to recipes, kernels and facts that do not
exist, requirement cycles, patch files missing or undeclared, verification claims that the files
cannot back, recipes that change the launch without an accuracy claim, refused measurement records
(verified/), two recipes setting one launch setting to different values without a conflict
between them, and profile signatures that cannot match (releases outside the recipe's range, the
same ops named twice for one release).
"""

from __future__ import annotations

import re
from pathlib import Path

from optkit.catalog.loader import Catalog, load_catalog
from optkit.errors import Location, Problem, ValidationFailed, did_you_mean
from optkit.catalog.factspec import FACTS, unknown_fact_hint
from optkit.catalog.conditions import compiled
from optkit.catalog.enums import VERIFICATION_ORDER, Verification
from optkit.catalog.patchfile import path_problem, patch_paths
from optkit.catalog.recipe_records import RecipeRecord

_TEMPLATE = re.compile(r"\$\{([^}]*)\}")
PROFILE_NAME_FACTS = ("model.id", "model.family")
"""Facts that name a profile, not an architecture: a rule on them skips a user's checkpoint of the
same architecture (derived from its config.json, family 'custom'), so conditions may not read them."""


def lint(root: Path | None = None) -> list[Problem]:
    """Every problem in the catalog under ``root`` (default: the shipped one), sorted.

    ``root`` is a catalog root (it has ``recipes/``), or a folder of recipe folders as ``--catalog``
    takes it, audited layered over the shipped catalog (its links may name shipped recipes).
    """
    try:
        catalog = lint_catalog(root)
    except ValidationFailed as exc:
        return exc.problems
    problems: list[Problem] = []
    from optkit.catalog.kernels import lint_kernels

    for check in (_links, _templates, _profile_names, _patches, _upstream_files, _kernels, _verification, _accuracy,
                  _settings, _cycles, lint_kernels, _records, _signatures):
        problems.extend(check(catalog))
    return sorted(problems, key=lambda p: (p.location.file, p.location.line or 0, p.message))


def lint_catalog(root: Path | None = None) -> Catalog:
    """The catalog ``lint(root)`` audits: the shipped one, a catalog root, or a folder of recipe folders
    layered over the shipped catalog."""
    layered = root is not None and not (Path(root) / "recipes").is_dir()
    return load_catalog(None, [root]) if layered else load_catalog(root)


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
                                       unknown_fact_hint(name)))
    return out


def conditions(recipe: RecipeRecord):
    """``(field path, condition text)`` of every condition in ``recipe``."""
    if recipe.implied_by:
        yield ("implied_by",), recipe.implied_by
    for field in ("preconditions", "effective_when", "requires", "conflicts", "risks", "signatures", "choices"):
        for index, entry in enumerate(getattr(recipe, field)):
            if entry.when:
                yield (field, index, "when"), entry.when
    for index, patch in enumerate(recipe.patches):
        for risk_index, risk in enumerate(patch.risks or ()):
            if risk.when:
                yield ("patches", index, "risks", risk_index, "when"), risk.when


def _profile_names(catalog: Catalog) -> list[Problem]:
    out = []
    for recipe in catalog:
        for path, text in conditions(recipe):
            named = [n for n in compiled(text).fact_names() if n in PROFILE_NAME_FACTS]
            if named:
                out.append(Problem(catalog.location(recipe.id, path),
                                   f"condition reads {', '.join(named)}, a profile's name, not its architecture",
                                   "key the rule on the facts that cause it (model.hf_model_type, "
                                   "model.text_model_type, model.gdn_layers, model.is_moe, model.mtp_head, …)"))
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
            elif exists:
                out += _touched(catalog, recipe, i)
        for stray in sorted(p.name for p in folder.glob("*.patch") if p.name not in declared):
            out.append(Problem(catalog.location(recipe.id, ("patches",)), f"{stray} is in the folder but not declared"))
    return out


UPSTREAM_DIR = "upstream"
"""Files a recipe ships for upstream (``optkit export``): ``upstream/<patch file stem>/<path in the tree>``,
e.g. the unit test, in upstream's ``tests/ut`` layout, of the code that patch adds. Data, never run by optkit."""


def _upstream_files(catalog: Catalog) -> list[Problem]:
    """Each folder of ``upstream/`` is named after a declared patch; its files are tests at safe tree
    paths, and Python ones parse."""
    import ast

    out = []
    for recipe in catalog:
        root = catalog.folders[recipe.id] / UPSTREAM_DIR
        if not root.is_dir():
            continue
        shown = Path(catalog.location(recipe.id).file).parent / UPSTREAM_DIR
        stems = {Path(p.file).stem for p in recipe.patches}
        for entry in sorted(root.iterdir()):
            if not entry.is_dir() or entry.name not in stems:
                out.append(Problem(Location(str(shown / entry.name)), "is not named after a patch of the recipe",
                                   f"name it after the patch whose code its files test: {', '.join(sorted(stems))}"))
                continue
            for path in sorted(p for p in entry.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
                rel = path.relative_to(entry).as_posix()
                where = Location(str(shown / entry.name / rel))
                why = path_problem(rel) or ("" if rel.startswith("tests/") else "is not under tests/")
                if why:
                    out.append(Problem(where, why, "upstream files are unit tests at their path in the tree"))
                elif path.suffix == ".py":
                    try:
                        ast.parse(path.read_text(encoding="utf-8"), str(path))
                    except (SyntaxError, UnicodeDecodeError) as exc:
                        line = getattr(exc, "lineno", None)
                        out.append(Problem(Location(where.file, line), f"does not parse: {getattr(exc, 'msg', exc)}"))
    return out


def _touched(catalog: Catalog, recipe: RecipeRecord, index: int) -> list[Problem]:
    """The files the diff touches must be the declared targets, each inside the tree."""
    patch = recipe.patches[index]
    text = catalog.patch_path(recipe.id, patch.file).read_bytes().decode("utf-8", "surrogateescape")
    touched = patch_paths(text)
    loc = catalog.location(recipe.id, ("patches", index, "targets"))
    out = [Problem(loc, f"{patch.file} touches {rel!r}: {why}") for rel in touched for why in [path_problem(rel)] if why]
    if not out and sorted(set(touched)) != sorted(set(patch.targets)):
        out.append(Problem(loc, f"{patch.file} touches {touched}, but targets lists {list(patch.targets)}"))
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
    return out


def _accuracy(catalog: Catalog) -> list[Problem]:
    """A recipe that changes what the server runs states what it does to the outputs (the ladder gates it)."""
    return [Problem(catalog.location(r.id), "changes what the server runs but makes no accuracy claim",
                    "add `accuracy:` with check greedy-identical, or tolerance and a margin")
            for r in catalog if r.changes_launch and r.accuracy is None]


def _signatures(catalog: Catalog) -> list[Problem]:
    """Profile signatures (``optkit profile``) that cannot match: releases outside the recipe's own range
    (among the releases in versions/), or the same ops named twice for one release."""
    from optkit.catalog.specifiers import contains

    known = sorted(p.stem for p in (catalog.root / "versions").glob("*.yaml") if p.stem[:1].isdigit())
    out = []
    for recipe in catalog:
        mine = [v for v in known if contains(recipe.versions.vllm_ascend, v)]
        seen: dict[tuple, int] = {}
        for index, sig in enumerate(recipe.signatures):
            where = catalog.location(recipe.id, ("signatures", index, "versions"))
            releases = [v for v in mine if contains(sig.versions, v)]
            if mine and not releases:
                out.append(Problem(where, f"{sig.versions!r} holds none of the releases the recipe applies to "
                                          f"({recipe.versions.vllm_ascend})", "widen it, or drop the signature"))
            for v in releases:
                key = (sig.what, sig.name, sig.type, sig.input_dim, v)
                if key in seen:
                    out.append(Problem(where, f"names the same ops as signatures[{seen[key]}] on {v}",
                                       "give each release range its own signature"))
                    break
                seen[key] = index
    return out


def _records(catalog: Catalog) -> list[Problem]:
    """Measurement records in verified/ that are refused (edited, stale, or naming unknown recipes)."""
    from optkit.catalog.records import load_records

    return [Problem(Location(r.file), (f"recipes.{r.recipe}: " if r.recipe else "") + r.reason)
            for r in load_records(catalog.root, catalog).refused]


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
    for entry in recipe.derived:  # a computed value: two recipes deriving one key need a conflict between them
        kind, _, key = entry.set.partition(":")
        flat[f"{kind}.{key}"] = f"<derived by {recipe.id}>"
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
