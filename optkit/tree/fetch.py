"""Pristine vllm-ascend (and vLLM) source trees: fetch them from PyPI, inspect, checksum.

``fetch`` downloads a release's sdist with ``pip download`` (run as a subprocess), keeps it in
the cache and unpacks it safely into ``<cache>/trees/<package>-<version>/``::

    <cache>/sdists/vllm_ascend-0.23.0.tar.gz      the archive, as PyPI serves it
    <cache>/trees/vllm-ascend-0.23.0/             the sdist's top directory's contents
    <cache>/trees/vllm-ascend-0.23.0.json         {"package", "version", "sdist", "sha256", "size"}

The JSON record is written last, so it marks a complete entry; an entry whose archive no longer
has the recorded sha256 is fetched again. ``inspect_tree`` tells whether a directory is a
vllm-ascend tree and which version, without importing or executing anything from it.
``tree_checksum`` gives sha256 per file, to prove a tree byte-identical after a restore.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from optkit.errors import TreeError

SOC_VERSION = "ascend910_9391"
"""Set for pip's subprocess only: vllm-ascend's setup.py needs a SoC to generate metadata."""

FETCH_HINT = "fetch one with `optkit tree fetch 0.23.0 DIR`"
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


@dataclass(frozen=True)
class TreeInfo:
    """What ``inspect_tree`` found: the tree's root, version, and where the version came from."""

    root: Path
    version: Version
    version_source: str
    is_git: bool


# --------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """The optkit cache: ``$OPTKIT_CACHE_DIR`` if set and non-empty, else ``~/.cache/optkit``."""
    env = os.environ.get("OPTKIT_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "optkit"


def _tree_path(package: str, version: str) -> Path:
    return cache_dir() / "trees" / f"{package}-{version}"


def _record_path(package: str, version: str) -> Path:
    return cache_dir() / "trees" / f"{package}-{version}.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_record(package: str, version: str) -> dict | None:
    """The cache record, if present, well-formed and matching its archive's sha256."""
    try:
        record = json.loads(_record_path(package, version).read_text())
        sdist = cache_dir() / "sdists" / record["sdist"]
        if Path(record["sdist"]).name != record["sdist"] or not sdist.is_file():
            return None
        if _sha256(sdist) != record["sha256"]:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record


def _write_record(package: str, version: str, sdist: Path, sha256: str) -> None:
    record = {
        "package": package,
        "version": version,
        "sdist": sdist.name,
        "sha256": sha256,
        "size": sdist.stat().st_size,
    }
    path = _record_path(package, version)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)


# --------------------------------------------------------------------------- fetch


def fetch(
    version: str,
    dest: Path | None = None,
    *,
    package: str = "vllm-ascend",
    force: bool = False,
) -> FetchResult:
    """Get the pristine source tree of ``package==version`` from its PyPI sdist.

    The sdist is downloaded once into the cache (``cache_dir()``) and unpacked there; later
    calls reuse it without network while the archive still has its recorded sha256. With
    ``force`` the archive is downloaded and unpacked again. With ``dest`` the pristine tree is
    also copied to ``dest`` (which must be absent or empty) and ``path`` is that copy.
    Raises ``TreeError`` for a bad version or package name, a non-empty ``dest``, a failed
    download or an unsafe archive.
    """
    version = _normalize_version(version)
    package = _check_package(package)
    if dest is not None:
        dest = _check_dest(Path(dest))
    record = None if force else _read_record(package, version)
    if record is None:
        _require_build_tools()
        sdist, sha256 = _download_into_cache(package, version)
        _unpack_into_cache(package, version, sdist)
        _write_record(package, version, sdist, sha256)
        from_cache = False
    else:
        sdist, sha256 = cache_dir() / "sdists" / record["sdist"], record["sha256"]
        if not _tree_path(package, version).is_dir():
            _unpack_into_cache(package, version, sdist)
        from_cache = True
    tree = _tree_path(package, version)
    if dest is not None:
        tree = _copy_tree(tree, dest)
    return FetchResult(package, version, tree, sdist, sha256, from_cache)


def _normalize_version(version: str) -> str:
    try:
        return str(Version(str(version).strip()))
    except InvalidVersion:
        raise TreeError(
            f"invalid version {version!r}: give a release version such as 0.23.0 or "
            "0.23.0.post1 (see `pip index versions vllm-ascend`)"
        ) from None


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
    if dest.is_dir() and any(dest.iterdir()):
        raise TreeError(
            f"destination {dest} is not empty; give a new or empty directory, "
            "or remove its contents first"
        )
    return dest


