"""Writing a port into the catalog (``optkit port --write``): each ``write`` action's new patch
files and its located ``recipe.yaml`` edit (``optkit.versions.recipe_edit``: read back, loaded and
linted, undone on failure), the worksheets of patches a person has to finish (``.conflict``) and of
patches whose new callers a person has to read (``.review``)."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from packaging.version import Version

from optkit.catalog.loader import Catalog
from optkit.versions.port import PatchPort, PortReport, RecipePort
from optkit.versions.probes import declared_entry

CONFLICT_DIR = "port-conflicts"
KINDS = ("conflict", "review")
"""Worksheet kinds: a patch to finish by hand (needs-hand), new callers to read (needs-review)."""


def write_port(catalog: Catalog, report: PortReport) -> PortReport:
    """Write the report into the catalog: each ``write`` action's new patch files and its recipe.yaml
    edit (checked: a recipe that fails to load or lint afterwards is put back), the worksheets of
    the patches of ``needs-hand`` and ``needs-review`` recipes, and the removal of worksheets for
    ``--to`` that no longer apply. ``report.written`` lists what changed."""
    date = _dt.date.fromisoformat(report.date)
    for rp in report.recipes:
        folder = catalog.folders[rp.recipe]
        if rp.action == "write":
            report.written += [_shown(catalog, rp.recipe, p) for p in _write_recipe(catalog, rp, date)]
        report.written += [_shown(catalog, rp.recipe, p) for p in _worksheets(folder, rp)]
    report.written.sort()
    return report


def _shown(catalog: Catalog, recipe_id: str, path: Path) -> str:
    root = catalog.origins.get(recipe_id, catalog.root / "recipes")
    prefix = "recipes/" if recipe_id not in catalog.origins else f"{root}/"
    return prefix + path.relative_to(root).as_posix()


def _write_recipe(catalog: Catalog, rp: RecipePort, date: _dt.date) -> list[Path]:
    from optkit.catalog.lint import lint
    from optkit.catalog.loader import RECIPE_FILE, load_recipe
    from optkit.versions.recipe_edit import Declaration, Piece, edited_text, write_checked

    recipe, folder = catalog[rp.recipe], catalog.folders[rp.recipe]
    declared = declared_entry(recipe, Version(rp.target))
    entry_f = declared_entry(recipe, Version(rp.source))
    index = next(i for i, e in enumerate(recipe.releases) if e is declared)
    before, run, after = rp.split

    def side(spec: str, name: str) -> Piece:
        drop = declared.patches and rp.keeps_patches != name
        return Piece(spec, [] if drop else None, [] if drop else None)

    pieces = ([side(before, "before")] if before else []) + \
        [Piece(run, [n.name for n in rp.new_patches], list(entry_f.adds))] + ([side(after, "after")] if after else [])
    declarations = [Declaration(n.source, n.name, n.description, date, list(n.targets)) for n in rp.new_patches]
    origin = catalog.origins.get(recipe.id)
    display = f"{origin}/{recipe.id}/{RECIPE_FILE}" if origin else f"recipes/{recipe.id}/{RECIPE_FILE}"
    text = edited_text((folder / RECIPE_FILE).read_text(encoding="utf-8"), display, index, pieces, declarations)
    lint_root = origin if origin else catalog.root
    known = {str(p) for p in lint(lint_root)}

    def check() -> list:
        load_recipe(folder, display)
        return [p for p in lint(lint_root) if str(p) not in known]

    return write_checked(folder, text, {n.name: n.text for n in rp.new_patches}, check)


def worksheet_path(folder: Path, patch: str, target: str, kind: str = "conflict") -> Path:
    """Where the worksheet (``kind``: conflict or review) of ``patch`` ported to ``target`` goes: beside the recipe."""
    return folder / CONFLICT_DIR / f"{patch.removesuffix('.patch')}-{target}.{kind}"


def _worksheet(rp: RecipePort, p: PatchPort) -> tuple[str, str] | None:
    """(kind, text) of the worksheet ``p`` needs, if any."""
    if rp.action == "needs-hand" and p.worksheet:
        return "conflict", (
            f"# optkit port: {p.patch} of recipe {rp.recipe}, from {rp.source} onto {rp.target}: {p.outcome}.\n"
            f"# Finish it by hand (docs/port.md): make the change in a copy of the {rp.target} tree "
            f"(`optkit tree fetch {rp.target} DEST`),\n# write the patch for its release range, declare it, "
            "and run `optkit port` again. The regions below come from the three-way merge.\n" + p.worksheet)
    if rp.action == "needs-review" and p.needs_review:
        r = p.review
        lines = [f"# optkit port: {p.patch} of recipe {rp.recipe}, from {rp.source} onto {rp.target}: {p.outcome}, "
                 "and the code it changes has new callers.",
                 f"# Read each caller in the {rp.target} tree: does it rely on what the patch changes (a return "
                 "value, an in-place write,",
                 f"# a signature)? If not, `optkit port {rp.recipe} --to {rp.target} --write --reviewed {rp.recipe}`; "
                 "if so, write the patch by hand (docs/port.md).",
                 f"# changed: {', '.join(r.changed)}", "# new callers:",
                 *(f"#   {c.words()} → {c.changed}" for c in r.callers),
                 *([f"#   and {r.more} more"] if r.more else []),
                 *(f"# not searched: {why}" for why in r.not_searched),
                 "# The refreshed patch it would write:", ""]
        return "review", "\n".join(lines) + p.refreshed
    return None


def _worksheets(folder: Path, rp: RecipePort) -> list[Path]:
    changed = []
    for p in rp.patches:
        wanted = _worksheet(rp, p)
        for kind in KINDS:
            path = worksheet_path(folder, p.patch, rp.target, kind)
            if wanted is not None and wanted[0] == kind:
                if not path.is_file() or path.read_text(encoding="utf-8", errors="surrogateescape") != wanted[1]:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(wanted[1], encoding="utf-8", errors="surrogateescape")
                    changed.append(path)
            elif path.is_file():
                path.unlink()
                changed.append(path)
                if not any(path.parent.iterdir()):
                    path.parent.rmdir()
    return changed
