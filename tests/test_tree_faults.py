"""Damaged bundles and tree records, unsafe state directories, and environment faults.

Every case ends with a clear error (exit 1) and a tree that is pristine or fully applied, with no
lock left behind; the unsafe ones also prove that nothing outside the tree was touched. The fake
trees and bundles come from tests/tree_support.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli
from optkit.errors import OptkitError
from optkit.tree.apply import apply, revert
from optkit.tree.inspect import tree_checksum
from optkit.tree.patchset import from_bundle
from tree_support import (ROOT, FullDisk, dep3, diff, make_bundle, make_read_only, make_tree, source_sums,
                          three_patches, undo_read_only)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def run_cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code != 3 and "internal error" not in result.output, result.output
    return result.exit_code, result.output


def set_path(data, path: tuple, value) -> None:
    for key in path[:-1]:
        data = data[key]
    if value is KeyError:
        del data[path[-1]]
    else:
        data[path[-1]] = value


def rewrite_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def setup(tmp_path):
    """A fake sdist tree and a three-patch bundle for it."""
    return make_tree(tmp_path / "tree"), make_bundle(tmp_path / "bundle", three_patches())


# --------------------------------------------------------------------------- damaged locks

LOCK = "optkit.lock.json"
LOCK_CASES = [
    ("patch-null", ("patches", 0), None, f"{LOCK}:11: patches[0]: expected a mapping of fields, got null"),
    ("patch-string", ("patches", 0), "0001.patch", f"{LOCK}:11: patches[0]: expected a mapping of fields, got a string"),
    ("patch-numeric-name", ("patches", 0, "name"), 5, f"{LOCK}:13: patches[0].name: Input should be a valid string"),
    ("patch-path-name", ("patches", 0, "name"), "../x.patch", f"{LOCK}:13: patches[0].name: '../x.patch' is not a "
     "plain file name"),
    ("patch-bad-sha256", ("patches", 0, "sha256"), "xyz", f"{LOCK}:15: patches[0].sha256: String should match "
     "pattern '^[0-9a-f]{64}$'"),
    ("patch-without-recipe", ("patches", 0, "recipe"), KeyError, f"{LOCK}:11: patches[0].recipe: missing required "
     "field 'recipe'"),
    ("patch-of-unknown-recipe", ("patches", 0, "recipe"), "other", f"{LOCK}:10: patches: patches[0] belongs to "
     "recipe 'other', which is not one of the lock's recipes"),
    ("patch-unknown-key", ("patches", 0, "extra"), 1, f"{LOCK}:12: patches[0].extra: unknown field 'extra'"),
    ("patches-mapping", ("patches",), {"a": 1}, f"{LOCK}:10: patches: Input should be a valid list"),
    ("pending-string", ("pending_patches",), "x", f"{LOCK}:39: pending_patches: Input should be a valid list"),
    ("pending-number", ("pending_patches",), [5], f"{LOCK}:40: pending_patches[0]: expected a mapping of fields, "
     "got a number"),
    ("recipes-list", ("recipes",), [], f"{LOCK}:39: recipes: Input should be a valid dictionary"),
    ("recipe-null", ("recipes", "moe-a"), None, f"{LOCK}:50: recipes.moe-a: expected a mapping of fields, got null"),
    ("lock-version-true", ("lock_version",), True, f"{LOCK}:5: lock_version: is True, this optkit reads lock_version 1"),
]


@pytest.mark.parametrize("path, value, message", [c[1:] for c in LOCK_CASES], ids=[c[0] for c in LOCK_CASES])
def test_damaged_lock_names_the_field(setup, path, value, message):
    tree, bundle = setup
    rewrite_json(bundle / LOCK, lambda lock: set_path(lock, path, value))
    pristine = tree_checksum(tree)
    code, output = run_cli("apply", bundle, "--tree", tree)
    assert code == 1 and message in output, output
    assert tree_checksum(tree) == pristine


def test_duplicate_patch_name_in_lock(setup):
    tree, bundle = setup
    rewrite_json(bundle / LOCK, lambda lock: lock["patches"][1].update(name=lock["patches"][0]["name"]))
    code, output = run_cli("apply", bundle, "--tree", tree)
    assert code == 1 and "patches: the name '0001-moe-a--0001-moe-a.patch' is listed twice" in output


# --------------------------------------------------------------------------- damaged tree records

STATE_CASES = [
    ("truncated", lambda p: p.write_text(p.read_text()[:40]), "state.json:"),
    ("empty", lambda p: p.write_text(""), "state.json:1: invalid JSON: Expecting value"),
    ("utf16", lambda p: p.write_bytes(p.read_text().encode("utf-16")), "state.json:1: is UTF-16 encoded"),
    ("list", lambda p: p.write_text("[]"), "state.json:1: expected a mapping of fields at the top level"),
    ("patches-string", lambda p: rewrite_json(p, lambda s: s.update(patches="x")), "patches: Input should be a valid list"),
    ("file-hash-number", lambda p: rewrite_json(p, lambda s: s["files"]["vllm_ascend/moe.py"].update(before=5)),
     "files.vllm_ascend/moe.py.before: Input should be a valid string"),
    ("file-outside-tree", lambda p: rewrite_json(p, lambda s: s["files"].update({"../victim.txt": {"before": None,
     "after": None}})), "'../victim.txt' is not a file of the vllm-ascend tree: a '..' component leaves the tree"),
    ("absolute-new-dir", lambda p: rewrite_json(p, lambda s: s.update(new_dirs=["/tmp"])),
     "new_dirs[0]: '/tmp' is not a file of the vllm-ascend tree: an absolute path"),
    ("unknown-key", lambda p: rewrite_json(p, lambda s: s.update(extra=1)), "extra: unknown field 'extra'"),
    # well-formed, but it would make revert delete moe.py: the digest tells
    ("edit-that-reads-well", lambda p: rewrite_json(p, lambda s: s["files"]["vllm_ascend/moe.py"].update(before=None)),
     "digest: the record was changed after optkit wrote it: its digest does not match its content"),
    ("a-directory", lambda p: (p.unlink(), p.mkdir()), "state.json: cannot read: Is a directory"),
]


@pytest.mark.parametrize("command", ["status", "revert", "apply"])
@pytest.mark.parametrize("damage, message", [c[1:] for c in STATE_CASES], ids=[c[0] for c in STATE_CASES])
def test_damaged_state_is_reported_never_a_crash(setup, tmp_path, command, damage, message):
    tree, bundle = setup
    victim = tmp_path / "victim.txt"
    victim.write_text("outside the tree\n")
    apply(tree, from_bundle(bundle))
    applied = source_sums(tree)
    damage(tree / ".optkit" / "state.json")
    args = {"status": ["status"], "revert": ["revert"], "apply": ["apply", bundle]}[command]
    code, output = run_cli(*args, "--tree", tree)
    assert code == 1 and message in output and "is damaged or was edited by hand" in output, output
    assert source_sums(tree) == applied and victim.exists()
    assert not (tree / ".optkit" / "lock").exists()


JOURNAL_CASES = [
    ("pid-string", lambda j: j.update(pid="1"), "pid: Input should be a valid integer"),
    ("done-null", lambda j: j.update(done=None), "done: Input should be a valid list"),
    ("backup-outside", lambda j: j["backup"].update({"../victim.txt": None}), "is not a file of the vllm-ascend tree"),
    ("state-word", lambda j: j.update(state="done"), "state: Input should be 'applying'"),
]


@pytest.mark.parametrize("damage, message", [c[1:] for c in JOURNAL_CASES], ids=[c[0] for c in JOURNAL_CASES])
def test_damaged_journal_is_reported_and_outside_files_survive(setup, tmp_path, damage, message):
    tree, bundle = setup
    victim = tmp_path / "victim.txt"
    victim.write_text("outside the tree\n")
    pristine = source_sums(tree)
    (tree / ".optkit").mkdir()
    record = {"state": "applying", "pid": 999999, "backup": {"vllm_ascend/moe.py": None}, "new_dirs": [],
              "patches": ["x"], "done": []}
    damage(record)
    (tree / ".optkit" / "journal.json").write_text(json.dumps(record, indent=2))
    for args in (["status"], ["revert"], ["apply", bundle]):
        code, output = run_cli(*args, "--tree", tree)
        assert code == 1 and message in output, output
    assert source_sums(tree) == pristine and victim.exists()


# --------------------------------------------------------------------------- unsafe state directories


def _outside_with_records(tmp_path: Path) -> Path:
    """A directory outside the tree that looks like optkit's records (what a deletion would hit)."""
    outside = tmp_path / "outside"
    for name in ("backup", "pristine", "tmp"):
        (outside / name).mkdir(parents=True)
        (outside / name / "precious.txt").write_text("not optkit's\n")
    return outside


