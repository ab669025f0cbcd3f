"""The patches of a launch bundle, loaded and verified: what ``optkit apply`` consumes.

A bundle directory holds ``optkit.lock.json`` and ``patches/series`` plus ``patches/<name>``
(quilt style). Each patch is a unified diff (``a/``/``b/`` prefixes, paths relative to the
vllm-ascend tree root) after a DEP-3 header block ended by a line ``---``. Loading checks, once,
everything that can be checked without a tree: the lock's shape (``optkit.tree.schema.Lock``:
each entry's types, names, hashes and version ranges), ``series`` against the lock's order, each
patch's sha256, and that the files the diff touches are the lock's targets.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from optkit.catalog.patchfile import parse_dep3, patch_paths
from optkit.catalog.textfile import read_text
from optkit import __version__
from optkit.errors import BundleError, PatchError, ValidationFailed

if TYPE_CHECKING:  # imported where used: `optkit status` of a tree without records stays light
    from optkit.catalog.yamlio import LineMap
    from optkit.tree.schema import Lock, LockPatch, LockPending

LOCK_NAME = "optkit.lock.json"
LOCK_VERSION = 1
M = TypeVar("M")


@dataclass(frozen=True)
class PatchSpec:
    """One patch of a bundle, verified against the lock, in apply order."""

    recipe: str
    """Id of the recipe the patch belongs to."""
    name: str
    """File name in ``patches/`` and in ``series`` (``NNNN-<recipe>--<file>``)."""
    path: Path
    """Where the patch bytes are."""
    sha256: str
    """sha256 of the patch bytes, as the lock records it (and as checked on load)."""
    targets: tuple[str, ...]
    """Tree files the diff touches, relative to the tree root, in order of appearance."""
    version_spec: str
    """The recipe's vllm-ascend version range (PEP 440 specifiers; empty means any version)."""

    def read_verified(self) -> bytes:
        """The patch bytes, refused with ``PatchError`` if they no longer have ``sha256``."""
        return _verified_bytes(self.path, self.recipe, self.sha256)


# --------------------------------------------------------------------------- loaders


def load(path: Path, *, allow_pending: bool = False) -> list[PatchSpec]:
    """The patches of a bundle directory, or of a lock file (``from_bundle``/``from_lock``)."""
    path = Path(path)
    if path.is_dir():
        return from_bundle(path, allow_pending=allow_pending)
    return from_lock(path, allow_pending=allow_pending)


def from_bundle(bundle: Path, *, allow_pending: bool = False) -> list[PatchSpec]:
    """The patches of the bundle directory ``bundle``, in apply order.

    Reads ``optkit.lock.json`` and ``patches/series`` (which must list the lock's patches in the
    lock's order) and verifies every patch's sha256. A lock that names ``pending_patches`` is
    refused unless ``allow_pending``: those recipes would be applied only in part.
    """
    bundle = Path(bundle)
    if not (bundle / LOCK_NAME).is_file():
        raise BundleError([f"{bundle} is not a bundle directory: it has no {LOCK_NAME}"])
    series = bundle / "patches" / "series"
    if not series.is_file():
        raise BundleError([f"{series} is missing: the bundle is incomplete; write it again"])
    return _load(bundle / LOCK_NAME, _read_series(series), allow_pending)


def from_lock(lock: Path, *, allow_pending: bool = False) -> list[PatchSpec]:
    """The patches named by the lock file ``lock``; their bytes are in ``patches/`` beside it.

    ``patches/series`` is checked against the lock when present; everything else as in
    ``from_bundle``.
    """
    lock = Path(lock)
    series = lock.parent / "patches" / "series"
    return _load(lock, _read_series(series) if series.is_file() else None, allow_pending)


def _load(lock_path: Path, series: list[str] | None, allow_pending: bool) -> list[PatchSpec]:
    lock = read_lock(lock_path)
    _check_pending(lock_path, lock.pending_patches, allow_pending)
    names = [entry.name for entry in lock.patches]
    if series is not None and series != names:
        raise BundleError([
            f"{lock_path.parent / 'patches' / 'series'} lists {series or 'no patches'}, but "
            f"{lock_path.name} lists {names or 'no patches'} in apply order; the bundle was "
            "edited by hand: write it again"
        ])
    patch_dir = lock_path.parent / "patches"
    return [_spec(lock, entry, patch_dir) for entry in lock.patches]


def read_lock(path: Path) -> Lock:
    """The lock file ``path``, validated; ``BundleError`` naming the file, line and field otherwise."""
    from optkit.tree.schema import Lock

    return checked(Lock, *lock_json(path))