def _copy_tree(tree: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(tree, dest, symlinks=True, dirs_exist_ok=True)
    return dest


def _require_build_tools() -> None:
    missing = [m for m in ("setuptools_scm", "wheel") if importlib.util.find_spec(m) is None]
    if missing:
        raise TreeError(
            f"fetching a source tree needs {' and '.join(missing)} in this Python "
            f"({sys.executable}): run `pip install setuptools_scm wheel` and try again"
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
    return final, _sha256(final)


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
    return name == package and str(ver) == version and filename.endswith(".tar.gz")


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
    if expected and _sha256(target) != expected:
        raise TreeError(f"{bare} does not have the sha256 {expected} that the index lists")
    return target


# --------------------------------------------------------------------------- extraction


def extract_sdist(archive: Path, dest: Path) -> Path:
    """Unpack the sdist ``archive`` safely: its single top directory's contents go into ``dest``.

    ``dest`` must not exist yet. Members with absolute paths, ``..`` components, links that
    point outside the archive, or device files are refused with ``TreeError`` and nothing is
    left at ``dest``.
    """
    archive, dest = Path(archive), Path(dest)
    if dest.exists():
        raise TreeError(f"cannot unpack {archive.name} into {dest}: it already exists")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        _extract_checked(archive, staging)
        _single_top(staging, archive).rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _extract_checked(archive: Path, into: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, archive)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, members=members, filter="data")
            else:  # Python without extraction filters: the checks above are the guard
                tar.extractall(into, members=members)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TreeError(
            f"cannot unpack {archive}: {exc}; delete it and fetch again with --force"
        ) from None


def _unsafe(archive: Path, name: str, why: str) -> TreeError:
    return TreeError(
        f"refusing to unpack {archive.name}: member {name!r} {why}; the archive is corrupt "
        f"or malicious: delete {archive} and fetch again with --force"
    )


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    """Refuse a member that would write or point outside the extraction directory."""
    name = member.name
    if not _inside(name):
        raise _unsafe(archive, name, "has an absolute path or '..'")
    if member.issym():
        target = str(PurePosixPath(name).parent / member.linkname)
        if member.linkname.startswith("/") or not _inside(target):
            raise _unsafe(archive, name, f"is a symlink to {member.linkname!r}, outside the tree")
    elif member.islnk():
        if not _inside(member.linkname):
            raise _unsafe(archive, name, f"is a hard link to {member.linkname!r}, outside the tree")
    elif not (member.isfile() or member.isdir()):
        raise _unsafe(archive, name, "is a device, fifo or other special file")


def _inside(relpath: str) -> bool:
    """Whether a tar path stays inside its root once ``.`` and ``..`` are resolved."""
    if relpath.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", relpath):
        return False
    depth = 0
    for part in relpath.replace("\\", "/").split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part not in ("", "."):
            depth += 1
    return True


def _single_top(staging: Path, archive: Path) -> Path:
    entries = list(staging.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        raise TreeError(
            f"{archive.name} is not a normal sdist: it should hold one top directory, "
            f"found {len(entries)} entries; delete it and fetch again with --force"
        )
    return entries[0]


def _unpack_into_cache(package: str, version: str, sdist: Path) -> None:
    tree = _tree_path(package, version)
    old = None
    if tree.exists():
        old = tree.with_name(f".{tree.name}.old-{os.getpid()}")
        tree.rename(old)
    extract_sdist(sdist, tree)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- inspect


def inspect_tree(path: Path) -> TreeInfo:
    """Check that ``path`` is a vllm-ascend source tree and find its version.

    The version comes from ``vllm_ascend/_version.py`` (read, never imported), else from
    ``PKG-INFO``, else from ``git describe --tags`` in a git checkout. Raises ``TreeError``
    when the path is missing, not a directory, not vllm-ascend, or has no known version.
    """
    root = _check_tree_root(Path(path))
    is_git = (root / ".git").exists()
    tried: list[str] = []
    for source, reader in (
        ("_version.py", _version_from_version_py),
        ("PKG-INFO", _version_from_pkg_info),
        ("git", _version_from_git),
    ):
        if source == "git" and not is_git:
            continue
        found = reader(root, tried)
        if found is not None:
            return TreeInfo(root, found, source, is_git)
    raise TreeError(
        f"cannot tell the version of the vllm-ascend tree {root}: "
        + "; ".join(tried or ["no vllm_ascend/_version.py, no PKG-INFO and not a git checkout"])
        + f"; use a tree from a release sdist ({FETCH_HINT}) or a git checkout with tags"
    )


def _check_tree_root(path: Path) -> Path:
    path = path.expanduser()
    if not path.exists():
        raise TreeError(f"no such directory: {path}; give a vllm-ascend source tree or {FETCH_HINT}")
    if not path.is_dir():
        raise TreeError(
            f"not a directory: {path} is a file; give the root directory of a vllm-ascend "
            "source tree (the one that holds vllm_ascend/)"
        )
    root = path.resolve()
    if not (root / "vllm_ascend" / "__init__.py").is_file():
        hint = ""
        if root.name == "vllm_ascend" and (root / "__init__.py").is_file():
            hint = f" (this is the package itself: give its parent {root.parent})"
        raise TreeError(
            f"not a vllm-ascend source tree: {path} has no vllm_ascend/__init__.py{hint}; "
            f"{FETCH_HINT}"
        )
    return root


def _parse(text: str, origin: str, tried: list[str]) -> Version | None:
    try:
        return Version(text.strip())
    except InvalidVersion:
        tried.append(f"{origin} gives {text.strip()!r}, which is not a valid version")
        return None


def _version_from_version_py(root: Path, tried: list[str]) -> Version | None:
    """``__version__ = '...'`` in ``vllm_ascend/_version.py``, read with ast, never executed."""
    path = root / "vllm_ascend" / "_version.py"
    if not path.is_file():
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        tried.append("vllm_ascend/_version.py does not parse")
        return None
    for node in ast.walk(tree):
        value = _assigned_string(node, "__version__")
        if value is not None:
            return _parse(value, "vllm_ascend/_version.py", tried)
    tried.append("vllm_ascend/_version.py assigns no __version__ string")
    return None


def _assigned_string(node: ast.AST, name: str) -> str | None:
    """The string assigned to ``name`` by ``node`` (``a = b = '...'`` too), else None."""
    if isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets, value = [node.target], node.value
    else:
        return None
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    if name in names and isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    return None


def _version_from_pkg_info(root: Path, tried: list[str]) -> Version | None:
    """The ``Version:`` header of the sdist's ``PKG-INFO``."""
    path = root / "PKG-INFO"
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        if line.startswith("Version:"):
            return _parse(line.split(":", 1)[1], "PKG-INFO", tried)
    tried.append("PKG-INFO has no Version: line")
    return None


_DESCRIBE_RE = re.compile(r"^(?P<tag>.+)-(?P<distance>\d+)-g(?P<sha>[0-9a-f]+)$")


def _version_from_git(root: Path, tried: list[str]) -> Version | None:
    """The version of the nearest tag (``v0.23.0`` → 0.23.0); commits past it → ``+N.gSHA``."""
    out = _git(root, "describe", "--tags", "--long")
    if out is None:
        tried.append("`git describe --tags` found no tag (or git is not installed)")
        return None
    match = _DESCRIBE_RE.match(out)
    if not match:
        tried.append(f"`git describe --tags` gave {out!r}")
        return None
    tag, distance = match["tag"], int(match["distance"])
    version = _parse(tag[1:] if tag[:1] in "vV" else tag, f"git tag {tag!r}", tried)
    if version is None or distance == 0:
        return version
    return Version(f"{version.public}+{distance}.g{match['sha']}")


def _git(root: Path, *args: str) -> str | None:
    """Output of ``git -C root ARGS``, or None when git is missing or fails."""
    cmd = ["git", "-c", f"safe.directory={root}", "-C", str(root), *args]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


# --------------------------------------------------------------------------- checksum


def tree_checksum(path: Path, files: list[str] | None = None) -> dict[str, str]:
    """sha256 of each file of the tree at ``path``, keyed by POSIX relative path, sorted.

    With ``files=None`` every regular file is included (symlinks and ``.git/`` are skipped).
    With a list, only those relative paths; a listed path that does not exist is left out, so
    a file created by a patch shows up as a difference. Raises ``TreeError`` when ``path`` is
    not a directory or a listed path is absolute or leaves the tree.
    """
    root = Path(path)
    if not root.is_dir():
        raise TreeError(f"cannot checksum {root}: not a directory")
    names = _all_files(root) if files is None else _listed_files(root, files)
    return {name: _sha256(root / name) for name in sorted(names)}


def _all_files(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        base = Path(dirpath)
        for name in filenames:
            full = base / name
            if full.is_file() and not full.is_symlink():
                found.append(full.relative_to(root).as_posix())
    return found


def _listed_files(root: Path, files: list[str]) -> list[str]:
    found = []
    for name in files:
        if not _inside(name) or name.replace("\\", "/").strip("/") == "":
            raise TreeError(f"cannot checksum {name!r}: give a path relative to the tree {root}")
        rel = posixpath.normpath(name.replace("\\", "/"))
        if (root / rel).is_file():
            found.append(rel)
    return found