@pytest.mark.parametrize("command", ["apply", "revert", "status"])
def test_symlinked_state_directory_is_refused_and_its_target_kept(setup, tmp_path, command):
    """Before the fix, `optkit apply` deleted outside/backup/ (and revert outside/pristine/)."""
    tree, bundle = setup
    outside = _outside_with_records(tmp_path)
    before = tree_checksum(outside)
    (tree / ".optkit").symlink_to(outside, target_is_directory=True)
    args = {"apply": ["apply", bundle], "revert": ["revert"], "status": ["status"]}[command]
    code, output = run_cli(*args, "--tree", tree)
    assert code == 1 and ".optkit is a symlink (to " in output and "nothing was changed" in output, output
    assert tree_checksum(outside) == before


def test_symlink_inside_state_directory_is_refused(setup, tmp_path):
    tree, bundle = setup
    outside = _outside_with_records(tmp_path)
    before = tree_checksum(outside)
    (tree / ".optkit").mkdir()
    (tree / ".optkit" / "backup").symlink_to(outside / "backup", target_is_directory=True)
    code, output = run_cli("apply", bundle, "--tree", tree)
    assert code == 1 and ".optkit/backup is a symlink" in output, output
    assert tree_checksum(outside) == before


def test_state_directory_that_is_a_file_is_refused(setup):
    tree, bundle = setup
    (tree / ".optkit").write_text("not a directory\n")
    for args in (["apply", bundle], ["revert"], ["status"]):
        code, output = run_cli(*args, "--tree", tree)
        assert code == 1 and ".optkit is a file, where optkit keeps its records directory" in output, output
    assert (tree / ".optkit").read_text() == "not a directory\n"