def lock_json(path: Path) -> tuple[dict, LineMap]:
    """The lock file's data and lines, once it reads as JSON of this optkit's ``lock_version``."""
    from optkit.catalog.jsonio import load_json

    path = Path(path)
    if not path.is_file():
        raise BundleError([f"no such lock file: {path}"])
    try:
        data, lines = load_json(path)
    except ValidationFailed as exc:
        raise BundleError([str(p) for p in exc.problems] + [REWRITE]) from None
    if not isinstance(data, dict):
        raise BundleError([f"{lines.location(())}: expected a mapping of fields at the top level", REWRITE])
    found = data.get("lock_version", None)
    if found != LOCK_VERSION or isinstance(found, bool):
        raise BundleError([f"{lines.location(('lock_version',))}: {_version_problem(data, found)}"])
    return data, lines


def _version_problem(data: dict, found) -> str:
    """Why a lock's ``lock_version`` is not this optkit's, and what to do: a newer format asks for a newer optkit."""
    if "lock_version" not in data:
        return f"missing required field 'lock_version' (this optkit reads lock_version {LOCK_VERSION}); {REWRITE}"
    written = data.get("optkit", {}).get("version") if isinstance(data.get("optkit"), dict) else None
    if isinstance(found, int) and not isinstance(found, bool) and found > LOCK_VERSION:
        by = f"optkit {written}" if isinstance(written, str) else "a newer optkit"
        return (f"is {found}, a lock format newer than this optkit ({__version__}) reads (lock_version "
                f"{LOCK_VERSION}): it was written by {by}; use that optkit, or write the bundle again with this one")
    return (f"is {found!r}, this optkit reads lock_version {LOCK_VERSION}; write the bundle again with this optkit")


def checked(model: type[M], data: dict, lines: LineMap) -> M:
    """``data`` validated as ``model`` (a schema of the lock or of a part of it), else ``BundleError``."""
    from optkit.catalog.loader import parse_model

    try:
        return parse_model(model, data, lines)
    except ValidationFailed as exc:
        raise BundleError([str(p) for p in exc.problems] + [REWRITE]) from None


REWRITE = "the lock was damaged or edited by hand: write the bundle again with `optkit plan ... -o DIR`"


def _check_pending(lock_path: Path, pending: list[LockPending], allow_pending: bool) -> None:
    if not pending or allow_pending:
        return
    listed = ", ".join(f"{p.recipe} ({p.file})" for p in pending)
    raise BundleError([
        f"{lock_path}: these recipes need patches that are not written yet (status: pending): "
        f"{listed}; applying the rest would leave them half done. Pass --allow-pending to "
        "apply the written patches anyway"
    ])


def _spec(lock: Lock, entry: LockPatch, patch_dir: Path) -> PatchSpec:
    recipe, name = entry.recipe, entry.name
    text = _verified_bytes(patch_dir / name, recipe, entry.sha256).decode("utf-8", errors="replace")
    _check_recipe_header(name, recipe, parse_dep3(text))
    targets = tuple(patch_paths(text))
    if not targets:
        raise PatchError(f"patch {name} (recipe {recipe}) is not a unified diff: it touches no file")
    if entry.targets and sorted(set(entry.targets)) != sorted(set(targets)):
        raise PatchError(
            f"patch {name} (recipe {recipe}) touches {list(targets)}, but the lock's targets are "
            f"{entry.targets}; fix `targets` in recipes/{recipe}/recipe.yaml and write the bundle again"
        )
    return PatchSpec(recipe, name, patch_dir / name, entry.sha256, targets, lock.recipes[recipe].versions.vllm_ascend)


def _check_recipe_header(name: str, recipe: str, header: dict[str, str]) -> None:
    named = header.get("Recipe")
    if named is not None and named != recipe:
        raise PatchError(
            f"patch {name} says `Recipe: {named}` in its DEP-3 header but the lock files it "
            f"under recipe {recipe}; the bundle is inconsistent: write it again"
        )


def _read_series(path: Path) -> list[str]:
    try:
        lines = read_text(path).splitlines()
    except ValidationFailed as exc:
        raise BundleError([str(p) for p in exc.problems]) from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _verified_bytes(path: Path, recipe: str, sha256: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PatchError(f"cannot read patch {path.name} of recipe {recipe}: {exc.strerror}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise PatchError(
            f"patch {path.name} (recipe {recipe}) has sha256 {actual}, but the lock records "
            f"{sha256}: the bundle was changed after it was written; write it again with "
            "`optkit plan ... -o DIR`"
        )
    return data


def targets_of(patches: list[PatchSpec]) -> list[str]:
    """Every file the patches touch, once each, in order of first appearance."""
    return list(dict.fromkeys(rel for p in patches for rel in p.targets))
