"""Kernel specs: schema cases with exact messages, readiness, the catalog lint, and the real tree."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from optkit.catalog.loader import load_catalog
from optkit.catalog.paths import project_root
from optkit.errors import ValidationFailed
from optkit.catalog.kernel_catalog import kernel_ready, load_kernels
from optkit.catalog.kernels import lint_kernels, load_kernel

ROOT = project_root()
SHIPPED = load_kernels(ROOT)

VALID = textwrap.dedent("""\
    id: demo
    title: Demo kernel
    recipe: gdn-l2norm-fused-recurrent-kernel
    soc_versions: [ascend910_9391, ascend910_9392]
    csrc_ops:
      - dir: csrc/attention/recurrent_gated_delta_rule
        change: modified
    build_command: SOC_VERSION=ascend910_9391 COMPILE_CUSTOM_KERNELS=1 python3 setup.py build_ext --inplace
    rebuild_scope:
      package: the A3 op package
      op_list: the ascend910_93 list
      op_count: 42
      install_dir: vllm_ascend/_cann_ops_custom
      wiped: true
      binding: rebuilt
    source:
      kind: patches
      description: the patch in this folder
    patches: [0001-demo.patch]
    status: ready
    """)

F = "kernels/demo/kernel.yaml"


def write_kernel(root: Path, text: str, folder: str = "demo") -> Path:
    path = root / "kernels" / folder / "kernel.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path.parent


def errors_of(folder: Path) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        load_kernel(folder)
    return [str(p) for p in info.value.problems]


CASES = [
    ("bare-family", ("[ascend910_9391, ascend910_9392]", "[ascend910_9391, ascend910_93]"),
     [f"{F}:4: soc_versions[1]: 'ascend910_93' is the SoC family, not a full SoC name: setup.py's gen_build_info "
      "asserts on it; use a full name such as 'ascend910_9391'"]),
    ("alias", ("[ascend910_9391, ascend910_9392]", "[ascend910_9391, 910c]"),
     [f"{F}:4: soc_versions[1]: '910c' is setup.py's alias of 'ascend910_9392'; write the full name"]),
    ("family-in-command", ("SOC_VERSION=ascend910_9391 COMPILE", "SOC_VERSION=ascend910_93 COMPILE"),
     [f"{F}:8: build_command: 'ascend910_93' is the SoC family, not a full SoC name: setup.py's gen_build_info "
      "asserts on it; use a full name such as 'ascend910_9391'"]),
    ("command-soc-not-listed", ("SOC_VERSION=ascend910_9391 COMPILE", "SOC_VERSION=ascend910_9381 COMPILE"),
     [f"{F}:8: build_command: builds for 'ascend910_9381', which is not in soc_versions"]),
    ("no-custom-kernels", (" COMPILE_CUSTOM_KERNELS=1", ""),
     [f"{F}:8: build_command: must set COMPILE_CUSTOM_KERNELS=1 (else the op package is not rebuilt)"]),
    ("per-op-install", ("  binding: rebuilt", "  binding: rebuilt\n  per_op_install: true"),
     [f"{F}:16: rebuild_scope.per_op_install: Input should be False"]),
    ("typo", ("status: ready", "stauts: ready"),
     [f"{F}:20: stauts: unknown field 'stauts' (did you mean 'status'?)"]),
    ("absolute-path", ("- dir: csrc/attention", "- dir: /root/csrc/attention"),
     [f"{F}:6: csrc_ops[0].dir: '/root/csrc/attention/recurrent_gated_delta_rule' must be a relative path "
      "without '..' (no machine paths)"]),
    ("external-ready", [("  kind: patches\n", "  kind: external\n  missing: [csrc/x]\n"),
                        ("patches: [0001-demo.patch]\n", "contract: computes y from x, within limits\n")],
     [f"{F}:21: status: 'ready' with an external source: the op source is not in this repo"]),
    ("external-with-patches", [("  kind: patches\n", "  kind: external\n  missing: [csrc/x]\n"),
                               ("status: ready", "status: source-missing\ncontract: computes y from x, within limits")],
     [f"{F}:20: patches: lists files in this kernel dir, but the source kind is 'external'"]),
    ("external-without-contract", [("  kind: patches\n", "  kind: external\n  missing: [csrc/x]\n"),
                                   ("patches: [0001-demo.patch]\n", ""), ("status: ready", "status: source-missing")],
     [f"{F}:1: contract: an external source needs the op's contract: inputs, outputs, limits"]),
    ("patches-kind-without-patches", ("patches: [0001-demo.patch]\n", ""),
     [f"{F}:1: patches: source kind 'patches' needs at least one patch file here"]),
]


@pytest.mark.parametrize("edits,expected", [pytest.param(e, x, id=i) for i, e, x in CASES])
def test_validation_messages(tmp_path, edits, expected):
    text = VALID
    for old, new in [edits] if isinstance(edits, tuple) else edits:
        assert old in text
        text = text.replace(old, new, 1)
    assert errors_of(write_kernel(tmp_path, text)) == expected


def test_id_must_match_folder(tmp_path):
    assert errors_of(write_kernel(tmp_path, VALID, folder="other")) == [
        "kernels/other/kernel.yaml:1: id: id 'demo' differs from its folder name 'other' (rename one of them)"]


def test_valid_spec_loads(tmp_path):
    spec, _ = load_kernel(write_kernel(tmp_path, VALID))
    assert spec.rebuild_scope.per_op_install is False
    assert spec.soc_versions == ["ascend910_9391", "ascend910_9392"]


# --------------------------------------------------------------------------- the shipped specs


def test_shipped_specs_load_and_match_the_recipes():
    catalog = load_catalog()
    assert sorted(SHIPPED.specs) == sorted(k for r in catalog for k in r.kernels)
    assert lint_kernels(catalog) == []


def test_ready_only_with_every_source_present():
    ready = {kid: kernel_ready(spec, ROOT) for kid, spec in SHIPPED.specs.items()}
    assert ready["gdn-l2norm-recurrent"] == (True, [])
    assert ready["matmul-allreduce-add-rmsnorm-910c"] == (False, [
        "csrc/mc2/matmul_allreduce_add_rmsnorm910c is not in this repo (the source is external)",
        "csrc/mc2/call_vllm_tensor_op.h is not in this repo (the source is external)"])
    assert SHIPPED.specs["matmul-allreduce-add-rmsnorm-910c"].status == "source-missing"
    for kid, spec in SHIPPED.specs.items():
        assert (spec.status == "ready") == ready[kid][0], kid


def test_the_910c_recipe_says_the_source_is_missing():
    recipe = load_catalog()["op-matmul-allreduce-add-rmsnorm-910c"]
    assert "source is NOT in this repo" in recipe.verification.notes
    assert "source-missing" in recipe.verification.notes


# --------------------------------------------------------------------------- lint on a copy


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project's recipes, targets, kernels and references that a test may break."""
    for name in ("recipes", "targets", "kernels", "tests/kernels"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


GDN = "kernels/gdn-l2norm-recurrent"
PATCH = "0001-recurrent-gated-delta-rule-l2norm.patch"

LINT_CASES = [
    ("missing-patch", lambda r: (r / GDN / PATCH).unlink(),
     f"{GDN}/kernel.yaml:89: status: status ready, but {GDN}/{PATCH} is missing"),
    ("unknown-recipe", lambda r: _edit(r / GDN / "kernel.yaml", "recipe: gdn-l2norm-fused-recurrent-kernel",
                                       "recipe: gdn-l2norm-fused-recurent-kernel"),
     f"{GDN}/kernel.yaml:3: recipe: unknown recipe 'gdn-l2norm-fused-recurent-kernel' "
     "(did you mean 'gdn-l2norm-fused-recurrent-kernel'?)"),
    ("recipe-does-not-list-it", lambda r: _edit(r / GDN / "kernel.yaml", "recipe: gdn-l2norm-fused-recurrent-kernel",
                                                "recipe: gdn-conv-weight-transpose-cache"),
     f"{GDN}/kernel.yaml:3: recipe: recipe gdn-conv-weight-transpose-cache does not list kernel "
     "'gdn-l2norm-recurrent' in its kernels"),
    ("stray-patch", lambda r: (r / GDN / "0002-extra.patch").write_text("x\n"),
     f"{GDN}/kernel.yaml:41: patches: 0002-extra.patch is in the folder but not declared"),
    ("wrong-recipe-header", lambda r: _edit(r / GDN / PATCH, "Recipe: gdn-l2norm-fused-recurrent-kernel",
                                            "Recipe: somebody-else"),
     f"{GDN}/kernel.yaml:42: patches[0]: {PATCH} says `Recipe: somebody-else` but the spec's recipe is "
     "gdn-l2norm-fused-recurrent-kernel"),
    ("no-dep3-header", lambda r: _edit(r / GDN / PATCH, "Forwarded: no\n", ""),
     f"{GDN}/kernel.yaml:42: patches[0]: {PATCH}: DEP-3 header lacks Forwarded"),
    ("patch-outside-declared-dirs", lambda r: _edit(r / GDN / "kernel.yaml",
                                                    "  - dir: csrc/attention/recurrent_gated_delta_rule\n",
                                                    "  - dir: csrc/attention/other_op\n"),
     f"{GDN}/kernel.yaml:42: patches[0]: {PATCH} touches csrc/attention/recurrent_gated_delta_rule/op_host/"
     "arch35/recurrent_gated_delta_rule_tiling_arch35.cpp, which is outside csrc_ops and torch_binding"),
    ("soc-of-no-target", lambda r: _edit(r / GDN / "kernel.yaml", "ascend910_9382, ascend910_9362]",
                                         "ascend910_9382, ascend910_9363]"),
     f"{GDN}/kernel.yaml:4: soc_versions[5]: 'ascend910_9363' is in no target's soc_versions "
     "(did you mean 'ascend910_9362'?)"),
    ("missing-reference", lambda r: _edit(r / GDN / "kernel.yaml", "module: tests/kernels/reference_gdn.py",
                                          "module: tests/kernels/reference_gdm.py"),
     f"{GDN}/kernel.yaml:44: reference.module: tests/kernels/reference_gdm.py does not exist"),
    ("source-missing-but-present", lambda r: _edit(r / GDN / "kernel.yaml", "\nstatus: ready", "\nstatus: source-missing"),
     f"{GDN}/kernel.yaml:89: status: every source is present; mark it status: ready"),
    ("recipe-claims-too-much", lambda r: _edit(r / "recipes/op-matmul-allreduce-add-rmsnorm-910c/recipe.yaml",
                                               "  level: declared", "  level: applies"),
     "recipes/op-matmul-allreduce-add-rmsnorm-910c/recipe.yaml:{level_line}: verification.level: level applies, "
     "but kernel matmul-allreduce-add-rmsnorm-910c is source-missing"),
]


@pytest.mark.parametrize("breaker,expected", [pytest.param(b, x, id=i) for i, b, x in LINT_CASES])
def test_lint_finds(project, breaker, expected):
    breaker(project)
    if "{level_line}" in expected:  # the line of `level:` in that recipe, wherever edits move it
        text = (project / "recipes/op-matmul-allreduce-add-rmsnorm-910c/recipe.yaml").read_text().splitlines()
        expected = expected.format(level_line=text.index("  level: applies") + 1)
    assert expected in [str(p) for p in lint_kernels(load_catalog(project))]


def test_lint_reports_schema_problems(project):
    _edit(project / GDN / "kernel.yaml", "[ascend910_9391, ascend910_9381,", "[ascend910_93, ascend910_9381,")
    problems = [str(p) for p in lint_kernels(load_catalog(project))]
    assert problems[0].startswith(f"{GDN}/kernel.yaml:4: soc_versions[0]: 'ascend910_93' is the SoC family")


# --------------------------------------------------------------------------- the real tree


def _git_apply(tree: Path, patch: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "apply", *flags, "-p1", str(patch)], cwd=tree, capture_output=True, text=True)


