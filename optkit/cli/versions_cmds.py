"""``optkit versions``, ``optkit compat`` and ``optkit port``: vllm-ascend releases as data, the
compatibility matrix, and porting recipes' patches to another release."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.cli.options import catalog_dirs, catalog_option


@click.group("versions")
def versions_group():
    """vllm-ascend releases as data (versions/<version>.yaml)."""


@versions_group.command("scan")
@click.argument("trees", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="Write <version>.yaml here (e.g. versions/); default: print the YAML.")
def scan_command(trees, output):
    """Read each release TREE (version, pins, CANN, knob registry) into versions/<version>.yaml."""
    from optkit.versions.scan import release_file, release_yaml, scan_tree

    for tree in trees:
        data = scan_tree(tree)
        if output is None:
            click.echo(release_yaml(data), nl=False)
            continue
        output.mkdir(parents=True, exist_ok=True)
        path = output / release_file(data["version"])
        path.write_text(release_yaml(data), encoding="utf-8")
        click.echo(f"wrote {path}")


@versions_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def list_command(as_json):
    """Every known release: date, paired vLLM, pins, CANN minimum, knob counts, strictness."""
    from optkit.versions.markdown import releases_table

    if as_json:
        from optkit.resolve.report import dump_json
        from optkit.versions.releases import known_versions, load_release

        releases = [load_release(v).dump(mode="json", by_alias=True) for v in known_versions()]
        click.echo(dump_json([{k: v for k, v in r.items() if k != "knobs"} for r in releases]), nl=False)
        return
    click.echo("\n".join(releases_table()))


@click.command("compat")
@click.option("--releases", help="Comma-separated releases (default: every known release).")
@click.option("--json", "as_json", is_flag=True, help="Print the matrix as JSON.")
def compat_command(releases, as_json):
    """The compatibility matrix: every patch and every knob of the catalog on each release's real tree."""
    from optkit.catalog.loader import load_catalog
    from optkit.versions.compat import release_matrix

    versions = [v.strip() for v in releases.split(",") if v.strip()] if releases else None
    matrix = release_matrix(load_catalog(), versions, on_fetched=_fetch_progress)
    if as_json:
        from optkit.resolve.report import dump_json

        click.echo(dump_json(matrix.as_data()), nl=False)
        return
    from optkit.cli.render import compat_tables, show

    show(compat_tables(matrix))


def _fetch_progress(result, done: int, total: int) -> None:
    """One line per tree on stderr, TTY or not (stdout, --json's too, stays the matrix alone)."""
    where = "cached" if result.from_cache else "downloaded"
    click.echo(f"optkit compat: tree {done}/{total} vllm-ascend {result.version} ({where})", err=True)


@click.command("port")
@click.argument("recipes", nargs=-1)
@click.option("--to", "target", required=True, help="The release to port to (e.g. 0.30.0rc2).")
@click.option("--from", "source", default="0.23.0", show_default=True, help="The release the patches were written for.")
@click.option("--all", "every", is_flag=True, help="Every recipe with a patch set on --from.")
@click.option("--write", is_flag=True, help="Write the refreshed patches and release entries, and the conflict "
                                            "worksheets (default: a dry run that writes nothing).")
@click.option("--reviewed", "reviewed", multiple=True, metavar="RECIPE",
              help="RECIPE's new callers of the code its patches change have been read: write (or accept) its port "
                   "instead of holding it as needs-review (repeatable).")
@click.option("--date", type=click.DateTime(formats=["%Y-%m-%d"]),
              help="The DEP-3 Last-Update of refreshed patches (default: today).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@catalog_option
def port_command(recipes, target, source, every, write, reviewed, date, as_json, catalogs):
    """Port RECIPES' patches from --from to --to by three-way merge: exact, offset, merged, conflict, moved, upstream,
    superseded; --write adds the refreshed patch for the new release range (a port whose changed code has new callers
    in --to needs --reviewed RECIPE)."""
    from optkit.catalog.loader import load_catalog
    from optkit.versions.port import port
    from optkit.versions.port_write import write_port

    if every == bool(recipes):
        raise click.UsageError("name the recipes to port, or --all (not both)")
    catalog = load_catalog(None, catalog_dirs(catalogs))
    report = port(catalog, None if every else list(recipes), source, target, date=date.date() if date else None,
                  reviewed=list(reviewed))
    if write:
        write_port(catalog, report)
    if as_json:
        from optkit.resolve.report import dump_json

        click.echo(dump_json(report.as_data()), nl=False)
        return
    from optkit.versions.markdown import port_markdown

    click.echo("\n".join(port_markdown(report, write)))


COMMANDS = [versions_group, compat_command, port_command]
