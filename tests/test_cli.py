"""CLI wiring and exit codes (the library is tested elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from optkit.cli.main import cli

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("args, code, fragment", [
    (["plan", "qwen3.5-35b", "--target", "910c", "--mtp"], 0, "Selected recipes"),
    (["plan", "qwen3.5-35b", "--mtp", "--json"], 0, '"selected"'),
    (["plan", "qwen3.5-35b", "--mtp", "--vllm-ascend-version", "0.30.0rc2"], 0, "[partly"),  # notes are not markup
    (["plan", "qwen3.5-35bb"], 1, "unknown model 'qwen3.5-35bb'; did you mean"),
    (["plan", "qwen3.5-35b", "--target", "910x"], 1, "unknown target '910x'; did you mean"),
    (["plan", "qwen3.5-35b", "--concurrency", "1,x"], 2, "give comma-separated integers"),
    (["plan", "qwen3.5-35b", "--concurrency", "1,,4"], 2, "level 2 is empty (a stray comma?)"),
    (["plan", "qwen3.5-35b", "--concurrency", "1,4,"], 2, "level 3 is empty (a stray comma?)"),
    # the Hugging Face id, as serve.sh's MODEL defaults to it; the models listed (issue 25, item 19)
    (["plan", "Qwen/Qwen3.5-35B-A3B", "--mtp"], 0, "optkit plan: qwen3.5-35b-a3b on 910c"),
    (["plan", "qwen/qwen3.6-27b"], 0, "optkit plan: qwen3.6-27b on 910c"),
    (["plan", "Qwen/Qwen3.5-35B-A3X"], 1, "did you mean 'Qwen/Qwen3.5-35B-A3B'"),
    (["models"], 0, "models (MODEL may be any of its names, its Hugging Face id or a checkpoint's id)"),
    (["models", "--json"], 0, '"hf_id": "Qwen/Qwen3.6-35B-A3B"'),
    # Hub ids: a profile's hf_id or a published checkpoint's id, anywhere MODEL is taken (issue 26, item 3)
    (["models", "--json"], 0, '"source": "vllm-ascend 0.30.0rc2 docs/source/tutorials/models/Qwen3-Dense.md:38"'),
    (["models", "eco-tech/qwen3.5-397b-a17b-w4a8-mtp"], 0, "Eco-Tech/Qwen3.5-397B-A17B-w4a4-mxfp4"),
    (["models", "Qwen/Qwen3-235B-A2"], 1, "unknown model 'Qwen/Qwen3-235B-A2'; did you mean 'Qwen/Qwen3-235B-A22B'"),
    (["plan", "Qwen/Qwen3-235B-A22B", "--tp", "16"], 0, "optkit plan: qwen3-235b-a22b on 910c"),
    (["plan", "Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp", "--tp", "16"], 0, "optkit plan: qwen3.5-397b-a17b on 910c"),
    (["facts", "Modelers_Park/Qwen3-32B"], 0, "model.id = 'qwen3-32b'"),
    (["explain", "moe-fused-mc2-enable", "Qwen/Qwen3-30B-A3B"], 0, "moe-fused-mc2-enable: selected"),
    (["explain", "qwen3.5-35b"], 2, "'qwen3.5-35b' is no recipe id: explain takes RECIPE_ID... then MODEL"),
    (["plan", "qwen3.5-35b", "--tp", "0"], 2, "--tp"),
    (["plan", "qwen3.5-35b", "--num-speculative-tokens", "3"], 1, "--num-speculative-tokens needs --mtp or --spec-method"),
    (["plan", "qwen3.5-35b", "--tp", "16", "--dp", "2"], 0, "TP16 DP2 on 2 nodes (1 DP rank of TP16 per node)"),
    (["plan", "qwen3.5-35b", "--tp", "32", "--dp", "2"], 1, "a TP group spanning nodes is planned with DP 1 only"),
    (["plan", "qwen3.5-35b", "--tp", "2", "--nodes", "0"], 2, "--nodes"),
    (["plan", "qwen3.5-35b", "--with", "nope"], 1, "unknown recipe 'nope'"),
    (["plan", "qwen3.5-35b", "--vllm-ascend-version", "latest"], 1, "--vllm-ascend-version 'latest' is not a version"),
    (["explain", "compile-super-kernel", "qwen3.5-35b", "--mtp"], 0, "compile-super-kernel: selected"),
    (["explain", "blocktable-slot-mapping-cpu-fastpath", "qwen3.5-35b", "--mtp"], 0, "spec.async_spec_decode = true"),
    (["facts", "qwen3.5-35b", "--mtp"], 0, "workload.decode_rows = [5, 20, 40]"),
    (["facts", "--list"], 0, "workload.decode_rows_max"),
    (["recipes"], 0, "recipes"),
    (["show", "waterfall-hccl-aiv"], 0, "HCCL AIV-6.6%"),
    (["show", "waterfall-hcl-aiv"], 1, "did you mean 'waterfall-hccl-aiv'"),
    (["lint"], 0, "catalog ok"),
    (["schema"], 0, '"title": "Recipe"'),
    pytest.param(["docs", "--check"], 0, "current", marks=pytest.mark.tree),
    (["plan", "qwen3.5-35b", "--vllm-ascend-version", "0.26.0"], 1, "vllm-ascend 0.26.0 is not a release optkit knows"),
    (["versions", "list"], 0, "| 0.30.0rc2 | 2026-10-13 | 0.30.0 |"),
    (["explain", "moe-fused-mc2-enable", "qwen3.5-35b", "--mtp", "--vllm-ascend-version", "0.30.0rc2"], 0,
     "on this release: env var VLLM_ASCEND_ENABLE_FUSED_MC2 is replaced by additional_config key enable_fused_mc2"),
    (["plan", "qwen3.5-35b", "--mtp", "--vllm-ascend-version", "0.30.0rc2"], 0,
     "vllm-ascend 0.30.0rc2: vllm-ascend no longer overrides the Qwen3.5 decoder layer's"),
    pytest.param(["compat", "--releases", "0.23.0.post1"], 0, "patches × releases", marks=pytest.mark.tree),
    pytest.param(["tree", "inspect", "/nonexistent-tree"], 1, "no such directory: /nonexistent-tree"),
    # explain with --model-config: one id, several ids, a typo (item 3)
    (["explain", "waterfall-static-kernel", "--model-config", "tests/fixtures/hf/qwen3.6-27b", "--model-id",
      "Qwen/Qwen3.6-27B", "--mtp"], 0, "waterfall-static-kernel: objective"),
    (["explain", "waterfall-static-kernel", "compile-super-kernel", "--model-config", "tests/fixtures/hf/qwen3.6-27b",
      "--model-id", "Qwen/Qwen3.6-27B", "--mtp"], 0, "compile-super-kernel: "),
    (["explain", "waterfal-static-kernel", "--model-config", "tests/fixtures/hf/qwen3.6-27b", "--model-id",
      "Qwen/Qwen3.6-27B"], 1, "unknown recipe 'waterfal-static-kernel'; did you mean 'waterfall-static-kernel'"),
    (["explain", "waterfall-static-kernel", "qwen3.6-27b", "--model-config", "tests/fixtures/hf/qwen3.6-27b"], 1,
     "unknown recipe 'qwen3.6-27b'"),
    # the model's name (item 4)
    (["plan", "--model-config", "tests/fixtures/hf/qwen3.6-27b"], 1, "names no model (it has no _name_or_path)"),
    (["plan", "qwen3.6-27b", "--model-id", "x/y"], 1, "--model-id names a checkpoint given with --model-config"),
    # "selected: " with no reason (item 9)
    (["explain", "compile-super-kernel", "qwen3.6-27b", "--mtp"], 0, "waterfall-static-kernel is left out by the "
     "optimum too"),
])
def test_commands(args, code, fragment):
    result = run(*args)
    assert result.exit_code == code, result.output
    assert fragment in result.output


def test_plan_json_is_data():
    data = json.loads(run("plan", "qwen3.5-35b", "--mtp", "--json").output)
    assert data["facts"]["workload.decode_rows"] == [5, 20, 40]
    assert data["estimate"]["label"].startswith("ESTIMATE")


def test_request_file_and_flag_override(tmp_path):
    request = tmp_path / "request.yaml"
    request.write_text("model: qwen3.5-35b\nmtp: true\nconcurrency: [1, 4]\n")
    data = json.loads(run("plan", "--request", str(request), "--concurrency", "8", "--json").output)
    assert data["request"]["concurrency"] == [8] and data["request"]["mtp"] is True


@pytest.mark.parametrize("written, levels", [("1,4", [1, 4]), ("8", [8]), ("[4, 1]", [1, 4]), ("' 2 , 16 '", [2, 16])],
                         ids=["comma-string", "one-level", "list", "spaces"])
def test_request_file_takes_concurrency_as_the_flag_does(tmp_path, written, levels):
    request = tmp_path / "request.yaml"
    request.write_text(f"model: qwen3.5-35b\nconcurrency: {written}\n")
    assert json.loads(run("plan", "--request", str(request), "--json").output)["request"]["concurrency"] == levels


def test_request_file_bad_concurrency_is_an_error(tmp_path):
    request = tmp_path / "request.yaml"
    request.write_text("model: qwen3.5-35b\nconcurrency: 1,x\n")
    result = CliRunner().invoke(cli, ["plan", "--request", str(request)])
    assert result.exit_code == 1 and "'1,x': give comma-separated integers, e.g. 1,4,8" in result.output


def test_plan_table_says_what_the_estimate_leaves_out():
    output = run("plan", "qwen3.5-35b", "--target", "910c", "--mtp").output
    flat = " ".join(output.split())
    assert "c4 leaves out 31.8 ms of regression fixes (cudagraph-capture-sizes-spec-aware 31.8 ms)" in flat
    assert "they count for choosing recipes, not in the estimate" in flat
    assert ("c4: expected saving 2.85 ms; no published baseline: the article publishes no c4 TPOT baseline for "
            "qwen3.5-35b-a3b on 910c; gains reported in % cannot be turned into ms") in flat


def test_bad_request_file_is_located(tmp_path):
    request = tmp_path / "request.yaml"
    request.write_text("model: qwen3.5-35b\nconcurency: [1]\n")
    result = run("plan", "--request", str(request))
    assert result.exit_code == 1
    assert "request.yaml:2: concurency: unknown field 'concurency' (did you mean 'concurrency'?)" in result.output


def test_internal_error_asks_for_a_report(monkeypatch):
    import optkit.resolve.plan

    def boom(*args, **kwargs):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(optkit.resolve.plan, "plan", boom)
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b"])
    assert result.exit_code == 3
    assert "internal error" in result.output and "please report" in result.output


HEAVY = ["torch", "vllm", "vllm_ascend", "networkx", "numpy"]
LATER_STAGES = ["optkit.resolve", "optkit.bundle", "optkit.tree", "rich", "pydantic", "yaml"]
# --help may ask optkit.catalog.paths where it runs from (`docs` is listed only in a source checkout), nothing else
CATALOG_BUT_PATHS = sorted(f"optkit.catalog.{p.stem}" for p in (Path(__file__).resolve().parents[1] / "optkit" /
                           "catalog").glob("*.py") if p.stem not in ("__init__", "paths"))
VALIDATORS = ["optkit.catalog.schema.Recipe", "optkit.catalog.kernels.KernelSpec",
              "optkit.resolve.profiles.ModelProfile", "optkit.resolve.profiles.Target"]


@pytest.mark.parametrize("args, unwanted", [
    pytest.param(["plan", "qwen3.5-35b", "--mtp"], HEAVY + ["optkit.bundle", "optkit.tree", "pydantic", "yaml", "rich",
                                                           "packaging.specifiers", "optkit.resolve.request",
                                                           "optkit.resolve.profiles", "optkit.cli.catalog_cmds",
                                                           "optkit.cli.tree_cmds", "optkit.cli.bundle_cmds",
                                                           "pydantic_core.core_schema", "typing_extensions",
                                                           "dataclasses"],  # optkit.value instead: see docs/resolver.md
                 id="plan"),
    pytest.param(["--help"], HEAVY + LATER_STAGES + CATALOG_BUT_PATHS + ["packaging"], id="help"),
    pytest.param(["status", "--tree", "{tree}"], HEAVY + ["optkit.resolve", "optkit.bundle", "rich", "pydantic",
                                                          "yaml", "optkit.catalog.loader"], id="status"),
    pytest.param(["recipes"], HEAVY + ["optkit.resolve", "optkit.bundle", "optkit.tree", "packaging.specifiers",
                                       "pydantic", "yaml", "rich", "optkit.catalog.schema"], id="recipes"),
])
def test_a_command_imports_only_what_it_needs(args, unwanted, tmp_path):
    """Run in a fresh process with a warm catalog cache: nor does it build a catalog validator."""
    import os
    import subprocess
    import sys

    (tmp_path / "tree" / "vllm_ascend").mkdir(parents=True)
    (tmp_path / "tree" / "vllm_ascend" / "__init__.py").write_text("")
    (tmp_path / "tree" / "vllm_ascend" / "_version.py").write_text('__version__ = "0.23.0"\n')
    args = [arg.format(tree=tmp_path / "tree") for arg in args]
    code = ("import sys; from optkit.cli.main import cli\n"
            f"try: cli({args!r}, standalone_mode=False)\n"
            "except SystemExit: pass\n"
            f"unwanted = [m for m in sys.modules\n"
            f"            if m in {unwanted!r} or any(m.startswith(u + '.') for u in {unwanted!r})]\n"
            f"built = [name for name in {VALIDATORS!r} if name.rsplit('.', 1)[0] in sys.modules\n"
            "         and getattr(sys.modules[name.rsplit('.', 1)[0]], name.rsplit('.', 1)[1]).__pydantic_complete__]\n"
            "print('UNWANTED', sorted(unwanted), 'BUILT', built)")
    env = dict(os.environ, OPTKIT_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):  # the first run fills the catalog cache
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert "UNWANTED [] BUILT []" in out


def test_help_lists_docs_only_where_it_runs(monkeypatch):
    """`optkit docs` regenerates a source checkout's docs/: an installed optkit has none, so --help leaves it out."""
    import optkit.catalog.paths as paths

    assert "  docs " in run("--help").output
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    listed = run("--help").output
    assert "  docs " not in listed and "  plan " in listed and "  models " in listed