@pytest.mark.tree
def test_l2norm_patch_applies_to_the_real_tree(tmp_path):
    from compat_support import scratch_tree

    tree = scratch_tree(tmp_path)
    check = _git_apply(tree, ROOT / GDN / PATCH, "--check")
    assert check.returncode == 0, check.stderr
    assert _git_apply(tree, ROOT / GDN / PATCH).returncode == 0
    kernel = (tree / "csrc/attention/recurrent_gated_delta_rule/op_kernel/recurrent_gated_delta_rule.h").read_text()
    copy_in = kernel[kernel.index("void CopyInQKV"):kernel.index("void L2NormRows")]
    # the norm sits between the Cast to fp32 and the Muls by scale
    assert copy_in.index("Cast(kInUb") < copy_in.index("L2NormRows(qInUb") < copy_in.index("Muls(qInUb, qInUb, scale_")
    assert "bool use_qk_l2norm_in_kernel=False) -> Tensor" in (tree / "csrc/torch_binding.cpp").read_text()


@pytest.mark.tree
def test_l2norm_patch_applies_on_top_of_the_recipe_patches(tmp_path):
    from compat_support import scratch_tree

    tree = scratch_tree(tmp_path)
    recipe = load_catalog()[SHIPPED.specs["gdn-l2norm-recurrent"].recipe]
    written = [p.file for p in recipe.patches if p.status == "present"]
    for name in written:
        assert _git_apply(tree, ROOT / "recipes" / recipe.id / name).returncode == 0, name
    result = _git_apply(tree, ROOT / GDN / PATCH)
    assert result.returncode == 0, result.stderr
    if written:  # the Python side passes the keyword the kernel patch adds
        assert "use_qk_l2norm_in_kernel" in (tree / "vllm_ascend/ops/gdn.py").read_text()


