"""Fake vllm-ascend trees and bundles, and the faults injected into them, for the tree tests.

Trees are small fake vllm-ascend trees built in a tmp dir (plain, as an sdist unpacks, and as
real `git init` checkouts); patches are unified diffs with DEP-3 headers written here; bundles
follow the bundle/lock contract (optkit.lock.json + patches/series).
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from optkit.tree import gitops, journal
from optkit.tree.inspect import tree_checksum

REPO = Path(__file__).resolve().parents[1]
MODULE = "".join(f"def f{j}():\n    return {j}\n\n\n" for j in range(8))
MODULES = ["attention.py", "moe.py", "sampler.py", "rope.py"]
IN_RANGE = ">=0.23.0,<0.24"


def run_git(root: Path, *args: str) -> str:
    config = ["user.name=t", "user.email=t@example.com", "commit.gpgsign=false"]
    cmd = ["git", *(f for c in config for f in ("-c", c)), "-C", str(root), *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def make_tree(root: Path, kind: str = "sdist", version: str = "0.23.0") -> Path:
    """A fake vllm-ascend tree: an unpacked sdist, or (kind='git') a git checkout of it."""
    package = root / "vllm_ascend"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    for name in MODULES:
        (package / name).write_text(MODULE)
    if kind == "git":
        run_git(root, "init", "-q")
        run_git(root, "add", "-A")
        run_git(root, "commit", "-q", "-m", "v0.23.0")
    return root


def dep3(recipe: str, description: str = "test change") -> str:
    return (f"Description: {description}\nOrigin: vendor, test\nForwarded: no\n"
            f"Last-Update: 2026-01-01\nRecipe: {recipe}\n---\n")


def diff(path: str, old: str, new: str) -> str:
    """A unified diff turning the text ``old`` of ``path`` into ``new`` ('' = no file)."""
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                 f"a/{path}" if old else "/dev/null", f"b/{path}" if new else "/dev/null")
    return "".join(lines)


def edit(recipe: str, module: str, line: int, value: str, base: str = MODULE) -> tuple:
    """A patch of recipe ``recipe``: in vllm_ascend/``module``, ``return line`` → ``return value``."""
    path = f"vllm_ascend/{module}"
    new = base.replace(f"    return {line}\n", f"    return {value}\n")
    return recipe, path, dep3(recipe) + diff(path, base, new)


def make_bundle(dest: Path, patches: list[tuple], ranges: dict | None = None,
                pending: list | None = None) -> Path:
    """A bundle directory per the bundle contract, for patches (recipe, target, text)."""
    (dest / "patches").mkdir(parents=True)
    entries, recipes = [], {}
    for n, (recipe, target, text) in enumerate(patches, 1):
        name = f"{n:04d}-{recipe}--{n:04d}-{recipe}.patch"
        (dest / "patches" / name).write_text(text)
        entries.append({"recipe": recipe, "file": f"{n:04d}-{recipe}.patch", "name": name,
                        "sha256": hashlib.sha256(text.encode()).hexdigest(), "targets": [target]})
        recipes[recipe] = {"kind": "patch", "title": recipe, "verification": "declared", "needs_npu": False,
                           "versions": {"vllm_ascend": (ranges or {}).get(recipe, IN_RANGE), "vllm": ">=0.23.0"}}
    lock = {"lock_version": 1, "optkit": {"version": "0.1.0", "catalog_sha256": "0" * 64},
            "request": {}, "facts": {}, "selected": list(recipes), "recipes": recipes, "decisions": {},
            "patches": entries, "launch": {}, "versions": {"vllm_ascend": "0.23.0", "vllm": "0.23.0"}}
    if pending:
        lock["pending_patches"] = pending
    (dest / "optkit.lock.json").write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    (dest / "patches" / "series").write_text("".join(e["name"] + "\n" for e in entries))
    return dest


def three_patches() -> list[tuple]:
    return [edit("moe-a", "moe.py", 1, "10"), edit("attn-b", "attention.py", 2, "20"),
            edit("rope-c", "rope.py", 3, "30")]


def source_sums(root: Path) -> dict[str, str]:
    """tree_checksum without optkit's own records."""
    return {k: v for k, v in tree_checksum(root).items() if not k.startswith(".optkit/")}


ROOT = os.geteuid() == 0


class FullDisk:
    """From the n-th write of an apply on, every write fails with ENOSPC (the disk stays full).

    Writes are optkit's backup copies and JSON records and git's patching of ``tree`` (resolved);
    renames and deletions need no space and keep working, as on a real full disk.
    """

    def __init__(self, monkeypatch, tree: Path, n: int):
        self.n, self.count = n, 0
        copy, write_json, git_apply = journal._copy_synced, journal._write_json, gitops.git_apply

        def copy_synced(src, dst):
            self.write()
            return copy(src, dst)

        def write_record(path, data):
            self.write()
            return write_json(path, data)

        def patch(cwd, data, *flags):
            if cwd == tree and not flags and self.full():
                return "error: unable to write file: No space left on device"
            return git_apply(cwd, data, *flags)

        monkeypatch.setattr(journal, "_copy_synced", copy_synced)
        monkeypatch.setattr(journal, "_write_json", write_record)
        monkeypatch.setattr(gitops, "git_apply", patch)

    def full(self) -> bool:
        self.count += 1
        return self.count >= self.n

    def write(self) -> None:
        if self.full():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def make_read_only(path: Path) -> bool:
    """Make the directory ``path`` read-only; False if this machine cannot.

    As root (whom modes do not stop) ``path`` becomes a read-only tmpfs holding a copy of it
    (``undo_read_only`` unmounts it); otherwise every file and directory loses its write bits.
    """
    if not ROOT:
        for parent, dirs, files in os.walk(path):
            for name in files:
                os.chmod(Path(parent, name), 0o444)
            os.chmod(parent, 0o555)
        return True
    copy = path.with_name(path.name + ".src")
    shutil.move(path, copy)
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True).returncode:
        return False
    shutil.copytree(copy, path, dirs_exist_ok=True, symlinks=True)
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
    return True


def undo_read_only(path: Path) -> None:
    if ROOT:
        subprocess.run(["umount", str(path)], capture_output=True)
        return
    for parent, _, _ in os.walk(path):
        os.chmod(parent, 0o755)
