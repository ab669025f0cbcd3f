"""``optkit versions scan``: vllm-ascend releases as data."""

from __future__ import annotations

from pathlib import Path

import click


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


COMMANDS = [versions_group]
