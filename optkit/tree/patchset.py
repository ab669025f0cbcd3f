"""The patches of a launch bundle, loaded and verified: what ``optkit apply`` consumes.

A bundle directory holds ``optkit.lock.json`` and ``patches/series`` plus ``patches/<name>``
(quilt style). Each patch is a unified diff (``a/``/``b/`` prefixes, paths relative to the
vllm-ascend tree root) after a DEP-3 header block ended by a line ``---``. Loading checks, once,
everything that can be checked without a tree: the lock's shape, ``series`` against the lock's
order, each patch's sha256, that the files the diff touches are the lock's targets, and that each
recipe's vllm-ascend range parses.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from optkit.catalog.patchfile import parse_dep3, patch_paths
from optkit.errors import BundleError, PatchError

LOCK_NAME = "optkit.lock.json"
LOCK_VERSION = 1



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
    lock = _read_lock(lock_path)
    entries = lock.get("patches", [])
    _check_pending(lock_path, lock.get("pending_patches", []), allow_pending)
    names = [entry.get("name") for entry in entries]
    if series is not None and series != names:
        raise BundleError([
            f"{lock_path.parent / 'patches' / 'series'} lists {series or 'no patches'}, but "
            f"{lock_path.name} lists {names or 'no patches'} in apply order; the bundle was "
            "edited by hand: write it again"
        ])
    patch_dir = lock_path.parent / "patches"
    return [_spec(lock_path, lock, n, entry, patch_dir) for n, entry in enumerate(entries)]


def _read_lock(path: Path) -> dict:
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError([f"no such lock file: {path}"]) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BundleError([f"{path}: not a readable optkit lock: {exc}"]) from None
    if not isinstance(lock, dict) or lock.get("lock_version") != LOCK_VERSION:
        found = lock.get("lock_version") if isinstance(lock, dict) else None
        raise BundleError([
            f"{path}: lock_version is {found!r}, this optkit reads lock_version {LOCK_VERSION}; "
            "write the bundle again with this optkit"
        ])
    if not isinstance(lock.get("patches", []), list):
        raise BundleError([f"{path}: patches: expected a list"])
    return lock


def _check_pending(lock_path: Path, pending: list, allow_pending: bool) -> None:
    if not pending or allow_pending:
        return
    listed = ", ".join(f"{p.get('recipe')} ({p.get('file')})" for p in pending)
    raise BundleError([
        f"{lock_path}: these recipes need patches that are not written yet (status: pending): "
        f"{listed}; applying the rest would leave them half done. Pass --allow-pending to "
        "apply the written patches anyway"
    ])


def _spec(lock_path: Path, lock: dict, index: int, entry: dict, patch_dir: Path) -> PatchSpec:
    where = f"{lock_path}: patches[{index}]"
    try:
        recipe, name, sha256 = entry["recipe"], entry["name"], entry["sha256"]
        declared = list(entry.get("targets", []))
    except (KeyError, TypeError) as exc:
        raise BundleError([f"{where}: missing or malformed key {exc}"]) from None
    if Path(name).name != name or name in ("", ".", "..", "series"):
        raise BundleError([f"{where}.name: {name!r} is not a plain file name"])
    text = _verified_bytes(patch_dir / name, recipe, sha256).decode("utf-8", errors="replace")
    _check_recipe_header(name, recipe, parse_dep3(text))
    targets = tuple(patch_paths(text))
    if not targets:
        raise PatchError(f"patch {name} (recipe {recipe}) is not a unified diff: it touches no file")
    if declared and sorted(set(declared)) != sorted(set(targets)):
        raise PatchError(
            f"patch {name} (recipe {recipe}) touches {list(targets)}, but the lock's targets are "
            f"{declared}; fix `targets` in recipes/{recipe}/recipe.yaml and write the bundle again"
        )
    return PatchSpec(recipe, name, patch_dir / name, sha256, targets, _version_spec(lock, recipe, where))


def _version_spec(lock: dict, recipe: str, where: str) -> str:
    spec = (((lock.get("recipes") or {}).get(recipe) or {}).get("versions") or {}).get("vllm_ascend", "")
    try:
        SpecifierSet(spec or "")
    except InvalidSpecifier:
        raise BundleError([f"{where}: recipe {recipe}'s vllm_ascend range {spec!r} is not a "
                           "PEP 440 specifier set such as '>=0.23.0,<0.24'"]) from None
    return spec or ""


def _check_recipe_header(name: str, recipe: str, header: dict[str, str]) -> None:
    named = header.get("Recipe")
    if named is not None and named != recipe:
        raise PatchError(
            f"patch {name} says `Recipe: {named}` in its DEP-3 header but the lock files it "
            f"under recipe {recipe}; the bundle is inconsistent: write it again"
        )


def _read_series(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
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


def catalog_specs(catalog, recipe_ids: list[str]) -> list[PatchSpec]:
    """PatchSpecs for the written patches of ``recipe_ids`` (in that order), straight from the catalog.

    Names follow the bundle's ``NNNN-<recipe>--<file>``; pending patches are skipped.
    """
    specs: list[PatchSpec] = []
    for rid in recipe_ids:
        recipe = catalog[rid]
        for patch in recipe.patches:
            if patch.status != "present":
                continue
            path = catalog.patch_path(rid, patch.file)
            data = path.read_bytes()
            specs.append(PatchSpec(rid, f"{len(specs) + 1:04d}-{rid}--{patch.file}", path,
                                   hashlib.sha256(data).hexdigest(),
                                   tuple(patch_paths(data.decode("utf-8", "surrogateescape"))),
                                   recipe.patch_versions(patch.file)))
    return specs


def targets_of(patches: list[PatchSpec]) -> list[str]:
    """Every file the patches touch, once each, in order of first appearance."""
    return list(dict.fromkeys(rel for p in patches for rel in p.targets))
