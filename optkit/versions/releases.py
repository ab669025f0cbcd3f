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
TREE_HINT = "or plan for a tree of your own with --tree DIR (its knobs and probes are read from it)"


class UnknownRelease(RequestError):
    """A vllm-ascend version that names no one release optkit knows: no release is PEP 440 equal to
    it (``near``: the known releases of its base version, e.g. 0.30.0rc1 for 0.30), or more than one
    is (``named``: two data files spelling one version)."""

    def __init__(self, version: str, known: list[str], near: list[str] = (), named: list[str] = (),
                 hint: str = TREE_HINT, flag: str = ""):
        self.version, self.known, self.near, self.named = version, list(known), list(near), list(named)
        self.flag = flag
        if len(self.named) > 1:
            message = (f"vllm-ascend {version} names {len(self.named)} releases optkit knows "
                       f"({', '.join(self.named)}); give one of them exactly")
        else:
            nearest = f"; the releases of {version} it knows are {', '.join(self.near)}" if self.near else ""
            message = (f"vllm-ascend {version} is not a release optkit knows (known: {', '.join(self.known)})"
                       f"{nearest}; give one of them (`optkit versions list`)")
        super().__init__((f"{flag}: " if flag else "") + message + (f", {hint}" if hint else ""))


def versions_dir(root: Path | None = None) -> Path:
    return (root or project_root()) / "versions"


@lru_cache(maxsize=None)
def _known(folder: Path) -> tuple[tuple[Version, str], ...]:
    """(version, file stem) of every release file, oldest first."""
    found = []
    for path in folder.glob("*.yaml") if folder.is_dir() else []:
        if path.name != MOVES_FILE:
            try:
                found.append((Version(path.stem), path.stem))
            except InvalidVersion:
                continue
    return tuple(sorted(found))


def known_versions(root: Path | None = None) -> list[Version]:
    """Every release with a data file, oldest first."""
    return [version for version, _ in _known(versions_dir(root))]


def release_named(version: str | Version, known: list[str] | None = None, *, flag: str = "",
                  hint: str = TREE_HINT, root: Path | None = None) -> str:
    """The one release of ``known`` (default: every release with a data file) that ``version`` names,
    spelt as optkit knows it: the one that is PEP 440 equal to it, so ``0.23`` names 0.23.0 (not
    0.23.0rc1 or 0.23.0.post1, which are other releases). ``UnknownRelease`` (ending in ``hint``) when
    none is, or more than one, naming ``flag``. ``version`` is a ``Version`` or valid version text: wording a
    malformed one is its flag's business."""
    wanted = Version(str(version))
    spelt = [stem for _, stem in _known(versions_dir(root))] if known is None else [str(k) for k in known]
    named = [k for k in spelt if Version(k) == wanted]
    if len(named) == 1:
        return named[0]
    base = Version(wanted.base_version)
    near = [k for k in spelt if Version(Version(k).base_version) == base]
    raise UnknownRelease(str(wanted), sorted(spelt, key=Version), near, named, hint, flag)


def load_release(version: str | Version, root: Path | None = None):
    """The data of the one release ``version`` names (``release_named``)."""
    return _load(versions_dir(root) / f"{release_named(version, root=root)}.yaml")


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
