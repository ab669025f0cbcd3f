"""What upstream changed in its tutorial advice between two releases, read off their tutorial data.

``diff(old, new, page=None)`` compares two ``TutorialData`` (``optkit.versions.tutorial_data``):
pages added and removed, and per page kept: checkpoints added and removed (by name), commands added
and removed (by launcher and ``where``), per kept command the options and env added, removed or
changed (each side's value and line), and per table (by heading, tabs and order under them) its
columns and the rows added and removed (by their cells). Pages without a change are left out.
"""

from __future__ import annotations

from typing import Mapping


def diff(old, new, page: str | None = None) -> dict:
    """The changes from ``old`` to ``new`` (two ``TutorialData``), of one page if given."""
    wanted = set(old.pages) | set(new.pages)
    if page is not None:
        wanted = {name for name in (_named(old, page), _named(new, page)) if name}
        if not wanted:
            new.page(page)  # raises: neither release has it
    pages = {}
    for name in sorted(wanted & set(old.pages) & set(new.pages)):
        change = page_diff(old.pages[name], new.pages[name])
        if change:
            pages[name] = change
    return {"from": old.release, "to": new.release,
            "pages_added": sorted(wanted & (set(new.pages) - set(old.pages))),
            "pages_removed": sorted(wanted & (set(old.pages) - set(new.pages))), "pages": pages}


def _named(data, name: str) -> str | None:
    from optkit.versions.tutorial_data import resolve_page

    return resolve_page(name, list(data.pages))


def page_diff(old: Mapping, new: Mapping) -> dict:
    """One page's changes (empty: none)."""
    change = {}
    old_names = {c["name"]: c for c in old["checkpoints"]}
    new_names = {c["name"]: c for c in new["checkpoints"]}
    change["checkpoints_added"] = [_brief(new_names[n], "name") for n in sorted(set(new_names) - set(old_names))]
    change["checkpoints_removed"] = [_brief(old_names[n], "name") for n in sorted(set(old_names) - set(new_names))]
    old_commands, new_commands = _by_key(old["commands"]), _by_key(new["commands"])
    change["commands_added"] = [_brief(new_commands[k], "where", "launcher") for k in sorted(set(new_commands) - set(old_commands))]
    change["commands_removed"] = [_brief(old_commands[k], "where", "launcher") for k in sorted(set(old_commands) - set(new_commands))]
    change["commands_changed"] = [c for k in sorted(set(old_commands) & set(new_commands))
                                  if (c := _command_diff(old_commands[k], new_commands[k]))]
    change["tables_changed"] = _tables_diff(old["tables"], new["tables"])
    return {key: value for key, value in change.items() if value}


def _by_key(commands) -> dict:
    return {(c["launcher"], c["where"]): c for c in commands}


def _brief(item: Mapping, *keys: str) -> dict:
    return {"line": item["line"], **{key: item[key] for key in keys}}


def _command_diff(old: Mapping, new: Mapping) -> dict:
    changes = {"options": _entries_diff(old["options"], new["options"]), "env": _entries_diff(old["env"], new["env"])}
    if old["model"] != new["model"]:
        changes["model"] = {"from": old["model"], "to": new["model"]}
    changes = {key: value for key, value in changes.items() if value}
    if not changes:
        return {}
    return {"where": new["where"], "launcher": new["launcher"], "line_from": old["line"], "line_to": new["line"], **changes}


def _entries_diff(old: Mapping, new: Mapping) -> list[dict]:
    """Options or env: each key added, removed or changed in value, with both sides' value and line."""
    found = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before is not None and after is not None and before["value"] == after["value"]:
            continue
        change = "added" if before is None else "removed" if after is None else "changed"
        found.append({"key": key, "change": change, "from": _entry(before), "to": _entry(after)})
    return found


def _entry(entry: Mapping | None) -> dict | None:
    return None if entry is None else {"value": _plain(entry["value"]), "line": entry["line"]}


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _tables_diff(old, new) -> list[dict]:
    found = []
    old_tables, new_tables = _tables_by_key(old), _tables_by_key(new)
    for key in sorted(set(old_tables) | set(new_tables), key=repr):
        before, after = old_tables.get(key), new_tables.get(key)
        heading, tabs, _ = key
        if before is None or after is None:
            table = after or before
            found.append({"heading": heading, "tabs": list(tabs), "change": "added" if before is None else "removed",
                          "line": table["line"], "columns": list(table["columns"])})
            continue
        old_rows, new_rows = _rows(before), _rows(after)
        added = [{"line": line, "cells": list(cells)} for cells, line in new_rows.items() if cells not in old_rows]
        removed = [{"line": line, "cells": list(cells)} for cells, line in old_rows.items() if cells not in new_rows]
        columns = list(before["columns"]) != list(after["columns"])
        if added or removed or columns:
            entry = {"heading": heading, "tabs": list(tabs), "change": "changed", "line_from": before["line"],
                     "line_to": after["line"], "rows_added": added, "rows_removed": removed}
            if columns:
                entry["columns"] = {"from": list(before["columns"]), "to": list(after["columns"])}
            found.append(entry)
    return found


def _tables_by_key(tables) -> dict:
    """Tables by (heading, tabs, their order under that heading and tabs)."""
    seen: dict[tuple, int] = {}
    keyed = {}
    for table in tables:
        place = (table["heading"], tuple(table["tabs"]))
        seen[place] = seen.get(place, 0) + 1
        keyed[(*place, seen[place])] = table
    return keyed


def _rows(table) -> dict[tuple, int]:
    return {tuple(row["cells"]): row["line"] for row in table["rows"]}


__all__ = ["diff", "page_diff"]
