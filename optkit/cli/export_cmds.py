"""``optkit export``: recipes as an upstream pull request for vllm-ascend (a ``git am``-able series,
its unit tests in upstream's layout, and PR.md)."""

from __future__ import annotations

from pathlib import Path

import click

from optkit.cli.options import catalog_dirs, catalog_option


@click.command("export")
@click.argument("recipes", nargs=-1, required=True)
# The default is DEFAULT_VLLM_ASCEND (optkit.resolve.request_record), read when the command runs: `optkit --help`
# imports no later stage; tests/test_export.py checks that this text names the same release.
@click.option("--release", help="The vllm-ascend release to send the series for (default 0.23.0, the "
                                "default release of every optkit command; with --tree, the tree's own). For a pull "
                                "request against upstream's main, name the newest (`optkit versions list`).")
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=True, path_type=Path),
              help="A new (or empty) directory: the git repository, patches/ and PR.md.")
@click.option("--tree", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Start from this vllm-ascend tree (e.g. your clone of upstream; cloned, never changed) instead of "
                   "the pristine release tree.")
@click.option("--author", help="'Name <mail>' of the commits and their Signed-off-by (default: git's user.name and "
                               "user.email).")
@click.option("--signoff/--no-signoff", default=True, show_default=True,
              help="Add the DCO Signed-off-by trailer vllm-ascend requires.")
@click.option("--run-tests", is_flag=True, help="Run the exported unit tests with this Python, which needs pytest and "
                                                "torch (checked first): they must fail without the series and pass "
                                                "with it; PR.md reports what they did.")
@catalog_option
def export_command(recipes, release, out, tree, author, signoff, run_tests, catalogs):
    """Turn RECIPES' patch sets for a release into an upstream pull request: DIR is a git repository of the release
    tree with one commit per patch (git format-patch files in DIR/patches/), the recipes' unit tests in upstream's
    tests/ut layout, and DIR/PR.md in the form of the tree's pull-request template."""
    from optkit.catalog.loader import load_catalog
    from optkit.resolve.request_record import DEFAULT_VLLM_ASCEND
    from optkit.versions.export import export

    catalog = load_catalog(None, catalog_dirs(catalogs))
    release = release or (None if tree else DEFAULT_VLLM_ASCEND)
    result = export(catalog, list(recipes), out, release, tree=tree, author=author, signoff=signoff,
                    run_tests=run_tests)
    for commit in result.commits:
        click.echo(f"{commit.file}  {commit.message.splitlines()[0]}")
    for run in result.runs:
        click.echo(f"tests on the {run.where}: {'passed' if run.passed else 'failed'} ({run.summary})")
    bad = [r for r in result.runs if r.passed != (r.where == "series")]
    click.echo(f"wrote {out}/ (git repository on {result.base}), {out}/patches/, {out}/PR.md")
    if bad:
        from optkit.versions.export import ExportError

        raise ExportError("the exported tests " + "; ".join(
            f"{'passed' if r.passed else 'failed'} on the {r.where}" for r in bad)
            + f" ({out} is kept to look at: they must fail without the series and pass with it)")


COMMANDS = [export_command]
