"""The committed tutorial data plans read: ``versions/tutorials/<release>.json``, loaded read-only.

``optkit tutorials extract`` writes one file per release (format 1, docs/tutorials.md) from the
release's pristine tree; this module reads it back with json and the standard library alone, so a
plan needs neither a tree nor the extraction code. ``load(release)`` gives a ``TutorialData`` whose
pages, checkpoints, tables and commands are read-only mappings and tuples; ``releases()`` lists the
releases with a committed file. A missing or malformed file is a ``ValidationFailed`` naming it.
"""

from __future__ import annotations

import json
from optkit.value import valueclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from optkit.catalog.paths import project_root
from optkit.errors import Location, Problem, ValidationFailed

FORMAT = 1
"""The data format this optkit reads and writes."""
FOLDER = "versions/tutorials"
_KEYS = ("format", "release", "tree", "pages")


@valueclass(frozen=True)
class TutorialData:
    """One release's tutorial pages as extracted from its tree."""

    release: str
    tree: str
    """the sha256 of the release's sdist the pages were read from."""
    pages: Mapping[str, Mapping]
    """page path under docs/source/tutorials/ → its title, kind, checkpoints, tables, commands, unread."""
    file: str

    def page(self, name: str) -> Mapping:
        """The page ``name`` (``models/Qwen3-235B-A22B.md``; ``Qwen3-235B-A22B`` finds it too)."""
        path = resolve_page(name, list(self.pages))
        if path is None:
            hint = _near_page(name, list(self.pages)) or f"its pages are listed by `optkit tutorials show --release {self.release}`"
            raise ValidationFailed([Problem(Location(self.file), f"release {self.release} has no tutorial page {name!r}", hint)])
        return self.pages[path]

    def commands(self, page: str | None = None, hardware: str | None = None) -> tuple[Mapping, ...]:
        """The commands of one page (or every page, in page order), of one hardware family if given."""
        pages = [self.page(page)] if page is not None else [self.pages[name] for name in sorted(self.pages)]
        return tuple(c for p in pages for c in p["commands"] if hardware is None or c["hardware"] == hardware)


def _near_page(name: str, paths: list[str]) -> str:
    """``did you mean 'models/X.md'?`` for a near-miss of a page's file name, or ''."""
    from difflib import get_close_matches

    stems = {_stem(path): path for path in paths}
    near = get_close_matches(_stem(name), list(stems), n=1, cutoff=0.6)
    return f"did you mean {stems[near[0]]!r}?" if near else ""


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def resolve_page(name: str, paths: list[str]) -> str | None:
    """The page path ``name`` means: itself, or the one path whose file name (with or without ``.md``) it is."""
    if name in paths:
        return name
    stem = name if name.endswith(".md") else f"{name}.md"
    found = [path for path in paths if path.rsplit("/", 1)[-1] == stem]
    return found[0] if len(found) == 1 else None


def data_dir(root: Path | None = None) -> Path:
    return (root or project_root()) / FOLDER


def releases(root: Path | None = None) -> list[str]:
    """The releases with committed tutorial data, oldest first (by PEP 440 order of their names)."""
    return sorted((path.stem for path in data_dir(root).glob("*.json")), key=_version_key)


def _version_key(release: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(release), release)
    except InvalidVersion:
        return (1, release, release)


@lru_cache(maxsize=None)
def load(release: str, root: Path | None = None) -> TutorialData:
    """The committed tutorial data of ``release``."""
    path = data_dir(root) / f"{release}.json"
    shown = f"{FOLDER}/{release}.json"
    if not path.is_file():
        known = releases(root)
        raise ValidationFailed([Problem(Location(shown), f"no tutorial data for release {release} "
                                        f"(there is for: {', '.join(known) or 'none'})",
                                        f"`optkit tutorials extract --release {release}` writes it")])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValidationFailed([Problem(Location(shown, exc.lineno), f"not JSON: {exc.msg}",
                                        f"`optkit tutorials extract --release {release}` writes it afresh")]) from None
    problem = _shape_problem(data, release)
    if problem:
        raise ValidationFailed([Problem(Location(shown), problem,
                                        f"`optkit tutorials extract --release {release}` writes it afresh")])
    return TutorialData(data["release"], data["tree"], _frozen(data["pages"]), shown)


def _shape_problem(data, release: str) -> str | None:
    if not isinstance(data, dict) or sorted(data) != sorted(_KEYS):
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        return f"expected an object with keys {', '.join(_KEYS)}, found {keys}"
    if data["format"] != FORMAT:
        return f"format {data['format']!r}; this optkit reads format {FORMAT}"
    if data["release"] != release:
        return f"holds release {data['release']!r}, not {release!r}"
    if not isinstance(data["pages"], dict):
        return "pages: expected an object of page path → page"
    return None


def _frozen(value):
    if isinstance(value, dict):
        return MappingProxyType({key: _frozen(inner) for key, inner in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(inner) for inner in value)
    return value


__all__ = ["FOLDER", "FORMAT", "TutorialData", "data_dir", "load", "releases", "resolve_page"]