def test_every_command_is_registered_with_its_module():
    """The lazy registry (optkit.cli.main.COMMAND_MODULES) names each command module's COMMANDS, all of them."""
    from importlib import import_module

    from optkit.cli.main import COMMAND_MODULES

    modules = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "optkit" / "cli").glob("*_cmds.py"))
    defined = {command.name: module for module in modules for command in import_module(f"optkit.cli.{module}").COMMANDS}
    assert COMMAND_MODULES == defined


@pytest.mark.parametrize("text, expected", [
    ("a <!-- optkit:flagship-series -->stale 15<!-- /optkit:flagship-series --> b",
     "a <!-- optkit:flagship-series -->2 patches in the series, 1 still pending<!-- /optkit:flagship-series --> b"),
    ("<!-- optkit:flagship-patches -->?<!-- /optkit:flagship-patches -->",
     "<!-- optkit:flagship-patches -->2 patches of 1 recipes, touching 3 files<!-- /optkit:flagship-patches -->"),
    ("no region", "no region"),
], ids=["series", "patch-count", "untouched"])
def test_generated_figures_in_docs(text, expected):
    from optkit.cli.docs import _filled

    lock = {"patches": [{"recipe": "r", "targets": ["a", "b"]}, {"recipe": "r", "targets": ["b", "c"]}],
            "pending_patches": [{"recipe": "s", "file": "x.patch"}]}
    src = SimpleNamespace(example={"optkit.lock.json": json.dumps(lock).encode()})
    assert _filled(text, "docs/x.md", src) == expected


