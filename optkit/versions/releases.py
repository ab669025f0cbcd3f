"""The releases optkit knows: ``versions/<version>.yaml`` (generated) and ``versions/moves.yaml``
(declared). Loading goes through this module only, one release file at a time: validated, frozen
into records (``optkit.catalog.frozen``) and kept in the catalog cache, keyed by the file's bytes,
so a plan reads a release without YAML or pydantic."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from optkit.catalog.cache import cached
from optkit.catalog.paths import project_root
from optkit.errors import RequestError

MOVES_FILE = "moves.yaml"
_CODE = ("versions/schema.py", "versions/releases.py")  # what validates release files, besides optkit/catalog/


class UnknownRelease(RequestError):
    """A vllm-ascend version with no ``versions/<version>.yaml``."""

    def __init__(self, version: str, known: list[str]):
        self.version = version
        self.known = known
        super().__init__(
            f"vllm-ascend {version} is not a release optkit knows (known: {', '.join(known)}); give one of "
            "them, or plan for a tree of your own with --tree DIR (its knobs and probes are read from it)")


def versions_dir(root: Path | None = None) -> Path:
    return (root or project_root()) / "versions"


@lru_cache(maxsize=None)
def _known(folder: Path) -> tuple[Version, ...]:
    found = []
    for path in folder.glob("*.yaml") if folder.is_dir() else []:
        if path.name != MOVES_FILE:
            try:
                found.append(Version(path.stem))
            except InvalidVersion:
                continue
    return tuple(sorted(found))


def known_versions(root: Path | None = None) -> list[Version]:
    """Every release with a data file, oldest first."""
    return list(_known(versions_dir(root)))


def load_release(version: str | Version, root: Path | None = None):
    """The data of one release; ``UnknownRelease`` when there is no file for it."""
    wanted = Version(str(version))
    known = known_versions(root)
    if wanted not in known:
        raise UnknownRelease(str(wanted), [str(v) for v in known])
    return _load(versions_dir(root) / f"{wanted}.yaml")


@lru_cache(maxsize=None)
def _load(path: Path):
    """The release data in ``path``, as a record (``optkit.versions.schema.ReleaseData`` validated)."""
    return _cached_file(path, "ReleaseData")


@lru_cache(maxsize=None)
def _moves(path: Path) -> tuple:
    if not path.is_file():
        return ()
    return tuple(_cached_file(path, "KnobMoves").moves)


def _cached_file(path: Path, model: str):
    """``path`` validated as the schema's ``model`` and frozen, from the catalog cache when the file's
    bytes are those of last time (an unreadable file is validated, which reports it)."""
    try:
        data = path.read_bytes()
    except OSError:
        return _validated(path, model)
    return cached(f"versions-{path.stem}", None, lambda: _validated(path, model), code=_CODE,
                  inputs=path.name.encode() + b"\0" + data)


def _validated(path: Path, model: str):
    from optkit.catalog.frozen import freeze
    from optkit.catalog.loader import parse_model
    from optkit.catalog.yamlio import load_yaml
    from optkit.versions import schema

    data, lines = load_yaml(path, f"versions/{path.name}")
    return freeze(parse_model(getattr(schema, model), data, lines), schema.RECORDS)


def load_moves(root: Path | None = None) -> list:
    """The declared knob renames and moves (``versions/moves.yaml``)."""
    return list(_moves(versions_dir(root) / MOVES_FILE))


def newest(root: Path | None = None) -> Version:
    return known_versions(root)[-1]
