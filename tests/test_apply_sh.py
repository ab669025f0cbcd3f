"""apply.sh, `optkit apply`, `optkit status` and both reverts agree about what a tree has applied, leave
nothing behind, and a revert that cannot finish says why and how, losing nothing (real 0.23.0 tree,
real bundle; the read-only reverts on tests/tree_support's small trees)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.bundle.writer import write_bundle
from optkit.cli.main import cli
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.tree import journal
from optkit.tree.inspect import tree_checksum
from tree_support import REPO, make_bundle, make_tree, three_patches

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def run_cli(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code != 3 and "internal error" not in result.output, result.output
    return result.exit_code, result.output


def apply_sh(bundle: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(bundle / "apply.sh"), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    workspace = load_workspace()
    out = tmp_path_factory.mktemp("flagship") / "bundle"
    write_bundle(plan(Request(model="qwen3.5-35b", target="910c", mtp=True), workspace), workspace, out)
    return out


@pytest.fixture
def real_tree(tmp_path) -> Path:
    from compat_support import scratch_tree

    return scratch_tree(tmp_path)


def _patches(bundle: Path) -> list[str]:
    return (bundle / "patches" / "series").read_text().split()


# --------------------------------------------------------------------------- who applied what


SCRIPT_APPLIED = "applied by a bundle's apply.sh (recorded in .optkit/apply-sh.done; optkit kept no backup of them)"
AGREEMENT = [
    pytest.param("apply.sh", ["status"], 0, "patches   applied by apply.sh (.optkit/apply-sh.done", "applied",
                 id="apply.sh-then-status"),
    pytest.param("apply.sh", ["revert"], 1, SCRIPT_APPLIED, "applied", id="apply.sh-then-optkit-revert"),
    pytest.param("apply.sh", ["apply"], 1, SCRIPT_APPLIED, "applied", id="apply.sh-then-optkit-apply"),
    pytest.param("apply.sh", ["apply.sh", "--revert"], 0, "apply.sh: reverted every patch", "pristine",
                 id="apply.sh-then-apply.sh-revert"),
    pytest.param("optkit", ["apply.sh"], 1, "already has patches applied (.optkit/)", "applied",
                 id="optkit-apply-then-apply.sh"),
    pytest.param("optkit", ["status"], 0, "patch     applied", "applied", id="optkit-apply-then-status"),
    pytest.param("optkit", ["revert"], 0, "is pristine again", "pristine", id="optkit-apply-then-optkit-revert"),
    pytest.param(None, ["apply.sh", "--revert"], 0, "apply.sh: nothing to revert", "pristine",
                 id="apply.sh-revert-of-a-clean-tree"),
]


@pytest.mark.tree
@pytest.mark.parametrize("applied_by, then, code, words, after", AGREEMENT)
def test_apply_sh_and_optkit_agree_about_the_tree(bundle, real_tree, applied_by, then, code, words, after):
    pristine = tree_checksum(real_tree)
    if applied_by == "apply.sh":
        assert apply_sh(bundle, real_tree).returncode == 0
    elif applied_by == "optkit":
        assert run_cli("apply", bundle, "--tree", real_tree)[0] == 0
    else:
        (real_tree / ".optkit").mkdir()  # left empty by an older apply.sh
    applied = tree_checksum(real_tree)
    if then[0] == "apply.sh":
        proc = apply_sh(bundle, *then[1:], real_tree)
        outcome, output = proc.returncode, proc.stdout + proc.stderr
    else:
        outcome, output = run_cli(then[0], *([bundle] if then[0] == "apply" else []), "--tree", real_tree)
    assert outcome == code and words in output, output
    if then == ["status"]:  # every patch, by its recipe
        for name in _patches(bundle):
            assert f"applied          {name}  (recipe {name.split('-', 1)[1].split('--')[0]})" in output
    if after == "pristine":
        assert tree_checksum(real_tree) == pristine and not (real_tree / ".optkit").exists()
    else:
        assert tree_checksum(real_tree) == applied and applied != pristine


@pytest.mark.tree
def test_apply_sh_revert_that_cannot_finish_keeps_the_rest_for_the_next(bundle, real_tree):
    """A patched file changed by hand stops apply.sh --revert at its patch: the ones reverted before stay
    reverted, the record lists exactly the rest, and once the file is put back a second run finishes."""
    pristine = tree_checksum(real_tree)
    assert apply_sh(bundle, real_tree).returncode == 0
    names = _patches(bundle)
    first = names[0]  # reverted last
    target = next(line[6:] for line in (bundle / "patches" / first).read_text().splitlines() if line.startswith("+++ b/"))
    original = (real_tree / target).read_bytes()
    (real_tree / target).write_bytes(b"# changed by hand\n")
    proc = apply_sh(bundle, "--revert", real_tree)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (f"apply.sh: cannot revert {first} in {real_tree} (a read-only file or directory? make it writable: "
            f"chmod u+w); the 1 patch(es) still listed in .optkit/apply-sh.done stay applied; fix the cause, then "
            f"run apply.sh --revert {real_tree} again") in proc.stderr
    assert (real_tree / ".optkit" / "apply-sh.done").read_text().split() == [first]
    assert run_cli("status", "--tree", real_tree)[1].count("patch     applied") == 1
    (real_tree / target).write_bytes(original)
    assert apply_sh(bundle, "--revert", real_tree).returncode == 0
    assert tree_checksum(real_tree) == pristine and not (real_tree / ".optkit").exists()


# --------------------------------------------------------------------------- a revert that cannot write


def _killed_apply(bundle: Path, root: Path, after: int) -> None:
    env = {**os.environ, journal.FAULT_ENV: str(after),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "optkit", "apply", str(bundle), "--tree", str(root)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def _unrestored(root: Path, rel: str, why: str, fix: str, done: str = "nothing was restored yet") -> str:
    return (f"cannot restore {root / rel}: {why}; {fix}, then run `optkit revert --tree {root}` again; {done}, "
            f"and optkit's records in {root / '.optkit'}/ stay, so that revert finishes the job")


@pytest.mark.parametrize("after, place, mode, why", [
    pytest.param(2, "vllm_ascend/attention.py", 0o444, "the file is read-only", id="killed-after-2-file"),
    pytest.param(3, "vllm_ascend/rope.py", 0o444, "the file is read-only", id="killed-after-3-last-file"),
    pytest.param(1, "vllm_ascend", 0o555, "its directory {root}/vllm_ascend/ is not writable", id="killed-after-1-dir"),
])
def test_revert_of_an_interrupted_apply_onto_a_read_only_target(tmp_path, after, place, mode, why):
    root = make_tree(tmp_path / "tree")
    pristine = tree_checksum(root)
    bundle = make_bundle(tmp_path / "b", three_patches())
    _killed_apply(bundle, root, after)
    (root / place).chmod(mode)
    try:
        code, output = run_cli("revert", "--tree", root)
    finally:
        (root / place).chmod(0o755 if mode == 0o555 else 0o644)
    fixed = root / place if mode == 0o444 else root / "vllm_ascend"
    rel = place if mode == 0o444 else "vllm_ascend/moe.py"
    expected = _unrestored(root, rel, why.format(root=root), f"chmod u+w {fixed}")
    assert code == 1 and " ".join(output.split()) == f"optkit: error: {expected}", output
    assert (root / ".optkit" / "journal.json").is_file() and not (root / ".optkit" / "lock").exists()
    code, output = run_cli("revert", "--tree", root)  # once writable, a second revert finishes it
    assert code == 0 and f"rolled back an interrupted apply ({after} patch(es) had been applied)" in output, output
    assert tree_checksum(root) == pristine and not (root / ".optkit").exists()


def test_a_restore_refused_midway_keeps_what_it_restored(tmp_path, monkeypatch):
    """A write the file system refuses (EPERM, as an immutable file gives even root) midway: the files
    restored before it keep their pristine bytes, the journal stays, the next revert finishes."""
    root = make_tree(tmp_path / "tree")
    pristine = tree_checksum(root)
    bundle = make_bundle(tmp_path / "b", three_patches())
    _killed_apply(bundle, root, 3)
    real_move = journal._move_into_place

    def refuse_rope(tree, copy, rel):
        if rel == "vllm_ascend/rope.py":
            raise PermissionError(1, "Operation not permitted", str(copy), None, str(tree / rel))
        real_move(tree, copy, rel)

    monkeypatch.setattr(journal, "_move_into_place", refuse_rope)
    code, output = run_cli("revert", "--tree", root)
    done = "the 2 file(s) restored before it (vllm_ascend/attention.py, vllm_ascend/moe.py) keep their pristine bytes"
    expected = _unrestored(root, "vllm_ascend/rope.py", "Operation not permitted", "make it writable", done)
    assert code == 1 and " ".join(output.split()) == f"optkit: error: {expected}", output
    assert json.loads((root / ".optkit" / "journal.json").read_text())["done"]
    monkeypatch.setattr(journal, "_move_into_place", real_move)
    assert run_cli("revert", "--tree", root)[0] == 0
    assert tree_checksum(root) == pristine and not (root / ".optkit").exists()
