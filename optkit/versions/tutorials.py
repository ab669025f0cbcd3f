"""The tutorial lines recipes cite, checked against each release's real tree (``optkit lint --trees``).

A recipe's ``tutorials`` entry names a release, a file under ``docs/source/tutorials/`` of that
release's tree, a line number and a quote: the check reads the file in that release's pristine tree
and refuses an entry whose release optkit has no data for, whose file the release lacks, whose line
is past the end, or whose line does not contain the quote (saying where in the file the quote is, if
it moved). Trees come from ``tree_for(release)`` (``optkit.tree.fetch``'s cache by default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from optkit.catalog.loader import Catalog
from optkit.errors import Problem


def check_tutorials(catalog: Catalog, tree_for: Callable[[str], Path] | None = None) -> list[Problem]:
    """Every cited tutorial line that does not hold in its release's tree, sorted by location."""
    from optkit.versions.releases import known_versions

    tree_for = tree_for or _pristine_tree
    known = {str(v) for v in known_versions()}
    texts: dict[tuple[str, str], list[str] | None] = {}
    out = []
    for recipe in catalog:
        for index, ref in enumerate(recipe.tutorials):
            where = catalog.location(recipe.id, ("tutorials", index))
            if ref.release not in known:
                out.append(Problem(where, f"release {ref.release} is not one optkit has data for",
                                   "see `optkit versions list`"))
                continue
            key = (ref.release, ref.file)
            if key not in texts:
                path = tree_for(ref.release) / ref.file
                texts[key] = path.read_text(encoding="utf-8", errors="replace").split("\n") if path.is_file() else None
            problem = _line_problem(texts[key], ref)
            if problem:
                out.append(Problem(where, problem[0], problem[1]))
    return sorted(out, key=lambda p: (p.location.file, p.location.line or 0, p.message))


def _line_problem(lines: list[str] | None, ref) -> tuple[str, str] | None:
    """(message, hint) when ``ref`` does not hold in the file's ``lines`` (None: no such file)."""
    if lines is None:
        return f"{ref.file} is not in the {ref.release} tree", "cite the file the release ships"
    if ref.line > len(lines):
        return f"{ref.file} has {len(lines)} lines in {ref.release}, not {ref.line}", _found(lines, ref.quote)
    if ref.quote in lines[ref.line - 1]:
        return None
    return (f"{ref.file}:{ref.line} in {ref.release} does not contain the quote; it reads "
            f"{lines[ref.line - 1].strip()[:160]!r}", _found(lines, ref.quote))


def _found(lines: list[str], quote: str) -> str:
    hits = [n for n, line in enumerate(lines, 1) if quote in line]
    if hits:
        return f"the quote is at line {', '.join(map(str, hits))}"
    return "the quote is nowhere in the file: the release says something else, or nothing of it"


def _pristine_tree(release: str) -> Path:
    from optkit.tree.fetch import fetch

    return fetch(release).path


__all__ = ["check_tutorials"]
