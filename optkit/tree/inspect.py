"""What a directory is: a vllm-ascend tree of which version, and the sha256 of its files.

``inspect_tree`` tells whether a directory is a vllm-ascend tree and which version, without
importing or executing anything from it. ``tree_checksum`` gives sha256 per file, to prove a
tree byte-identical after a restore.
"""

from __future__ import annotations

import ast
import os
import posixpath
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from optkit.errors import TreeError
from optkit.tree.cache import sha256_file
from optkit.tree.extract import inside

FETCH_HINT = "fetch one with `optkit tree fetch 0.23.0 DIR`"


@dataclass(frozen=True)
class TreeInfo:
    """What ``inspect_tree`` found: the tree's root, version, and where the version came from."""

    root: Path
    version: Version
    version_source: str
    is_git: bool


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
    except ValueError:  # InvalidVersion, or a number too long for int()
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
    return {name: sha256_file(root / name) for name in sorted(names)}


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
        if not inside(name) or name.replace("\\", "/").strip("/") == "":
            raise TreeError(f"cannot checksum {name!r}: give a path relative to the tree {root}")
        rel = posixpath.normpath(name.replace("\\", "/"))
        if (root / rel).is_file():
            found.append(rel)
    return found
