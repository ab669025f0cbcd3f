"""Pristine vllm-ascend (and vLLM) source trees from PyPI: ``fetch`` a release's sdist.

``fetch`` downloads a release's sdist with ``pip download`` (run as a subprocess), keeps it in
the cache (``optkit.tree.cache``) and unpacks it safely (``optkit.tree.extract``) into
``<cache>/trees/<package>-<version>/``; a second fetch of the same release is offline. Each
release's cache entry is filled under an exclusive lock (``cache.entry_lock``), so processes (or
threads) fetching the same release at once wait for one download instead of racing on it;
``fetch_many`` fetches several releases in parallel.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from optkit.catalog.paths import cache_dir, file_in_the_way
from optkit.errors import TreeError
from optkit.tree.cache import entry_lock, read_record, sha256_file, tree_path, write_record
from optkit.tree.extract import extract_sdist

SOC_VERSION = "ascend910_9391"
"""Set for pip's subprocess only: vllm-ascend's setup.py needs a SoC to generate metadata."""

_PIP_TIMEOUT = 3600
_STDERR_LINES = 20
_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class FetchResult:
    """A fetched pristine tree: where it is and which archive it came from."""

    package: str
    version: str
    path: Path
    sdist: Path
    sha256: str
    from_cache: bool


def fetch(
    version: str,
    dest: Path | None = None,
    *,
    package: str = "vllm-ascend",
    force: bool = False,
    on_download: Callable[[str, str], None] | None = None,
) -> FetchResult:
    """Get the pristine source tree of ``package==version`` from its PyPI sdist.

    The sdist is downloaded once into the cache (``cache_dir()``) and unpacked there; later
    calls reuse it without network while the archive still has its recorded sha256. With
    ``force`` the archive is downloaded and unpacked again. With ``dest`` the pristine tree is
    also copied to ``dest`` (which must be absent or empty) and ``path`` is that copy.
    ``on_download(package, version)`` is called before a download starts (it takes a minute or
    more: pip builds the sdist's metadata), so a caller can say so.
    Raises ``TreeError`` for a bad version or package name, a non-empty ``dest``, a failed
    download or an unsafe archive.
    """
    version = _normalize_version(version)
    package = _check_package(package)
    if dest is not None:
        dest = _check_dest(Path(dest))
    try:
        with entry_lock(package, version):
            sdist, sha256, from_cache = _cached(package, version, force, on_download)
            tree = tree_path(package, version)
            if dest is not None:
                tree = _copy_tree(tree, dest)
    except OSError as exc:
        raise TreeError(f"cannot use optkit's cache {cache_dir()}: {_why(exc)}; set OPTKIT_CACHE_DIR to a "
                        "writable directory with free space") from None
    return FetchResult(package, version, tree, sdist, sha256, from_cache)


def _cached(package: str, version: str, force: bool, on_download=None) -> tuple[Path, str, bool]:
    """The sdist in the cache (downloaded and unpacked if need be), its sha256, whether it was cached."""
    record = None if force else read_record(package, version)
    if record is None:
        _require_build_tools()
        if on_download is not None:
            on_download(package, version)
        sdist, sha256 = _download_into_cache(package, version)
        _unpack_into_cache(package, version, sdist)
        write_record(package, version, sdist, sha256)
        return sdist, sha256, False
    sdist, sha256 = cache_dir() / "sdists" / record["sdist"], record["sha256"]
    if not tree_path(package, version).is_dir():
        _unpack_into_cache(package, version, sdist)
    return sdist, sha256, True


def _why(exc: OSError) -> str:
    return f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc.strerror or exc)




def fetch_many(versions: list[str], *, package: str = "vllm-ascend", workers: int = 4,
               on_fetched: Callable[[FetchResult, int, int], None] | None = None) -> list[FetchResult]:
    """``fetch`` each version (no ``dest``), ``workers`` at a time; results in the order given.

    Downloads and unpacking overlap (network and disk, not CPU bound); the first failure is raised
    once every started fetch has finished. ``on_fetched(result, done, total)`` is called as each
    fetch finishes (in the caller's thread, in the order they finish): a long fetch is not silent.
    """
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(fetch, version, package=package) for version in versions]
        for done, future in enumerate(as_completed(futures), 1):
            if on_fetched is not None and future.exception() is None:
                on_fetched(future.result(), done, len(futures))
        return [future.result() for future in futures]


def _normalize_version(version: str) -> str:
    """The one spelling of ``version``'s PEP 440 equals (``0.23``, ``0.23.0``, ``v0.23.0.0`` → 0.23.0):
    the release part has its trailing zeros dropped, then at least three parts, as vllm-ascend spells
    its releases; one cache entry per release, known to optkit or not."""
    try:
        parsed = Version(str(version).strip())
    except ValueError:  # InvalidVersion, or a number too long for int()
        raise TreeError(
            f"invalid version {version!r}: give a release version such as 0.23.0 or "
            "0.23.0.post1 (see `pip index versions vllm-ascend`)"
        ) from None
    release = list(parsed.release)
    while len(release) > 3 and release[-1] == 0:
        release.pop()
    release += [0] * (3 - len(release))
    text = (f"{parsed.epoch}!" if parsed.epoch else "") + ".".join(map(str, release))
    text += "".join(map(str, parsed.pre)) if parsed.pre else ""
    text += f".post{parsed.post}" if parsed.post is not None else ""
    text += f".dev{parsed.dev}" if parsed.dev is not None else ""
    return text + (f"+{parsed.local}" if parsed.local else "")


def _check_package(package: str) -> str:
    if not _NAME_RE.match(package or ""):
        raise TreeError(
            f"invalid package name {package!r}: give a PyPI project name such as "
            "vllm-ascend or vllm"
        )
    return canonicalize_name(package)


def _check_dest(dest: Path) -> Path:
    dest = dest.expanduser().absolute()
    if dest.exists() and not dest.is_dir():
        raise TreeError(f"destination {dest} is a file; give a new or empty directory")
    blocking = file_in_the_way(dest)
    if blocking is not None:
        raise TreeError(f"destination {dest} cannot be created: {blocking} is a file; give a directory elsewhere")
    if dest.is_dir() and any(dest.iterdir()):
        raise TreeError(
            f"destination {dest} is not empty; give a new or empty directory, "
            "or remove its contents first"
        )
    return dest


def _copy_tree(tree: Path, dest: Path) -> Path:
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(tree, dest, symlinks=True, dirs_exist_ok=True)
    except OSError as exc:
        raise TreeError(f"cannot copy the tree to {dest}: {_why(exc)}; give a writable directory") from None
    return dest


def _require_build_tools() -> None:
    """optkit depends on these (pyproject.toml); a Python where they were removed gets the fix."""
    missing = [m for m in ("setuptools", "setuptools_scm", "wheel") if importlib.util.find_spec(m) is None]
    if missing:
        raise TreeError(
            f"fetching a source tree needs {', '.join(missing)} in this Python ({sys.executable}): pip runs "
            f"the sdist's setup.py with them; run `pip install {' '.join(missing)}` and try again"
        )


# --------------------------------------------------------------------------- download


def _download_into_cache(package: str, version: str) -> tuple[Path, str]:
    """Download the sdist into ``<cache>/sdists`` and return its path and sha256."""
    sdists = cache_dir() / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=sdists) as tmp:
        archive = _pip_download(package, version, Path(tmp))
        final = sdists / archive.name
        archive.replace(final)
    return final, sha256_file(final)


def _pip_command(package: str, version: str, into: Path) -> list[str]:
    return [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--no-build-isolation", "--disable-pip-version-check", "-vv",
        f"{package}=={version}", "-d", str(into),
    ]  # fmt: skip


def _pip_download(package: str, version: str, into: Path) -> Path:
    """Run ``pip download`` for the sdist; return the archive saved in ``into``.

    Some sdists (vLLM's) cannot generate metadata here (they import torch in setup.py); pip
    has then already resolved the archive's URL, which is read from its log and fetched.
    """
    cmd = _pip_command(package, version, into)
    env = {**os.environ, "SOC_VERSION": SOC_VERSION}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=_PIP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise TreeError(f"pip download timed out after {_PIP_TIMEOUT}s: {shlex.join(cmd)}") from None
    if proc.returncode == 0:
        return _saved_sdist(into, package, version, cmd)
    url = _resolved_url(proc.stdout, package, version)
    if "metadata-generation-failed" in proc.stderr and url:
        return _download_url(url, into)
    raise _pip_failure(cmd, proc.stderr, package)


def _pip_failure(cmd: list[str], stderr: str, package: str) -> TreeError:
    tail = "\n".join(stderr.rstrip().splitlines()[-_STDERR_LINES:])
    return TreeError(
        f"pip could not download the sdist; command:\n  {shlex.join(cmd)}\n"
        f"last lines of pip's stderr:\n{tail}\n"
        f"check that the version exists (`pip index versions {package}`) and that PyPI "
        "is reachable"
    )


def _saved_sdist(into: Path, package: str, version: str, cmd: list[str]) -> Path:
    found = [p for p in into.iterdir() if p.is_file() and _is_sdist_of(p.name, package, version)]
    if len(found) != 1:
        names = ", ".join(sorted(p.name for p in into.iterdir())) or "nothing"
        raise TreeError(
            f"pip download saved {names}, not one sdist of {package}=={version}; "
            f"command: {shlex.join(cmd)}"
        )
    return found[0]


def _is_sdist_of(filename: str, package: str, version: str) -> bool:
    try:
        name, ver = parse_sdist_filename(filename)
    except (InvalidSdistFilename, InvalidVersion):
        return False
    return name == package and ver == Version(version) and filename.endswith(".tar.gz")


_TRACKER_RE = re.compile(r"Added \S+ from (\S+) to build tracker")


def _resolved_url(log: str, package: str, version: str) -> str | None:
    """The sdist URL that pip resolved, from its ``-vv`` log, if it names one."""
    for url in _TRACKER_RE.findall(log):
        filename = url.split("#", 1)[0].rsplit("/", 1)[-1]
        if _is_sdist_of(urllib.request.url2pathname(filename), package, version):
            return url
    return None


def _download_url(url: str, into: Path) -> Path:
    """Fetch the archive at ``url`` (as resolved by pip), checking a ``#sha256=`` if given."""
    bare, _, fragment = url.partition("#")
    target = into / urllib.request.url2pathname(bare.rsplit("/", 1)[-1])
    try:
        with urllib.request.urlopen(bare, timeout=180) as response, open(target, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
    except (urllib.error.URLError, OSError) as exc:
        raise TreeError(f"could not download {bare}: {exc}; check that PyPI is reachable") from None
    expected = fragment.split("sha256=", 1)[1] if fragment.startswith("sha256=") else None
    if expected and sha256_file(target) != expected:
        raise TreeError(f"{bare} does not have the sha256 {expected} that the index lists")
    return target


def _unpack_into_cache(package: str, version: str, sdist: Path) -> None:
    tree = tree_path(package, version)
    old = None
    if tree.exists():
        old = tree.with_name(f".{tree.name}.old-{os.getpid()}")
        tree.rename(old)
    extract_sdist(sdist, tree)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