def test_the_multinode_figure_is_the_multinode_examples_manifests():
    from optkit.cli.docs import _filled

    multinode = {"k8s/leaderworkerset.yaml": b"kind: LeaderWorkerSet\n", "k8s/service.yaml": b"kind: Service\n"}
    text = "<!-- optkit:multinode-manifests -->old<!-- /optkit:multinode-manifests -->"
    assert _filled(text, "docs/x.md", SimpleNamespace(multinode=multinode)) == ("<!-- optkit:multinode-manifests -->\n\n```yaml\nkind: LeaderWorkerSet\n"
                                                    "---\nkind: Service\n```\n\n<!-- /optkit:multinode-manifests -->")


def test_docs_check_names_a_stale_figure(tmp_path, monkeypatch):
    import shutil

    from optkit.cli.docs import generated_docs

    root = tmp_path / "repo"
    for name in ("recipes", "models", "targets", "kernels", "docs", "versions"):
        shutil.copytree(ROOT / name, root / name)
    page = root / "docs" / "apply.md"
    page.write_text(page.read_text().replace("-->13 patches", "-->15 patches"))
    assert generated_docs(root, check=True) == ["docs/apply.md"]


def test_an_unknown_generated_region_names_the_page_and_the_known_ones():
    from optkit.cli.docs import FIGURES, _filled
    from optkit.errors import OptkitError

    with pytest.raises(OptkitError) as err:
        _filled("<!-- optkit:releasez -->x<!-- /optkit:releasez -->", "docs/versions.md", SimpleNamespace())
    assert str(err.value).startswith("docs/versions.md: unknown generated region optkit:releasez; known: ")
    assert all(name in str(err.value) for name in FIGURES)
