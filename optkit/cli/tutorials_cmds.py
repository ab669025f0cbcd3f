"""``optkit tutorials``: upstream's tutorial pages as data (versions/tutorials/<release>.json) —
extract them from the release trees, show a page, diff two releases' advice."""

from __future__ import annotations

import click

from optkit.errors import OptkitError


@click.group("tutorials")
def tutorials_group():
    """Upstream's tutorial pages as data, one file per release (docs/tutorials.md)."""


@tutorials_group.command("extract")
@click.option("--release", "chosen", multiple=True, metavar="R", help="A release to extract (repeatable).")
@click.option("--all", "every", is_flag=True, help="Every release optkit knows (`optkit versions list`).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files that differ from a fresh extraction.")
@click.option("--summary", is_flag=True, help="Then print the per-release summary table of the committed data.")
def extract_command(chosen, every, check, summary):
    """Read each release's pristine tree (fetched and cached) into versions/tutorials/<release>.json."""
    from optkit.catalog.paths import project_root
    from optkit.versions.releases import known_versions
    from optkit.versions.tutorial_data import FOLDER

    if (chosen and every) or not (chosen or every or summary):
        raise click.UsageError("name the releases (--release R ...), or --all (not both)")
    releases = [str(v) for v in known_versions()] if every else [_release(r) for r in chosen]
    stale = []
    for release in releases:
        path = project_root() / FOLDER / f"{release}.json"
        text = _fresh(release)
        if check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(f"{FOLDER}/{release}.json")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        click.echo(f"wrote {FOLDER}/{release}.json")
    if stale:
        raise OptkitError("tutorial data differs from a fresh extraction: " + ", ".join(stale)
                          + "; `optkit tutorials extract --release R` rewrites it (then `optkit docs`)")
    if summary:
        from optkit.versions.tutorial_docs import summary_table

        click.echo("\n".join(summary_table()))


def _release(text: str) -> str:
    """The known release ``--release`` names (``0.23`` names 0.23.0)."""
    from packaging.version import InvalidVersion

    from optkit.versions.releases import release_named

    try:
        return release_named(text, flag="--release")
    except InvalidVersion:
        raise click.BadParameter(f"{text!r} is not a version (e.g. 0.30.0rc2)", param_hint="--release") from None


def _fresh(release: str) -> str:
    from optkit.tree.fetch import fetch
    from optkit.versions.tutorial_pages import dump, read_tree

    tree = fetch(release)
    return dump(read_tree(tree.path, release, tree.sha256))


@tutorials_group.command("show")
@click.argument("page", required=False)
@click.option("--release", default=None, help="The release (default: the newest with data).")
@click.option("--json", "as_json", is_flag=True, help="Print the page's data as JSON.")
def show_command(page, release, as_json):
    """A PAGE's checkpoints, tables and commands (no PAGE: the release's pages)."""
    from optkit.versions.tutorial_data import load, releases

    data = load(release or _newest(releases()))
    if page is None:
        for name, entry in sorted(data.pages.items()):
            click.echo(f"{name}  [{entry['kind']}]  {len(entry['commands'])} commands, {len(entry['tables'])} tables")
        return
    entry = data.page(page)
    if as_json:
        from optkit.versions.tutorial_pages import dump

        click.echo(dump(_plain(entry)), nl=False)
        return
    click.echo("\n".join(_page_lines(data.release, entry)))


def _newest(known: list[str]) -> str:
    if not known:
        raise OptkitError("no tutorial data is committed (versions/tutorials/): `optkit tutorials extract --all` writes it")
    return known[-1]


def _plain(value):
    if hasattr(value, "items"):
        return {key: _plain(inner) for key, inner in value.items()}
    if isinstance(value, tuple):
        return [_plain(inner) for inner in value]
    return value


def _page_lines(release: str, page) -> list[str]:
    lines = [f"{page['title']} ({release}, {page['kind']})", ""]
    if page["checkpoints"]:
        lines.append("Checkpoints:")
        lines += [f"  :{c['line']} {c['name']} — {c['id'] or 'no Hub id'} — {c['quantization'] or 'weight format not stated'}"
                  + (f" — {c['hardware_text']}" if c["hardware_text"] else "") for c in page["checkpoints"]]
        lines.append("")
    for table in page["tables"]:
        tabs = f" [{', '.join(table['tabs'])}]" if table["tabs"] else ""
        lines += [f"Table :{table['line']} ({table['kind']}) {table['heading']}{tabs}",
                  "  | " + " | ".join(table["columns"]) + " |"]
        lines += [f"  | " + " | ".join(row["cells"]) + f" |  :{row['line']}" for row in table["rows"]]
        lines.append("")
    for command in page["commands"]:
        lines += _command_lines(command)
    lines += [f"Not read :{u['line']}: {u['why']}" for u in page["unread"]]
    return lines


