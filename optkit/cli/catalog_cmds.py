"""``optkit models``, ``recipes``, ``show``, ``lint``, ``schema``, ``docs``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from optkit.cli.options import catalog_dirs, catalog_option
from optkit.errors import UnknownName


@click.command("models")
@click.argument("model", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def models_command(model, as_json):
    """The model profiles a plan accepts: id, the other names MODEL may be (aliases, the Hugging Face id, any
    published checkpoint's id), the architecture the recipes' preconditions read, the upstream tutorial pages
    about it and its checkpoints' weight formats. With MODEL: that one profile, each checkpoint with its source.
    A model not listed: --model-config its config.json."""
    from optkit.catalog.paths import project_root
    from optkit.resolve.profile_catalog import find_model, load_models

    models = load_models(project_root() / "models")
    chosen = [find_model(models, model)] if model else [models[mid] for mid in sorted(models)]
    rows = [_model_row(entry) for entry in chosen]
    if as_json:
        click.echo(json.dumps(rows if not model else rows[0], indent=2, ensure_ascii=False))
        return
    from optkit.cli.render import show

    show(_checkpoints_table(rows[0]) if model else _models_table(rows))


def _models_table(rows: list[dict]) -> list:
    from optkit.cli.table import Table

    table = Table(f"{len(rows)} models (MODEL may be any of its names, its Hugging Face id or a checkpoint's id)",
                  ["id", "Hugging Face id", "aliases", "architecture", "tutorials", "checkpoints"])
    for row in rows:
        formats = sorted({checkpoint["quantization"] for checkpoint in row["checkpoints"]})
        table.add_row(row["id"], row["hf_id"] or "—", ", ".join(row["aliases"]) or "—", _architecture(row),
                      ", ".join(row["tutorials"]) or "—", ", ".join(formats) or "—")
    return [table, "a model not listed: optkit plan --model-config path/to/config.json (its Hugging Face config); "
                   "one model's checkpoints: optkit models MODEL"]


def _architecture(row: dict) -> str:
    mtp = {None: "MTP unknown", 0: "no MTP"}.get(row["mtp_layers"], f"MTP {row['mtp_layers']}")
    return f"{row['layers']} layers; {row['moe']}; {mtp}" + ("; vision" if row["vision"] else "")


def _checkpoints_table(row: dict) -> list:
    from optkit.cli.table import Table

    heading = (f"{row['id']} ({row['hf_id'] or 'no Hugging Face id'}): {_architecture(row)}; tutorials: "
               f"{', '.join(row['tutorials']) or 'none'}")
    if not row["checkpoints"]:
        return [heading, "no checkpoint listed: no tutorial page names its weights"]
    table = Table("its checkpoints (the tutorials' weight tables)", ["checkpoint", "weights", "source"])
    for checkpoint in row["checkpoints"]:
        table.add_row(checkpoint["id"], checkpoint["quantization"], checkpoint["source"])
    return [heading, table]


def _model_row(model) -> dict:
    layers = f"{model.num_layers}"
    if model.gdn_layers:
        layers += f" ({model.gdn_layers} GDN + {model.full_attention_layers} attention)"
    experts = (f"{model.num_experts} experts, top-{model.experts_per_token}"
               + (", shared" if model.shared_experts else "")) if model.is_moe else "dense"
    checkpoints = [{"id": c.id, "quantization": c.quantization, "source": c.source} for c in model.checkpoints]
    return {"id": model.id, "hf_id": model.hf_id, "aliases": list(model.aliases), "family": model.family,
            "layers": layers, "moe": experts, "mtp_layers": model.mtp_layers, "vision": model.is_vl,
            "dtype": model.dtype, "tutorials": list(model.tutorials), "checkpoints": checkpoints}


@click.command("recipes")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@catalog_option
def recipes_command(as_json, catalogs):
    """The recipe catalog: id, kind, upstream status, verification level."""
    from optkit.catalog.loader import load_catalog
    from optkit.catalog.records import effective_level, load_records

    from optkit.catalog.recipe_records import know_upstream_ranges

    catalog = load_catalog(None, catalog_dirs(catalogs))
    records = load_records(catalog.root, catalog)
    know_upstream_ranges(catalog)
    if as_json:
        rows = [{"id": r.id, "kind": r.kind.value, "upstream": r.upstream()[0],
                 "verification": effective_level(r, records).value, "needs_npu": r.verification.needs_npu,
                 "measured": [e.label for e in records.of(r.id)]} for r in catalog]
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    from optkit.cli.render import recipes_table, show

    show(recipes_table(catalog, records))


@click.command("show")
@click.argument("recipe_id")
@click.option("--json", "as_json", is_flag=True, help="Print the recipe as JSON.")
@catalog_option
def show_command(recipe_id, as_json, catalogs):
    """Everything about one recipe, with its source quote."""
    from optkit.catalog.loader import load_catalog
    from optkit.catalog.markdown import recipe_markdown
    from optkit.catalog.records import load_records

    catalog = load_catalog(None, catalog_dirs(catalogs))
    if recipe_id not in catalog:
        raise UnknownName("recipe", recipe_id, sorted(catalog.recipes))
    if as_json:
        click.echo(json.dumps(catalog[recipe_id].dump(mode="json"), indent=2, ensure_ascii=False))
        return
    click.echo(recipe_markdown(catalog, recipe_id, load_records(catalog.root, catalog)))


@click.command("lint")
@click.argument("root", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--trees", is_flag=True, help="Also check every cited tutorial line against its release's tree "
              "(fetched from PyPI and cached on first use).")
def lint_command(root, trees):
    """Audit a catalog like `spack audit`: the shipped one, a catalog root (with recipes/), or a folder of
    your own recipe folders (as --catalog takes it), checked layered over the shipped catalog."""
    from optkit.catalog.lint import lint

    findings = lint(root)
    if trees:
        from optkit.catalog.lint import lint_catalog
        from optkit.errors import ValidationFailed
        from optkit.versions.tutorials import check_tutorials

        try:
            findings += check_tutorials(lint_catalog(root))
        except ValidationFailed:  # the schema problems are listed already
            pass
    for finding in findings:
        click.echo(str(finding))
    if findings:
        raise SystemExit(1)
    if root is not None and (root / "recipes").is_dir():  # what plan --catalog takes differs: say which
        click.echo(f"catalog ok: {root} checked as a catalog root on its own (plan --catalog takes a folder of "
                   f"recipe folders, layered over the shipped catalog: {root / 'recipes'})")
        return
    click.echo("catalog ok")


@click.command("schema")
def schema_command():
    """JSON Schema of recipe.yaml, for editors."""
    from optkit.catalog.schema import Recipe

    click.echo(json.dumps(Recipe.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False))


@click.command("docs")
@click.option("--check", is_flag=True, help="Fail if the generated docs are not current.")
def docs_command(check):
    """Generate docs/catalog.md, docs/compat.md, docs/versions.md's tables, docs/port.md's reports, the
    generated figures in docs/, docs/example-bundle/ and the example ladder report (or --check that they are
    current)."""
    from optkit.catalog.paths import checkout_root, project_root
    from optkit.cli.docs import generated_docs, write_docs
    from optkit.errors import OptkitError

    root = checkout_root()
    if root is None:
        raise OptkitError(f"optkit docs{' --check' if check else ''} works on a source checkout (it regenerates "
                          f"docs/ beside recipes/), and this optkit is installed without one (its data is in "
                          f"{project_root()}); run it in a clone of the repository, e.g. after `pip install -e .`")
    if check:
        stale = generated_docs(root, check=True)
        if stale:
            raise click.ClickException(f"out of date: {', '.join(stale)}; run `optkit docs` and commit")
        click.echo("docs/catalog.md, docs/compat.md, docs/versions.md, docs/port.md, docs/example-bundle/, "
                   "docs/example-pd-bundle/, docs/example-ladder/report/ and the generated figures in docs/ are current")
        return
    for path in write_docs(root):
        click.echo(f"wrote {path}")


COMMANDS = [models_command, recipes_command, show_command, lint_command, schema_command, docs_command]
