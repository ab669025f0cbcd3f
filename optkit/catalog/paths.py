"""Where optkit's data lives: the catalog root (checkout or installed wheel) and the cache."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=None)  # where the package lies does not change while it runs; asked dozens of times a plan
def project_root() -> Path:
    """The directory holding recipes/, models/, targets/, kernels/ (the repo or the install)."""
    here = Path(__file__).resolve().parent.parent  # the optkit package
    for candidate in (here / "data", here.parent):  # an installed wheel's copy, else the checkout
        if (candidate / "recipes").is_dir():
            return candidate
    return here.parent


def checkout_root() -> Path | None:
    """The source checkout optkit runs from (``pyproject.toml``, ``docs/`` and ``recipes/`` beside
    the package), or None for an installed optkit, whose data has no docs/ to regenerate."""
    root = Path(__file__).resolve().parent.parent.parent
    return root if all((root / name).exists() for name in ("pyproject.toml", "docs", "recipes")) else None


CATALOG_PATH_ENV = "OPTKIT_CATALOG_PATH"
"""Environment variable: recipe folders layered over the shipped catalog, separated by os.pathsep."""


def catalog_path(flags=()) -> list[Path]:
    """The extra recipe folders: ``$OPTKIT_CATALOG_PATH`` (in order), then each ``--catalog DIR``;
    a folder named twice counts once."""
    named = [part for part in os.environ.get(CATALOG_PATH_ENV, "").split(os.pathsep) if part]
    out: list[Path] = []
    for folder in [*named, *map(str, flags)]:
        if Path(folder) not in out:
            out.append(Path(folder))
    return out


def cache_dir() -> Path:
    """The optkit cache: ``$OPTKIT_CACHE_DIR`` if set and non-empty, else ``~/.cache/optkit``."""
    env = os.environ.get("OPTKIT_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "optkit"


def file_in_the_way(path: Path) -> Path | None:
    """The nearest existing parent of ``path`` if it is a file (so nothing can be created at ``path``)."""
    for parent in Path(path).absolute().parents:
        if parent.exists() or parent.is_symlink():
            return None if parent.is_dir() else parent
    return None