def _command_lines(command) -> list[str]:
    facts = ", ".join(f"{key} {command[key]}" for key in ("hardware", "scenario", "deployment", "nodes", "node_rank",
                                                          "pd_role") if command[key] is not None)
    lines = [f"Command :{command['line']} {command['launcher']} {command['model']} — {command['where']}",
             f"  {facts or 'no hardware, scenario or layout stated'}"]
    lines += [f"  env {name}={entry['value']}  :{entry['line']}" for name, entry in command["env"].items()]
    lines += [f"  {flag} {_value(entry['value'])}  :{entry['line']}" for flag, entry in command["options"].items()]
    if command["placeholders"]:
        lines.append(f"  placeholders: {' '.join(command['placeholders'])}")
    lines += [f"  problem: {problem}" for problem in command["problems"]]
    return lines + [""]


def _value(value) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(_plain(value))


@tutorials_group.command("diff")
@click.argument("old")
@click.argument("new")
@click.argument("page", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
def diff_command(old, new, page, as_json):
    """What upstream changed in its tutorial advice from release OLD to NEW (of one PAGE if given)."""
    from optkit.versions.tutorial_data import load
    from optkit.versions.tutorial_diff import diff

    changes = diff(load(old), load(new), page)
    if as_json:
        from optkit.versions.tutorial_pages import dump

        click.echo(dump(changes), nl=False)
        return
    click.echo("\n".join(_diff_lines(changes)))


def _diff_lines(changes: dict) -> list[str]:
    lines = [f"tutorials {changes['from']} → {changes['to']}"]
    lines += [f"+ page {name}" for name in changes["pages_added"]]
    lines += [f"- page {name}" for name in changes["pages_removed"]]
    for name, page in changes["pages"].items():
        lines += ["", f"{name}:"]
        lines += [f"  + checkpoint {c['name']}  :{c['line']}" for c in page.get("checkpoints_added", [])]
        lines += [f"  - checkpoint {c['name']}  :{c['line']}" for c in page.get("checkpoints_removed", [])]
        lines += [f"  + command {c['launcher']} {c['where']}  :{c['line']}" for c in page.get("commands_added", [])]
        lines += [f"  - command {c['launcher']} {c['where']}  :{c['line']}" for c in page.get("commands_removed", [])]
        for command in page.get("commands_changed", []):
            lines.append(f"  ~ command {command['launcher']} {command['where']}  :{command['line_from']} → :{command['line_to']}")
            if "model" in command:
                lines.append(f"      model {command['model']['from']} → {command['model']['to']}")
            for kind in ("options", "env"):
                lines += [f"      {_entry_change(entry)}" for entry in command.get(kind, [])]
        for table in page.get("tables_changed", []):
            lines += _table_lines(table)
    return lines


def _entry_change(entry: dict) -> str:
    before, after = entry["from"], entry["to"]
    if entry["change"] == "added":
        return f"+ {entry['key']} {_value(after['value'])}  :{after['line']}"
    if entry["change"] == "removed":
        return f"- {entry['key']} {_value(before['value'])}  :{before['line']}"
    return f"~ {entry['key']} {_value(before['value'])} (:{before['line']}) → {_value(after['value'])} (:{after['line']})"


def _table_lines(table: dict) -> list[str]:
    tabs = f" [{', '.join(table['tabs'])}]" if table["tabs"] else ""
    if table["change"] != "changed":
        sign = "+" if table["change"] == "added" else "-"
        return [f"  {sign} table {table['heading']}{tabs}  :{table['line']}"]
    lines = [f"  ~ table {table['heading']}{tabs}  :{table['line_from']} → :{table['line_to']}"]
    if "columns" in table:
        lines.append(f"      columns {' | '.join(table['columns']['from'])} → {' | '.join(table['columns']['to'])}")
    lines += [f"      - row {' | '.join(row['cells'])}  :{row['line']}" for row in table["rows_removed"]]
    lines += [f"      + row {' | '.join(row['cells'])}  :{row['line']}" for row in table["rows_added"]]
    return lines


COMMANDS = [tutorials_group]
