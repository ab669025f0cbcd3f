"""optkit.tree.digest: the pristine digest of a real vllm-ascend 0.23.0 tree, with and without patches."""

from __future__ import annotations

import pytest

from compat_support import scratch_tree, specs
from optkit.errors import TreeError
from optkit.tree.apply import apply, revert
from optkit.tree.digest import pristine_digest

pytestmark = pytest.mark.tree

PATCHED = ["sampler-greedy-bf16-fastpath", "compile-super-kernel"]


@pytest.fixture
def tree(tmp_path):
    return scratch_tree(tmp_path)


def test_patches_and_build_outputs_do_not_change_the_digest(tree):
    clean = pristine_digest(tree)
    apply(tree, specs(PATCHED, "0.23.0"))
    (tree / "build").mkdir()
    (tree / "build" / "x.o").write_bytes(b"\0")
    (tree / "vllm_ascend" / "vllm_ascend_C.so").write_bytes(b"\0")
    patched = pristine_digest(tree)
    assert patched.digest == clean.digest
    assert patched.applied == [s.name for s in specs(PATCHED, "0.23.0")] and clean.applied == []
    revert(tree)
    assert pristine_digest(tree).digest == clean.digest


@pytest.mark.parametrize("change", [
    pytest.param(lambda t: (t / "vllm_ascend" / "envs.py").write_text("# edited\n"), id="edited-file"),
    pytest.param(lambda t: (t / "vllm_ascend" / "extra.py").write_text(""), id="added-file"),
    pytest.param(lambda t: (t / "vllm_ascend" / "envs.py").unlink(), id="removed-file"),
])
def test_a_different_source_gives_a_different_digest(tree, change):
    before = pristine_digest(tree).digest
    change(tree)
    assert pristine_digest(tree).digest != before


def test_an_unfinished_apply_is_refused(tree):
    (tree / ".optkit").mkdir()
    (tree / ".optkit" / "journal.json").write_text("{}")
    with pytest.raises(TreeError, match="an optkit apply is unfinished; `optkit revert --tree"):
        pristine_digest(tree)