def test_revert_refuses_a_directory_turned_into_a_link_out_of_the_tree(tmp_path):
    """A patch created vllm_ascend/extra/new.py; then vllm_ascend/extra became a link to a directory
    outside. Before the fix, revert deleted outside/new.py."""
    tree = make_tree(tmp_path / "tree")
    new_file = ("extra-d", "vllm_ascend/extra/new.py", dep3("extra-d") + diff("vllm_ascend/extra/new.py", "", "X = 1\n"))
    apply(tree, from_bundle(make_bundle(tmp_path / "bundle", [new_file])))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "new.py").write_text("X = 1\n")
    shutil.rmtree(tree / "vllm_ascend" / "extra")
    (tree / "vllm_ascend" / "extra").symlink_to(outside, target_is_directory=True)
    code, output = run_cli("revert", "--tree", tree, "--force")
    assert code == 1 and "a directory on the way is now a symlink out of" in output, output
    assert (outside / "new.py").read_text() == "X = 1\n"


# --------------------------------------------------------------------------- read-only trees


@pytest.fixture
def read_only_tree(tmp_path):
    tree = make_tree(tmp_path / "tree")
    if not make_read_only(tree):
        pytest.skip("cannot make a read-only directory here (root, but no tmpfs mount)")
    yield tree
    undo_read_only(tree)


def test_read_only_tree_is_refused_before_anything(read_only_tree, tmp_path):
    bundle = make_bundle(tmp_path / "bundle", three_patches())
    pristine = tree_checksum(read_only_tree)
    code, output = run_cli("apply", bundle, "--tree", read_only_tree)
    assert code == 1 and f"cannot patch {read_only_tree}: optkit must write these and may not" in output, output
    assert "the directory is not writable" in output and "nothing was changed" in output
    assert tree_checksum(read_only_tree) == pristine
    code, output = run_cli("revert", "--tree", read_only_tree)
    assert code == 1 and "cannot take the tree lock" in output, output
    assert run_cli("status", "--tree", read_only_tree)[0] == 0


@pytest.mark.parametrize("rel, mode, words", [
    pytest.param("vllm_ascend/rope.py", 0o444, "vllm_ascend/rope.py: the file is read-only", id="file"),
    pytest.param("vllm_ascend", 0o555, "vllm_ascend/: the directory is not writable", id="directory"),
])
def test_read_only_target_is_refused_even_for_root(setup, rel, mode, words):
    tree, bundle = setup
    (tree / rel).chmod(mode)
    pristine = tree_checksum(tree)
    try:
        code, output = run_cli("apply", bundle, "--tree", tree)
    finally:
        (tree / rel).chmod(0o755 if mode == 0o555 else 0o644)
    assert code == 1 and f"{tree}/{words}" in output, output
    assert tree_checksum(tree) == pristine and not (tree / ".optkit").exists()


