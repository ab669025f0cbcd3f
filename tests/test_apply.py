"""Tests of optkit.tree.patchset and optkit.tree.apply: loading bundles, applying, reverting, recovering.

The fake trees and bundles are built by tests/tree_support.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.tree import gitops
from optkit.tree.apply import apply, revert, status
from optkit.cli.main import cli
from optkit.errors import BundleError, PatchError, TreeError
from optkit.catalog.patchfile import parse_dep3, patch_paths
from optkit.tree.patchset import from_bundle, from_lock, load
from optkit.tree.inspect import tree_checksum
from tree_support import (IN_RANGE, MODULE, MODULES, REPO, run_git, dep3, diff, edit, make_bundle, make_tree,
                          source_sums, three_patches)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(params=["sdist", "git"])
def tree(request, tmp_path) -> Path:
    return make_tree(tmp_path / "tree", request.param)


@pytest.fixture
def sdist_tree(tmp_path) -> Path:
    return make_tree(tmp_path / "tree")


def run_cli(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


# --------------------------------------------------------------------------- patch text


@pytest.mark.parametrize("text, expected", [
    (dep3("moe-a", "Fuse the thing") + "--- a/x\n", {"Description": "Fuse the thing", "Origin": "vendor, test",
                                                     "Forwarded": "no", "Last-Update": "2026-01-01",
                                                     "Recipe": "moe-a"}),
    ("Description: two\n lines\n .\n end\nRecipe: r\n---\n", {"Description": "two\nlines\n\nend", "Recipe": "r"}),
    ("--- a/x\n+++ b/x\n", {}),
    ("Description: stops at the blank line\n\nNot: a field\n", {"Description": "stops at the blank line"}),
], ids=["full-header", "continuation", "no-header", "blank-line-ends"])
def test_parse_dep3(text, expected):
    assert parse_dep3(text) == expected


@pytest.mark.parametrize("text, expected", [
    (dep3("r") + diff("vllm_ascend/a.py", "x\n", "y\n"), ["vllm_ascend/a.py"]),
    (diff("vllm_ascend/new/b.py", "", "hello\n"), ["vllm_ascend/new/b.py"]),
    (diff("vllm_ascend/gone.py", "bye\n", ""), ["vllm_ascend/gone.py"]),
    (diff("a.py", "-- old\nkeep\n", "keep\n") + diff("b.py", "1\n", "2\n"), ["a.py", "b.py"]),
    ("--- a/x.py\t2026-01-01 00:00:00\n+++ b/x.py\t2026-01-01\n@@ -1 +1 @@\n-a\n+b\n", ["x.py"]),
    ("diff --git a/old.py b/new.py\nsimilarity index 100%\nrename from old.py\nrename to new.py\n",
     ["old.py", "new.py"]),
    ("--- a/../evil.py\n+++ b/../evil.py\n", ["../evil.py"]),
    ("--- /etc/passwd\n+++ /etc/passwd\n", ["/etc/passwd"]),
], ids=["modify", "create", "delete", "removed-line-starting-with-dashes", "timestamps", "git-rename",
        "dotdot-kept-for-the-check", "absolute-kept-for-the-check"])
def test_patch_paths(text, expected):
    assert patch_paths(text) == expected


# --------------------------------------------------------------------------- loading bundles


def test_bundle_and_lock_load_the_same_patches(tmp_path):
    bundle = make_bundle(tmp_path / "b", three_patches())
    specs = from_bundle(bundle)
    assert [s.recipe for s in specs] == ["moe-a", "attn-b", "rope-c"]
    assert specs[0].targets == ("vllm_ascend/moe.py",) and specs[0].version_spec == IN_RANGE
    assert from_lock(bundle / "optkit.lock.json") == specs == load(bundle)


def _tamper_patch(bundle: Path) -> None:
    path = next(p for p in (bundle / "patches").iterdir() if p.name != "series")
    path.write_text(path.read_text() + " ")


def _reorder_series(bundle: Path) -> None:
    series = bundle / "patches" / "series"
    series.write_text("".join(reversed(series.read_text().splitlines(True))))


def _wrong_targets(bundle: Path) -> None:
    lock = json.loads((bundle / "optkit.lock.json").read_text())
    lock["patches"][0]["targets"] = ["vllm_ascend/other.py"]
    (bundle / "optkit.lock.json").write_text(json.dumps(lock))


def _bad_range(bundle: Path) -> None:
    lock = json.loads((bundle / "optkit.lock.json").read_text())
    lock["recipes"]["moe-a"]["versions"]["vllm_ascend"] = ">>0.23"
    (bundle / "optkit.lock.json").write_text(json.dumps(lock))


@pytest.mark.parametrize("damage, error, words", [
    (_tamper_patch, PatchError, "the bundle was changed after it was written"),
    (_reorder_series, BundleError, "in apply order; the bundle was edited by hand"),
    (_wrong_targets, PatchError, "but the lock's targets are ['vllm_ascend/other.py']"),
    (_bad_range, BundleError, "optkit.lock.json:1: recipes.moe-a.versions.vllm_ascend: '>>0.23' is not a PEP 440 "
     "version specifier"),
], ids=["patch-sha256", "series-order", "targets", "version-range"])
def test_damaged_bundle_refused(tmp_path, damage, error, words):
    bundle = make_bundle(tmp_path / "b", three_patches())
    damage(bundle)
    with pytest.raises(error) as exc:
        from_bundle(bundle)
    assert words in str(exc.value)


def test_pending_patches_refused_unless_allowed(tmp_path):
    pending = [{"recipe": "mc2-cap", "file": "0001-mc2-cap.patch"}]
    bundle = make_bundle(tmp_path / "b", three_patches(), pending=pending)
    with pytest.raises(BundleError, match=r"not written yet \(status: pending\): mc2-cap \(0001-mc2-cap.patch\)"):
        from_bundle(bundle)
    assert len(from_bundle(bundle, allow_pending=True)) == 3


# --------------------------------------------------------------------------- apply, status, revert


def test_apply_status_revert_is_byte_identical(tree, tmp_path):
    pristine = tree_checksum(tree)
    specs = from_bundle(make_bundle(tmp_path / "b", three_patches()))
    result = apply(tree, specs)
    assert [o.outcome for o in result.outcomes] == ["applied"] * 3
    assert "    return 10\n" in (tree / "vllm_ascend" / "moe.py").read_text()
    state = status(tree)
    assert [o.name for o in state.patches] == [s.name for s in specs] and state.drift == []
    assert state.files == ["vllm_ascend/attention.py", "vllm_ascend/moe.py", "vllm_ascend/rope.py"]
    reverted = revert(tree)
    assert len(reverted.reverted) == 3 and len(reverted.restored) == 3
    assert tree_checksum(tree) == pristine and not (tree / ".optkit").exists()


def test_apply_twice_is_a_no_op(sdist_tree, tmp_path):
    specs = from_bundle(make_bundle(tmp_path / "b", three_patches()))
    apply(sdist_tree, specs)
    before = tree_checksum(sdist_tree)
    again = apply(sdist_tree, specs)
    assert again.already_applied and {o.outcome for o in again.outcomes} == {"already applied"}
    assert tree_checksum(sdist_tree) == before
    result = run_cli("apply", tmp_path / "b", "--tree", sdist_tree)
    assert result.exit_code == 0 and "already applied, nothing to do" in result.output


def test_other_patches_on_an_applied_tree_refused(sdist_tree, tmp_path):
    apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b1", three_patches()[:1])))
    with pytest.raises(PatchError, match=r"already has other optkit patches applied \(recipes moe-a\)"):
        apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b2", three_patches())))


def test_new_file_and_its_directory_removed_by_revert(tree, tmp_path):
    pristine = tree_checksum(tree)
    patch = ("new-op", "vllm_ascend/ops/fused.py",
             dep3("new-op") + diff("vllm_ascend/ops/fused.py", "", "def fused():\n    pass\n"))
    apply(tree, from_bundle(make_bundle(tmp_path / "b", [patch])))
    assert (tree / "vllm_ascend" / "ops" / "fused.py").is_file()
    revert(tree)
    assert tree_checksum(tree) == pristine and not (tree / "vllm_ascend" / "ops").exists()


def test_deleted_file_restored_by_revert(sdist_tree, tmp_path):
    pristine = tree_checksum(sdist_tree)
    patch = ("drop-rope", "vllm_ascend/rope.py", dep3("drop-rope") + diff("vllm_ascend/rope.py", MODULE, ""))
    apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", [patch])))
    assert not (sdist_tree / "vllm_ascend" / "rope.py").exists()
    revert(sdist_tree)
    assert tree_checksum(sdist_tree) == pristine


def test_dry_run_changes_nothing(sdist_tree, tmp_path):
    pristine = tree_checksum(sdist_tree)
    result = apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", three_patches())), dry_run=True)
    assert [o.outcome for o in result.outcomes] == ["would apply"] * 3
    assert tree_checksum(sdist_tree) == pristine and not (sdist_tree / ".optkit").exists()


def test_plain_tree_inside_another_git_repository(tmp_path):
    """git must not climb to the enclosing repository (it would skip the tree's files)."""
    run_git(tmp_path, "init", "-q")
    root = make_tree(tmp_path / "work" / "tree")
    pristine = tree_checksum(root)
    apply(root, from_bundle(make_bundle(tmp_path / "b", three_patches())))
    assert "    return 20\n" in (root / "vllm_ascend" / "attention.py").read_text()
    revert(root)
    assert tree_checksum(root) == pristine


def test_ten_patches_apply_quickly(sdist_tree, tmp_path):
    texts = {f"vllm_ascend/{m}": MODULE for m in MODULES}
    patches = []
    for n in range(10):  # lines 0, 2, 4 of each module; patches of one module build on each other
        recipe, path = f"r{n}", f"vllm_ascend/{MODULES[n % 4]}"
        new = texts[path].replace(f"    return {n // 4 * 2}\n", f"    return {100 + n}\n")
        patches.append((recipe, path, dep3(recipe) + diff(path, texts[path], new)))
        texts[path] = new
    started = time.monotonic()
    result = apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", patches)))
    assert [o.outcome for o in result.outcomes] == ["applied"] * 10
    assert time.monotonic() - started < 5
    assert all((sdist_tree / path).read_text() == text for path, text in texts.items())


# --------------------------------------------------------------------------- refusals before any change


def test_version_outside_ranges_refused_listing_every_recipe(tmp_path):
    root = make_tree(tmp_path / "tree", version="0.18.0")
    pristine = tree_checksum(root)
    bundle = make_bundle(tmp_path / "b", three_patches(), ranges={"moe-a": ">=0.23", "rope-c": "==0.23.*"})
    with pytest.raises(TreeError) as exc:
        apply(root, from_bundle(bundle))
    message = str(exc.value)
    assert "is vllm-ascend 0.18.0 (from _version.py), outside the range of 3 recipe(s):" in message
    for line in ("recipe moe-a needs vllm-ascend >=0.23", "recipe attn-b needs vllm-ascend >=0.23.0,<0.24",
                 "recipe rope-c needs vllm-ascend ==0.23.*"):
        assert line in message
    assert tree_checksum(root) == pristine


def test_prerelease_in_range(tmp_path):
    root = make_tree(tmp_path / "tree", version="0.23.0rc1")
    bundle = make_bundle(tmp_path / "b", three_patches(), ranges={r: ">=0.23.0rc1" for r in ("moe-a", "attn-b", "rope-c")})
    assert len(apply(root, from_bundle(bundle)).outcomes) == 3


def test_patch_that_does_not_apply_refused_up_front(tree, tmp_path):
    pristine = tree_checksum(tree)
    broken = edit("bad-d", "sampler.py", 5, "50", base=MODULE.replace("def f5", "def g5"))
    with pytest.raises(PatchError) as exc:
        apply(tree, from_bundle(make_bundle(tmp_path / "b", [three_patches()[0], broken])))
    assert "1 patch(es) do not apply" in str(exc.value) and "(recipe bad-d)" in str(exc.value)
    assert "patch does not apply" in str(exc.value)  # git's own words
    assert tree_checksum(tree) == pristine


def test_patches_fighting_over_the_same_lines_detected_up_front(tree, tmp_path):
    pristine = tree_checksum(tree)
    first, second = edit("moe-a", "moe.py", 4, "40"), edit("moe-z", "moe.py", 4, "44")
    with pytest.raises(PatchError) as exc:
        apply(tree, from_bundle(make_bundle(tmp_path / "b", [first, second])))
    assert "patch 0002-moe-z--0002-moe-z.patch (recipe moe-z) applies alone but not after " \
           "0001-moe-a--0001-moe-a.patch (recipe moe-a): they change the same lines" in str(exc.value)
    assert tree_checksum(tree) == pristine


def test_already_present_patch_reported_and_skipped(tree, tmp_path):
    upstream = edit("rope-c", "rope.py", 3, "30")
    (tree / "vllm_ascend" / "rope.py").write_text(MODULE.replace("    return 3\n", "    return 30\n"))
    if (tree / ".git").exists():
        run_git(tree, "commit", "-qam", "upstream has rope-c")
    pristine = tree_checksum(tree)
    result = apply(tree, from_bundle(make_bundle(tmp_path / "b", [three_patches()[0], upstream])))
    assert [o.outcome for o in result.outcomes] == ["applied", "already present"]
    assert status(tree).files == ["vllm_ascend/moe.py"]
    revert(tree)
    assert tree_checksum(tree) == pristine


def _symlinked_dir(root: Path, outside: Path) -> str:
    (root / "vllm_ascend" / "ext").symlink_to(outside, target_is_directory=True)
    return "vllm_ascend/ext/evil.py"


def _symlinked_file(root: Path, outside: Path) -> str:
    (outside / "real.py").write_text("x = 1\n")
    (root / "vllm_ascend" / "linked.py").symlink_to(outside / "real.py")
    return "vllm_ascend/linked.py"


@pytest.mark.parametrize("target, why", [
    ("../escape.py", "a '..' component leaves the tree"),
    ("vllm_ascend/../../escape.py", "a '..' component leaves the tree"),
    ("/etc/optkit-test.py", "an absolute path"),
    (".git/hooks/post-checkout", ".git/ is not part of the source"),
    (".optkit/state.json", ".optkit/ is not part of the source"),
    (_symlinked_dir, "a directory on the way is a symlink pointing outside the tree"),
    (_symlinked_file, "it is a symlink (to "),
], ids=["dotdot", "dotdot-inside", "absolute", "git-dir", "optkit-dir", "symlinked-dir", "symlinked-file"])
def test_paths_outside_the_tree_refused(sdist_tree, tmp_path, target, why):
    outside = tmp_path / "outside"
    outside.mkdir()
    if callable(target):
        target = target(sdist_tree, outside)
    old = "x = 1\n" if target.endswith("linked.py") else ""
    text = dep3("evil") + diff(target, old, "x = 2\n").replace("b//", "/").replace("a//", "/")
    pristine = tree_checksum(sdist_tree)
    with pytest.raises(PatchError) as exc:
        apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", [("evil", target, text)])))
    assert f"touches {target!r}: {why}" in str(exc.value)
    assert tree_checksum(sdist_tree) == pristine and sorted(p.name for p in outside.iterdir()) in ([], ["real.py"])


def test_path_git_reads_differently_refused(sdist_tree, tmp_path):
    """A quoted name optkit would back up under a different path than git writes."""
    target = "vllm_ascend/t\\303\\251st.py"
    text = dep3("quoted") + f'--- /dev/null\n+++ "b/{target}"\n@@ -0,0 +1 @@\n+x = 1\n'
    pristine = tree_checksum(sdist_tree)
    with pytest.raises(PatchError, match=r"git would write \['vllm_ascend/t.st.py'\], but optkit reads"):
        apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", [("quoted", target, text)])))
    assert tree_checksum(sdist_tree) == pristine


def test_cached_pristine_tree_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tree(tmp_path / "cache" / "trees" / "vllm-ascend-0.23.0")
    with pytest.raises(TreeError, match="is optkit's pristine cached tree"):
        apply(root, from_bundle(make_bundle(tmp_path / "b", three_patches())))


# --------------------------------------------------------------------------- hand edits and drift


def test_uncommitted_edit_in_git_checkout_refused_unless_forced(tmp_path):
    root = make_tree(tmp_path / "tree", "git")
    moe = root / "vllm_ascend" / "moe.py"
    moe.write_text(MODULE + "# local experiment\n")
    specs = from_bundle(make_bundle(tmp_path / "b", three_patches()))
    with pytest.raises(TreeError) as exc:
        apply(root, specs)
    assert "uncommitted changes in files the patches touch:\n   M vllm_ascend/moe.py\n" in str(exc.value)
    assert moe.read_text().endswith("# local experiment\n") and not (root / ".optkit").exists()
    apply(root, specs, force=True)
    assert "return 10" in moe.read_text() and moe.read_text().endswith("# local experiment\n")


def test_drift_after_apply_seen_by_status_and_revert(tree, tmp_path):
    pristine = tree_checksum(tree)
    specs = from_bundle(make_bundle(tmp_path / "b", three_patches()))
    apply(tree, specs)
    rope = tree / "vllm_ascend" / "rope.py"
    applied_sha = hashlib.sha256(rope.read_bytes()).hexdigest()
    rope.write_text(rope.read_text() + "# hand edit\n")
    drift = status(tree).drift
    assert [(d.path, d.expected) for d in drift] == [("vllm_ascend/rope.py", applied_sha)]
    with pytest.raises(TreeError, match=r"revert would discard these changes:\n  - vllm_ascend/rope.py: expected"):
        revert(tree)
    with pytest.raises(TreeError, match="these patches are applied, but files changed since"):
        apply(tree, specs)
    result = revert(tree, force=True)
    assert [d.path for d in result.overwritten] == ["vllm_ascend/rope.py"]
    assert tree_checksum(tree) == pristine


def test_revert_interrupted_midway_runs_again(sdist_tree, tmp_path):
    pristine = tree_checksum(sdist_tree)
    apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", three_patches())))
    # as a killed revert leaves it: one file restored, its saved copy already removed
    saved = sdist_tree / ".optkit" / "pristine" / "vllm_ascend" / "moe.py"
    shutil.copy2(saved, sdist_tree / "vllm_ascend" / "moe.py")
    saved.unlink()
    assert status(sdist_tree).drift[0].path == "vllm_ascend/moe.py"
    result = revert(sdist_tree)
    assert result.restored == ["vllm_ascend/attention.py", "vllm_ascend/rope.py"] and result.overwritten == []
    assert tree_checksum(sdist_tree) == pristine


# --------------------------------------------------------------------------- failures midway


@pytest.mark.parametrize("failure", [PatchError("boom"), KeyboardInterrupt(), OSError(28, "No space left on device")],
                         ids=["git-fails", "ctrl-c", "disk-full"])
def test_failure_midway_restores_every_file(tree, tmp_path, monkeypatch, failure):
    pristine = tree_checksum(tree)
    specs = from_bundle(make_bundle(tmp_path / "b", three_patches()))
    real_apply, calls = gitops.git_apply, []

    def second_real_apply_fails(cwd, patch, *flags):
        if cwd == tree and not flags:
            calls.append(patch)
            if len(calls) == 2:
                raise failure
        return real_apply(cwd, patch, *flags)

    monkeypatch.setattr(gitops, "git_apply", second_real_apply_fails)
    with pytest.raises(PatchError) as exc:
        apply(tree, specs)
    assert f"while applying patch {specs[1].name} (recipe attn-b); every file was restored" in str(exc.value)
    assert tree_checksum(tree) == pristine and not (tree / ".optkit").exists()


# --------------------------------------------------------------------------- lock


def test_lock_held_by_a_live_process_refused(sdist_tree, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (sdist_tree / ".optkit").mkdir()
        (sdist_tree / ".optkit" / "lock").write_text(f"{holder.pid}\n")
        with pytest.raises(PatchError, match=rf"another optkit apply/revert is running \(pid {holder.pid}\)"):
            apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", three_patches())))
        assert status(sdist_tree).lock_pid == holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_broken_with_a_note(sdist_tree, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    (sdist_tree / ".optkit").mkdir()
    (sdist_tree / ".optkit" / "lock").write_text(f"{pid}\n")
    result = apply(sdist_tree, from_bundle(make_bundle(tmp_path / "b", three_patches())))
    assert result.notes == [f"broke a stale lock left by pid {pid}, which is no longer running"]
    assert not (sdist_tree / ".optkit" / "lock").exists()


# --------------------------------------------------------------------------- killed mid-apply


def _killed_apply(bundle: Path, root: Path, after: int) -> None:
    env = {**os.environ, "OPTKIT_FAULT_AFTER": str(after),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "optkit", "apply", str(bundle), "--tree", str(root)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


FAULTS = [(n, then, kind) for n in (1, 2, 3) for then in ("apply", "revert") for kind in ("sdist",)]
FAULTS += [(2, "apply", "git"), (3, "revert", "git")]


@pytest.mark.parametrize("after, then, kind", FAULTS,
                         ids=[f"{kind}-killed-after-{n}-then-{then}" for n, then, kind in FAULTS])
def test_killed_apply_is_rolled_back_by_the_next_command(tmp_path, after, then, kind):
    root = make_tree(tmp_path / "tree", kind)
    pristine = tree_checksum(root)
    bundle = make_bundle(tmp_path / "b", three_patches())
    reference = make_tree(tmp_path / "reference", kind)
    apply(reference, from_bundle(bundle))

    _killed_apply(bundle, root, after)
    journal = json.loads((root / ".optkit" / "journal.json").read_text())
    assert len(journal["done"]) == after and (root / ".optkit" / "lock").exists()
    shown = run_cli("status", "--tree", root)
    assert shown.exit_code == 0 and f"an apply was killed ({after} of 3 patch(es) applied)" in shown.output
    dry = run_cli("apply", bundle, "--tree", root, "--dry-run")
    assert dry.exit_code == 1 and "has an unfinished optkit apply" in dry.output

    result = run_cli(then, *([bundle] if then == "apply" else []), "--tree", root)
    assert result.exit_code == 0, result.output
    assert f"rolled back an interrupted apply ({after} patch(es) had been applied)" in result.output
    assert "broke a stale lock" in result.output
    if then == "apply":
        assert source_sums(root) == source_sums(reference)
        assert run_cli("revert", "--tree", root).exit_code == 0
    assert tree_checksum(root) == pristine and not (root / ".optkit").exists()


# --------------------------------------------------------------------------- CLI wiring


def test_cli_apply_status_revert(sdist_tree, tmp_path):
    bundle = make_bundle(tmp_path / "b", three_patches())
    result = run_cli("apply", bundle / "optkit.lock.json", "--tree", sdist_tree)
    assert result.exit_code == 0, result.output
    assert "applied          0001-moe-a--0001-moe-a.patch  (recipe moe-a)" in result.output
    assert "done: 3 applied (vllm-ascend 0.23.0 at" in result.output
    shown = json.loads(run_cli("status", "--tree", sdist_tree, "--json").output)
    assert [p["recipe"] for p in shown["patches"]] == ["moe-a", "attn-b", "rope-c"] and shown["drift"] == []
    result = run_cli("revert", "--tree", sdist_tree)
    assert result.exit_code == 0 and "reverted 3 patch(es), restored 3 file(s)" in result.output
    assert "nothing to revert" in run_cli("revert", "--tree", sdist_tree).output


@pytest.mark.parametrize("args, code, words", [
    (["apply", "{bundle}", "--tree", "{tree}", "--dry-run"], 0, "dry run, nothing changed: 3 would apply"),
    (["apply", "{bundle}", "--tree", "{tmp}/missing"], 1, "optkit: error: no such directory"),
    (["apply", "{tmp}/missing", "--tree", "{tree}"], 2, "does not exist"),
    (["apply", "{bundle}"], 2, "Missing option '--tree'"),
    (["status", "--tree", "{tree}"], 0, "patches   none applied by optkit or apply.sh"),
], ids=["dry-run", "no-tree", "no-bundle", "tree-required", "status-clean"])
def test_cli_exit_codes(sdist_tree, tmp_path, args, code, words):
    bundle = make_bundle(tmp_path / "b", three_patches())
    values = {"bundle": bundle, "tree": sdist_tree, "tmp": tmp_path}
    result = run_cli(*(a.format(**values) for a in args))
    assert result.exit_code == code and words in result.output, result.output


def test_cli_tree_fetch(tmp_path, monkeypatch):
    from optkit.tree import fetch as trees

    def fake_fetch(version, dest, *, package, force, on_download):
        assert (version, package, force) == ("0.23.0", "vllm-ascend", False)
        return trees.FetchResult(package, version, dest, tmp_path / "vllm_ascend-0.23.0.tar.gz", "ab" * 32, True)

    monkeypatch.setattr(trees, "fetch", fake_fetch)
    result = run_cli("tree", "fetch", "0.23.0", tmp_path / "t")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["release   vllm-ascend 0.23.0", f"path      {tmp_path / 't'}",
                                          f"sdist     vllm_ascend-0.23.0.tar.gz sha256 {'ab' * 32}",
                                          "source    cache"]


# --------------------------------------------------------------------------- the real sdist


@pytest.mark.tree
def test_real_vllm_ascend_tree(tmp_path):
    from optkit.tree.fetch import fetch

    root = fetch("0.23.0", tmp_path / "tree").path
    pristine = tree_checksum(root)
    path = "vllm_ascend/ascend_forward_context.py"
    old = (root / path).read_text()
    new = old.replace("min(num_tokens_per_tp_rank, 512)", "min(num_tokens_per_tp_rank, 1024)")
    patch = ("mc2-token-capacity-1024", path, dep3("mc2-token-capacity-1024") + diff(path, old, new))
    result = apply(root, from_bundle(make_bundle(tmp_path / "b", [patch])))
    assert [o.outcome for o in result.outcomes] == ["applied"] and (root / path).read_text() == new
    revert(root)
    assert tree_checksum(root) == pristine