def _a3_op_list(tree: Path) -> list[str]:
    script = (tree / "csrc/build_aclnn.sh").read_text()
    branch = script[script.index('=~ ^ascend910_93 ]]'):]
    array = branch[branch.index("CUSTOM_OPS_ARRAY=("):]
    return re.findall(r'^\s+"([a-z0-9_]+)"$', array[:array.index("\n    )")], re.M)


@pytest.mark.tree
@pytest.mark.parametrize("kernel_id", sorted(SHIPPED.specs))
def test_spec_facts_hold_in_the_pristine_tree(kernel_id):
    from compat_support import pristine

    tree, spec = pristine(), SHIPPED.specs[kernel_id]
    a3_ops = _a3_op_list(tree)
    assert len(a3_ops) == 42
    for op in spec.csrc_ops:
        assert (tree / op.dir).is_dir() == (op.change == "modified"), op.dir
        if op.change == "modified" and spec.build_list_change is None:
            assert Path(op.dir).name in a3_ops, f"{op.dir} is not built for ascend910_93: declare build_list_change"
    if spec.build_list_change:
        assert spec.build_list_change.add not in a3_ops
        assert spec.rebuild_scope.op_count == len(a3_ops) + 1
    else:
        assert spec.rebuild_scope.op_count == len(a3_ops)
    for entry in spec.add_config:
        line = f'AddConfig("{entry.soc_family}"'
        present = (tree / entry.file).is_file() and line in (tree / entry.file).read_text()
        assert present == (entry.state == "present"), entry.file
    for path in spec.source.missing:
        assert not (tree / path).exists(), f"{path} exists upstream: the source is not external"
    if spec.torch_binding and spec.torch_binding.change == "modified":
        assert f'"{spec.torch_binding.op}(' in (tree / spec.torch_binding.schema_file).read_text()