# --------------------------------------------------------------------------- a full disk


def test_disk_full_at_every_write_leaves_the_tree_pristine(tmp_path, monkeypatch):
    faults = 0
    for n in range(1, 30):
        tree = make_tree(tmp_path / f"tree-{n}")
        specs = from_bundle(make_bundle(tmp_path / f"bundle-{n}", three_patches()))
        pristine = source_sums(tree)
        with monkeypatch.context() as patched:
            disk = FullDisk(patched, tree, n)
            try:
                apply(tree, specs)
            except OptkitError as exc:
                assert "every file was restored, the tree is as before" in str(exc), str(exc)
                assert source_sums(tree) == pristine and not (tree / ".optkit").exists(), n
                faults += 1
                continue
            finally:
                assert not (tree / ".optkit" / "lock").exists()
        assert disk.count < n  # it finished before the n-th write: every write point was covered
        break
    print(f"ENOSPC injected at each of {faults} writes")
    assert faults >= 8  # lock-free writes: 3 backups, the journal, 3 patches + 3 journal updates, the state
    apply(tree, specs)  # with space again: applies, and reverts to pristine
    revert(tree)
    assert source_sums(tree) == pristine


def _tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")


def _fill(mount: Path, leave_pages: int) -> None:
    """Fill ``mount`` so that ``leave_pages`` pages (4 KiB) stay free."""
    stat = os.statvfs(mount)
    free = stat.f_bavail * stat.f_frsize - leave_pages * stat.f_frsize
    with open(mount / "filler", "wb") as f:
        f.write(b"\0" * max(free, 0))


@pytest.mark.skipif(not ROOT, reason="mounting a tmpfs needs root")
def test_real_full_disk_at_every_size_leaves_the_tree_pristine_or_applied(tmp_path):
    """A tree on a small tmpfs filled to leave 0, 1, 2, … pages free, through the real CLI."""
    mount = tmp_path / "disk"
    _tmpfs(mount, "2m")
    bundle = make_bundle(tmp_path / "bundle", three_patches())
    try:
        outcomes = []
        for pages in range(0, 40):
            tree = make_tree(mount / "tree")
            pristine = source_sums(tree)
            _fill(mount, pages)
            proc = subprocess.run([sys.executable, "-m", "optkit.cli.main", "apply", str(bundle), "--tree", str(tree)],
                                  capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1])
            assert proc.returncode in (0, 1) and "internal error" not in proc.stderr, proc.stderr
            assert not (tree / ".optkit" / "lock").exists()
            if proc.returncode == 1:
                assert source_sums(tree) == pristine, proc.stderr
                assert not (tree / ".optkit" / "journal.json").exists()
            else:
                assert source_sums(tree) != pristine and (tree / ".optkit" / "state.json").is_file()
            outcomes.append(proc.returncode)
            (mount / "filler").unlink()
            shutil.rmtree(tree)
            if proc.returncode == 0:
                break
        assert outcomes[0] == 1 and outcomes[-1] == 0 and len(outcomes) > 2, outcomes
        print(f"full disk: {len(outcomes) - 1} sizes refused cleanly, applied with {len(outcomes) - 1} pages free")
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


# --------------------------------------------------------------------------- where files are written


def test_bundle_output_under_a_file_or_unwritable(tmp_path):
    (tmp_path / "file").write_text("x")
    code, output = run_cli("plan", "qwen3.5-35b", "-o", tmp_path / "file" / "bundle")
    assert code == 1 and f"{tmp_path / 'file'} is a file; give a directory elsewhere" in output, output
    (tmp_path / "locked").mkdir()
    if not make_read_only(tmp_path / "locked"):
        pytest.skip("cannot make a read-only directory here")
    try:
        code, output = run_cli("plan", "qwen3.5-35b", "-o", tmp_path / "locked" / "bundle")
    finally:
        undo_read_only(tmp_path / "locked")
    assert code == 1 and f"cannot write {tmp_path / 'locked' / 'bundle'}" in output, output
    assert ("Read-only file system" if ROOT else "Permission denied") in output


def test_cache_dir_under_a_file(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "file" / "cache"))
    monkeypatch.setattr("optkit.tree.fetch._require_build_tools", lambda: None)
    code, output = run_cli("tree", "fetch", "0.23.0", tmp_path / "dest")
    assert code == 1 and "cannot use optkit's cache" in output and "Not a directory" in output, output
    assert run_cli("plan", "qwen3.5-35b")[0] == 0  # planning never needs the cache
