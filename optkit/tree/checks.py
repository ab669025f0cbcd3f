"""Everything checked before a tree is touched.

The tree's version against each recipe's range, the paths (no absolute, ``..``,
``.optkit/``/``.git/`` or symlinked ones), uncommitted changes of the targets in a git checkout,
each patch alone (``git apply --check``, else ``--check --reverse`` = already present), and all
patches in order on a scratch copy of their targets. Each check raises with every problem named
and the words "nothing was changed".
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from optkit.catalog.paths import cache_dir
from optkit.errors import PatchError, TreeError
from optkit.tree import gitops
from optkit.tree.inspect import TreeInfo
from optkit.tree.patchset import PatchSpec, targets_of
from optkit.tree.safety import unsafe_path


def refuse_cache_tree(root: Path) -> None:
    trees = (cache_dir() / "trees").resolve()
    if root == trees or trees in root.parents:
        raise TreeError(
            f"{root} is optkit's pristine cached tree; patch a copy instead: "
            "`optkit tree fetch VERSION DEST`, then `optkit apply BUNDLE --tree DEST`"
        )


def _in_range(version: Version, spec: str) -> bool:
    return SpecifierSet(spec, prereleases=True).contains(version)


def check_versions(info: TreeInfo, patches: list[PatchSpec]) -> None:
    excluded = {p.recipe: p.version_spec for p in patches if not _in_range(info.version, p.version_spec)}
    if excluded:
        lines = "\n".join(f"  - recipe {r} needs vllm-ascend {s}" for r, s in excluded.items())
        raise TreeError(
            f"the tree {info.root} is vllm-ascend {info.version} (from {info.version_source}), "
            f"outside the range of {len(excluded)} recipe(s):\n{lines}\n"
            f"nothing was changed; use a tree of a version these recipes support, or plan again "
            f"for this version (--vllm-ascend-version {info.version})"
        )


def check_paths(root: Path, patches: list[PatchSpec]) -> None:
    problems = [f"  - patch {p.name} (recipe {p.recipe}) touches {rel!r}: {why}"
                for p in patches for rel in p.targets
                for why in [unsafe_path(root, rel)] if why]
    if problems:
        raise PatchError("refusing to apply: the bundle's patches reach outside the tree\n"
                         + "\n".join(problems) + "\nnothing was changed")


def check_writable(root: Path, files: list[str]) -> None:
    """The tree root (for ``.optkit/``), every target file and the directory it is written in must
    be writable: git replaces the files, and a rollback must be able to put them back. A file or
    directory without its owner's write bit is refused even when the user (root) could write it."""
    folders = dict.fromkeys([root] + [_folder_of(root / rel) for rel in files])
    problems = [f"  - {d}/: the directory is not writable" for d in folders if read_only(d)]
    problems += [f"  - {root / rel}: the file is read-only" for rel in files if (root / rel).is_file() and read_only(root / rel)]
    if problems:
        raise TreeError(f"cannot patch {root}: optkit must write these and may not:\n" + "\n".join(problems)
                        + "\nmake them writable (chmod u+w), or patch a writable copy "
                        "(`optkit tree fetch VERSION DEST`); nothing was changed")


def _folder_of(path: Path) -> Path:
    """The directory a file at ``path`` is written in, or the nearest one of its parents that exists."""
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    return folder


def read_only(path: Path) -> bool:
    """No write bit for the owner, or no write access for this user (root has it everywhere)."""
    return not (path.stat().st_mode & stat.S_IWUSR and os.access(path, os.W_OK))


def check_committed(root: Path, files: list[str]) -> None:
    if not files:
        return  # without a pathspec git status would report the whole checkout
    proc = gitops.git(root, "status", "--porcelain", "--untracked-files=all", "--",
                *(f":(literal){f}" for f in files))
    if proc.returncode != 0:
        raise TreeError(f"`git status` failed in {root}: {proc.stderr.decode(errors='replace').strip()}")
    dirty = proc.stdout.decode(errors="replace").splitlines()
    if dirty:
        raise TreeError(
            f"the git checkout {root} has uncommitted changes in files the patches touch:\n"
            + "\n".join(f"  {line}" for line in dirty)
            + "\ncommit or stash them (or pass --force to patch over them); nothing was changed"
        )


def classify(root: Path, patches: list[PatchSpec], data: dict[str, bytes]) -> tuple[list, list]:
    """Split into (to apply, already present); refuse listing every patch that fits neither."""
    to_apply, present, failures = [], [], []
    for spec in patches:
        error = gitops.git_apply(root, data[spec.name], "--check")
        if error is None:
            _check_targets(root, spec, data[spec.name])
            to_apply.append(spec)
        elif gitops.git_apply(root, data[spec.name], "--check", "--reverse") is None:
            present.append(spec)
        else:
            failures.append(f"  - patch {spec.name} (recipe {spec.recipe}):\n{gitops.indent(error)}")
    if failures:
        raise PatchError(f"{len(failures)} patch(es) do not apply to {root} and are not already "
                         "present:\n" + "\n".join(failures) + "\nnothing was changed")
    return to_apply, present


def _check_targets(root: Path, spec: PatchSpec, patch: bytes) -> None:
    """Cross-check ``spec.targets`` (what optkit backs up) against the files git would write."""
    proc = gitops.git(root, "apply", "-p1", "--numstat", "-z", stdin=patch)
    touched = gitops.numstat_paths(proc.stdout.decode(errors="surrogateescape"))
    if proc.returncode != 0 or not touched <= set(spec.targets):
        raise PatchError(f"patch {spec.name} (recipe {spec.recipe}): git would write "
                         f"{sorted(touched)}, but optkit reads {list(spec.targets)} from its headers; "
                         "the patch uses a form optkit does not parse (quoted or spaced names?)")


def check_together(root: Path, to_apply: list[PatchSpec], data: dict[str, bytes]) -> None:
    """Apply all patches in order to a scratch copy of their targets: catch patches that fight."""
    if len(to_apply) < 2:
        return
    with tempfile.TemporaryDirectory(prefix="optkit-check-") as tmp:
        scratch = Path(tmp)
        for rel in targets_of(to_apply):
            if (root / rel).is_file():
                (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, scratch / rel)
        for n, spec in enumerate(to_apply):
            error = gitops.git_apply(scratch, data[spec.name])
            if error is not None:
                raise PatchError(_conflict_message(spec, to_apply[:n], error))


def _conflict_message(spec: PatchSpec, earlier: list[PatchSpec], error: str) -> str:
    rivals = [p for p in earlier if set(p.targets) & set(spec.targets)]
    named = ", ".join(f"{p.name} (recipe {p.recipe})" for p in rivals) or "the patches before it"
    return (f"patch {spec.name} (recipe {spec.recipe}) applies alone but not after {named}: "
            f"they change the same lines\n{gitops.indent(error)}\nthese recipes cannot be applied "
            "together; nothing was changed")
