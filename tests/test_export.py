"""``optkit export``: a recipe's patch set as an upstream pull request for vllm-ascend.

On the real 0.30.0rc2 tree, for the three recipes the article names for upstreaming: the series
applies with ``git am`` on a fresh repository of the pristine tree and gives the exported tree
exactly; the exported unit test (upstream's ``tests/ut`` layout) fails without the series and passes
with it on the CPU torch; the series passes vllm-ascend's own ruff and typos settings (the versions
its .pre-commit-config.yaml pins); commit messages carry no optkit-only wording and a sign-off;
PR.md has the template's sections and the evidence; once the series is in a tree the recipe is
``upstream`` there (probes' reverse-apply fallback, ``optkit compat``'s cell) with no catalog edit;
the same export twice is byte-identical. The refusals run without a tree.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from compat_support import CATALOG, pristine
from optkit.catalog.lint import lint
from optkit.cli.main import cli
from optkit.errors import OptkitError
from optkit.versions.export import ExportError, export, parse_identity
from optkit.versions.export_pr import leftover_words

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.30.0rc2"
AUTHOR = "Ada Reviewer <ada@example.org>"
ARTICLE = {  # recipe → the module its exported test imports (absent from the pristine tree)
    "sampler-min-tokens-spec-mask-cache": "vllm_ascend.sample.min_tokens_cache",
    "sampler-vocab-parallel-greedy-argmax": "vllm_ascend.sample.vocab_parallel_argmax",
    "blocktable-slot-mapping-cpu-fastpath": "vllm_ascend.worker.slot_mapping_cpu",
}


def _git(root: Path, *args: str, env: dict | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """One export (tests run) per recipe for the whole module, made on first use."""
    pytest.importorskip("torch")
    made = {}

    def export_of(rid: str):
        if rid not in made:
            made[rid] = export(CATALOG, [rid], tmp_path_factory.mktemp("export") / "out", VERSION, author=AUTHOR,
                               run_tests=True)
        return made[rid]

    return export_of


@pytest.fixture(params=sorted(ARTICLE))
def exported(request, exports):
    return exports(request.param)


def _fresh_clone_like(tmp_path: Path) -> Path:
    """The pristine tree as a new git repository, as a contributor's clone at the release would be."""
    repo = tmp_path / "upstream"
    shutil.copytree(pristine(VERSION), repo, symlinks=True)
    who = {"GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@example.org", "GIT_COMMITTER_NAME": "u",
           "GIT_COMMITTER_EMAIL": "u@example.org"}
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "base", env=who)
    return repo


@pytest.mark.tree
def test_the_series_applies_with_git_am_on_a_fresh_repository(exported, tmp_path):
    repo = _fresh_clone_like(tmp_path)
    patches = [exported.out / c.file for c in exported.commits]
    assert patches and all(p.is_file() for p in patches)
    _git(repo, "-c", "commit.gpgsign=false", "am", "-q", *map(str, patches),
         env={"GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@example.org"})
    assert _git(repo, "rev-parse", "HEAD^{tree}") == _git(exported.out, "rev-parse", "HEAD^{tree}")
    messages = _git(repo, "log", "--format=%B%x00", f"-{len(patches)}", "--reverse").split("\0")
    assert [m.strip() for m in messages if m.strip()] == [c.message.strip() for c in exported.commits]
    assert _git(exported.out, "status", "--porcelain") == ""  # patches/ and PR.md are kept out of git


@pytest.mark.tree
def test_the_exported_test_fails_without_the_series_and_passes_with_it(exported):
    module = ARTICLE[exported.recipes[0].id]
    assert exported.tests and all(t.startswith("tests/ut/") and Path(t).name.startswith("test_") for t in exported.tests)
    before, after = exported.runs
    assert (before.where, after.where) == ("base", "series")
    assert not before.passed and f"No module named '{module}'" in before.output, before.output[-2000:]
    assert after.passed and re.fullmatch(r"\d+ passed", after.summary), after.output[-2000:]


@pytest.mark.tree
def test_the_series_passes_upstream_lint_settings(exported):
    changed = _git(exported.out, "diff", "--name-only", exported.base_sha, "HEAD").split()
    python = [p for p in changed if p.endswith(".py")]
    assert python
    for args in (["check", "--no-cache", *python], ["format", "--no-cache", "--check", *python]):
        proc = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=exported.out, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    typos = shutil.which("typos", path=str(Path(sys.executable).parent)) or shutil.which("typos")
    assert typos, "typos is in the test environment (requirements/test.lock)"
    proc = subprocess.run([typos, "--config", "typos.toml", *changed], cwd=exported.out, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.tree
def test_commit_messages_are_upstream_words_with_author_and_sign_off(exported):
    ids = [r.id for r in CATALOG]
    for commit in exported.commits:
        subject, _, body = commit.message.partition("\n\n")
        assert subject.startswith(exported.recipes[0].title) and not subject.startswith("[")  # git am keeps it whole
        assert commit.message.rstrip().endswith(f"Signed-off-by: {AUTHOR}")
        assert not [i for i in ids if i in commit.message] and "optkit" not in commit.message.lower()
        assert not re.search(r"(?i)re-derived|the 0\.\d+ patch", commit.message)
        assert body.strip() and all(len(line) <= 72 or " " not in line for line in body.splitlines())
        assert _git(exported.out, "log", "-1", "--format=%an <%ae>|%cn <%ce>", commit.sha).strip() == f"{AUTHOR}|{AUTHOR}"


@pytest.mark.tree
def test_pr_md_fills_the_template_of_the_tree_with_the_evidence(exported):
    text = (exported.out / "PR.md").read_text(encoding="utf-8")
    template = (exported.out / ".github" / "PULL_REQUEST_TEMPLATE.md").read_text(encoding="utf-8")
    assert re.findall(r"^### .*$", text, re.M) == re.findall(r"^### .*$", template, re.M)
    assert "<!--" not in text  # every section of this template is filled
    recipe = exported.recipes[0]
    assert re.match(rf"# (\[[A-Za-z]+\])+ {re.escape(recipe.title)}\n", text), text.splitlines()[0]
    assert f"`{exported.tests[0]}`" in text
    assert "--noconftest " + " ".join(exported.tests) in text
    assert "with the series: passed" in text and "on the base commit (without the series): failed" in text
    assert re.search(r"vllm-ascend 0\.30\.0rc1 \((cleanly|with line offsets)\), "
                     r"vllm-ascend 0\.30\.0rc2 \((cleanly|with line offsets)\)", text), text
    assert ("(its numbers, measured on vllm-ascend 0.23.0, not for this PR)" in text
            or "Not measured on an NPU for this release" in text)  # no verified record yet
    assert leftover_words(text, CATALOG) == []
    assert not re.search(r"(?<![\w.])/(?:tmp|root|home|work|usr)/", text)  # no path of this machine


@pytest.mark.tree
def test_a_tree_with_the_series_has_the_recipe_upstream_with_no_catalog_edit(exported):
    from packaging.version import Version

    from optkit.versions.compat import patch_cell
    from optkit.versions.onrelease import release_view, verdict
    from optkit.versions.probes import inspect_recipes

    recipe = exported.recipes[0]
    found = next(r for r in inspect_recipes(CATALOG, exported.out, Version(VERSION)) if r.recipe == recipe.id)
    assert found.status == "upstream" and "reverse-applies" in found.entry.msg
    on_pristine = next(r for r in inspect_recipes(CATALOG, pristine(VERSION), Version(VERSION)) if r.recipe == recipe.id)
    assert on_pristine.status != "upstream"
    assert verdict(recipe, release_view(VERSION, exported.out, CATALOG)).status == "upstream"  # plan --tree
    for file in exported.verdicts[recipe.id].patches:  # optkit compat's cell for the tree
        assert patch_cell(CATALOG, recipe, file, VERSION, exported.out, None).result == "upstream"
    with pytest.raises(ExportError, match="is already upstream: the tree "):
        export(CATALOG, [recipe.id], exported.out.parent / "again", tree=exported.out, author=AUTHOR)


@pytest.mark.tree
@pytest.mark.slow
def test_the_same_export_twice_is_byte_identical(tmp_path):
    rid = "blocktable-slot-mapping-cpu-fastpath"
    made = [export(CATALOG, [rid], tmp_path / name, VERSION, author=AUTHOR) for name in ("a", "b")]
    files = [sorted(p.relative_to(m.out).as_posix() for p in [m.out / "PR.md", *(m.out / "patches").iterdir()])
             for m in made]
    assert files[0] == files[1]
    for rel in files[0]:
        assert (made[0].out / rel).read_bytes() == (made[1].out / rel).read_bytes(), rel
    assert made[0].commits[-1].sha == made[1].commits[-1].sha


@pytest.mark.tree
@pytest.mark.slow
def test_a_user_clone_is_cloned_never_changed(tmp_path):
    clone = _fresh_clone_like(tmp_path)
    head = _git(clone, "rev-parse", "HEAD")
    made = export(CATALOG, ["blocktable-slot-mapping-cpu-fastpath"], tmp_path / "out", tree=clone, author=AUTHOR)
    assert made.version == VERSION and made.base_sha == head.strip()
    assert _git(clone, "rev-parse", "HEAD") == head and _git(clone, "status", "--porcelain") == ""
    assert _git(made.out, "rev-parse", "--abbrev-ref", "HEAD").strip() == f"export-{VERSION}"


@pytest.mark.tree
def test_docs_export_md_shows_the_current_example(exports):
    """docs/export.md's example is what scripts/export-example's request gives (this export is that request)."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    loader = SourceFileLoader("export_example", str(ROOT / "scripts" / "export-example"))
    script = module_from_spec(spec_from_loader("export_example", loader))
    loader.exec_module(script)
    exported = exports(script.RECIPES[0])
    assert (script.RECIPES, script.RELEASE, script.AUTHOR) == ([r.id for r in exported.recipes], VERSION, AUTHOR)
    out = exported.out.parent / "example" / "out"  # the example names its directory out/
    shutil.copytree(exported.out / "patches", out / "patches")
    shutil.copyfile(exported.out / "PR.md", out / "PR.md")
    page = script.PAGE.read_text(encoding="utf-8")
    assert page == script.page_with(page, script.region(out)), "docs/export.md is stale: run python scripts/export-example"


# --------------------------------------------------------------------------- refusals (no tree needed)


@pytest.mark.parametrize("recipes, release, message", [
    pytest.param(["sampler-min-tokens-spec-mask-cahce"], VERSION,
                 "unknown recipe 'sampler-min-tokens-spec-mask-cahce'; did you mean 'sampler-min-tokens-spec-mask-cache'?",
                 id="unknown-recipe"),
    pytest.param(["sampler-min-tokens-spec-mask-cache"], "0.24.0rc1",
                 "sampler-min-tokens-spec-mask-cache has no patch for vllm-ascend 0.24.0rc1 (no-patch: no patch for "
                 "0.24.0rc1", id="no-patch-for-the-release"),
    pytest.param(["gdn-conv-weight-transpose-cache"], VERSION,
                 "gdn-conv-weight-transpose-cache is already upstream: vllm-ascend 0.30.0rc2: ", id="upstream-already"),
    pytest.param(["waterfall-hccl-aiv"], VERSION, "waterfall-hccl-aiv has no source patch", id="no-source-patch"),
    pytest.param(["blocktable-slot-mapping-cpu-fastpath"], "0.99", "vllm-ascend 0.99 is not a release optkit knows",
                 id="unknown-release"),
])
def test_refusals(tmp_path, recipes, release, message):
    with pytest.raises(OptkitError) as info:
        export(CATALOG, recipes, tmp_path / "out", release, author=AUTHOR)
    assert message in str(info.value)
    assert not (tmp_path / "out").exists()


def test_a_non_empty_directory_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine\n")
    with pytest.raises(ExportError, match=r"-o .*out exists and is not empty: give a new or empty directory"):
        export(CATALOG, ["blocktable-slot-mapping-cpu-fastpath"], tmp_path / "out", VERSION, author=AUTHOR)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]


def test_no_identity_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "none"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.chdir(tmp_path)
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(cli, ["export", "blocktable-slot-mapping-cpu-fastpath", "--release", VERSION,
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "no author for the commits: pass --author 'Name <mail>' or set git's user.name and user.email" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ["Ada", "Ada <>", "<ada@example.org>", "Ada <ada at example.org>"])
def test_a_malformed_author_is_refused(text):
    with pytest.raises(ExportError, match=re.escape(f"--author {text!r} is not 'Name <mail@example.org>'")):
        parse_identity(text)


def test_lint_checks_a_recipes_upstream_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = "blocktable-slot-mapping-cpu-fastpath"
    target = Path("mine") / "team-slots"
    shutil.copytree(ROOT / "recipes" / source, target)
    path = target / "recipe.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(f"id: {source}", "id: team-slots", 1), encoding="utf-8")
    upstream = target / "upstream"
    (upstream / "0002-nothing").mkdir()
    stem = upstream / "0001-slot-mapping-cpu-fastpath-0.30"
    (stem / "vllm_ascend").mkdir()
    (stem / "vllm_ascend" / "x.py").write_text("x = 1\n")
    (stem / "tests" / "ut" / "worker" / "test_broken.py").write_text("def f(:\n")
    found = [str(p) for p in lint(Path("mine"))]
    assert any(f.startswith("mine/team-slots/upstream/0002-nothing: is not named after a patch") for f in found), found
    assert "mine/team-slots/upstream/0001-slot-mapping-cpu-fastpath-0.30/vllm_ascend/x.py: is not under tests/ " \
           "(upstream files are unit tests at their path in the tree)" in found
    assert any(f.startswith("mine/team-slots/upstream/0001-slot-mapping-cpu-fastpath-0.30/tests/ut/worker/"
                            "test_broken.py:1: does not parse") for f in found), found
    shutil.rmtree(upstream / "0002-nothing")
    shutil.rmtree(stem / "vllm_ascend")
    (stem / "tests" / "ut" / "worker" / "test_broken.py").unlink()
    assert not [f for f in lint(Path("mine")) if "upstream" in str(f)]


# --------------------------------------------------------------------------- the words for upstream


@pytest.mark.parametrize("text, words", [
    pytest.param("Uses recipe-a's cache.", 'Uses "Title A"\'s cache.', id="recipe-id-becomes-its-title"),
    pytest.param("Re-derived for 0.30 (vLLM 0.30.0). New module x.py.", "New module x.py.", id="re-derived-dropped"),
    pytest.param("Adds x. The staging half of the 0.23 patch is dropped: 0.30 copies.", "Adds x.",
                 id="gone-part-of-an-old-patch-dropped"),
    pytest.param("Runs with the gate of the 0.23 patch (greedy only).", "Runs with the gate (greedy only).",
                 id="old-patch-phrase-removed"),
    pytest.param("New module x.py as for 0.23: the key.", "New module x.py: the key.", id="as-for-removed"),
    pytest.param("Adds x. Tested by optkit. Keeps y.", "Adds x. Keeps y.", id="optkit-sentence-dropped"),
    pytest.param("A\n continued line.\n\nSecond paragraph.", "A continued line.\n\nSecond paragraph.",
                 id="paragraphs-kept"),
])
def test_upstream_text(text, words):
    from optkit.versions.export_words import optkit_words, upstream_text

    out = upstream_text(text, {"recipe-a": "Title A", "recipe-b": "Title B"})
    assert out == words
    assert optkit_words(out, ["recipe-a", "recipe-b"]) == []


def test_upstream_text_wraps_at_72_columns():
    from optkit.versions.export_words import upstream_text

    lines = upstream_text(" ".join(["word"] * 60), {}).splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 72


@pytest.mark.parametrize("paths, prefix", [
    (["vllm_ascend/worker/model_runner_v1.py"], "[ModelRunner]"),
    (["vllm_ascend/worker/block_table.py", "vllm_ascend/worker/model_runner_v1.py"], "[ModelRunner][Worker]"),
    (["vllm_ascend/sample/sampler.py", "tests/ut/sample/test_sampler.py"], "[Core]"),
    (["tests/ut/sample/test_sampler.py"], "[Test]"),
    (["vllm_ascend/ops/x.py", "vllm_ascend/attention/y.py"], "[Attention][Kernel]"),
])
def test_title_prefix_follows_the_contribution_guide(paths, prefix):
    from optkit.versions.export_words import title_prefix

    assert title_prefix(paths) == prefix


# --------------------------------------------------------------------------- the exported tests' run


@pytest.mark.parametrize("output, summary", [
    ("....\n4 passed in 0.12s\n", "4 passed"),
    ("F.\n1 failed, 1 passed, 2 warnings in 3.40s\n", "1 failed, 1 passed, 2 warnings"),
    ("!!! Interrupted: 1 error during collection !!!\n1 error in 0.50s\n", "1 error"),
    ("===== 2 passed, 1 skipped in 1.00s =====\n", "2 passed, 1 skipped"),
    ("\nno tests ran in 0.01s\n", "no tests ran"),
    # a plugin or an interpreter warning printing after the verdict (CI's pytest-benchmark did)
    ("28 passed in 11.35s\n/x/pytest_benchmark/logger.py:44: PytestBenchmarkWarning: Benchmarks are "
     "automatically disabled\n  warner(PytestBenchmarkWarning(text))\n", "28 passed"),
    ("Traceback (most recent call last):\nModuleNotFoundError: No module named 'pytest'\n",
     "ModuleNotFoundError: No module named 'pytest'"),
])
def test_the_summary_is_pytests_verdict_line(output, summary):
    from optkit.versions.export import summary_line

    assert summary_line(output) == summary


def test_the_exported_tests_run_without_the_callers_pytest_settings():
    from optkit.versions.export import test_env

    env = test_env({"PATH": "/bin", "PYTHONPATH": "x", "PYTEST_ADDOPTS": "-x", "PYTEST_PLUGINS": "noisy",
                    "PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_TESTRUNUID": "u", "HOME": "/h"})
    assert env == {"PATH": "/bin", "HOME": "/h", "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_a_plugin_of_the_callers_environment_does_not_change_the_verdict(tmp_path, monkeypatch):
    """The exported tests' run with a plugin in the caller's environment that warns after pytest's
    verdict: the verdict is still read (the plugin is not loaded at all)."""
    from optkit.versions.export import _pytest

    (tmp_path / "noisy_plugin.py").write_text(
        "import sys\n\ndef pytest_unconfigure(config):\n    print('noisy plugin: a warning after the verdict', file=sys.stderr)\n")
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    monkeypatch.setenv("PYTEST_PLUGINS", "noisy_plugin")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--this-option-does-not-exist")
    run = _pytest(tmp_path, "series", ["test_one.py"], sys.executable)
    assert (run.passed, run.summary) == (True, "1 passed"), run.output
    assert "noisy plugin" not in run.output


# --------------------------------------------------------------------------- PR.md per release (no git)


def _pr_text(rid: str, release: str, runs=()) -> str:
    from optkit.versions.export import export_scope, planned_commits
    from optkit.versions.export_pr import pr_text

    scope = export_scope(CATALOG, [rid], release)
    scope.commits, scope.runs = planned_commits(CATALOG, scope), list(runs)
    patches = scope.verdicts[rid].patches
    paths = sorted({t for p in CATALOG[rid].patches if p.file in patches for t in p.targets})
    return pr_text(CATALOG, scope, None, paths, {})


@pytest.mark.parametrize("rid, release, present, absent", [
    pytest.param("blocktable-slot-mapping-cpu-fastpath", "0.30.0rc2",
                 ["PR #13048", "7-17 us per decode step", "model_runner_v1.py:3580-3583 on 0.30.0rc2",
                  "Not measured on an NPU for this release"],
                 ["_bt_pinned", "snapshot", "3124-3126", "host_time: -131 us/step", "Reported by"],
                 id="blocktable-0.30-says-its-own-patch-and-numbers"),
    pytest.param("blocktable-slot-mapping-cpu-fastpath", "0.23.0",
                 ["_bt_pinned", "host_time: -131 us/step", "3124-3126"], ["PR #13048", "7-17 us"],
                 id="blocktable-0.23-says-the-0.23-patch"),
    pytest.param("sampler-min-tokens-spec-mask-cache", "0.30.0rc2",
                 ["asynchronously from pinned memory since vLLM 0.30.0", "Not measured on an NPU for this release"],
                 ["tpot: 7.02 → 5.12 ms", "the plan's TPOT estimate", "enable_reduce_sample"],
                 id="min-tokens-0.30-no-number-measured-against-0.23"),
    pytest.param("sampler-min-tokens-spec-mask-cache", "0.23.0", ["tpot: 7.02 → 5.12 ms"], ["since vLLM 0.30.0"],
                 id="min-tokens-0.23-the-articles-number"),
])
def test_pr_md_describes_the_release_s_own_patch_entry(rid, release, present, absent):
    """Finding 6 of issue 25: PR.md for 0.30.0rc2 described the 0.23 patch and quoted its -131 us."""
    text = _pr_text(rid, release)
    assert [p for p in present if p not in text] == []
    assert [a for a in absent if a in text] == []


@pytest.mark.parametrize("words", [
    pytest.param("optkit", id="optkit"),
    pytest.param("verification level", id="verification-level"),
    pytest.param("tests/cpu/", id="optkit-test-path"),
    pytest.param("write-up", id="unnamed-write-up"),
    pytest.param("0.30.0rc1 clean", id="compat-cell-words"),
    pytest.param("passes with this series", id="claimed-test-result"),
    pytest.param("fails on the base commit", id="claimed-test-failure"),
])
def test_pr_md_speaks_upstream_s_language_and_claims_no_run(words):
    text = _pr_text("blocktable-slot-mapping-cpu-fastpath", "0.30.0rc2")
    assert "python -m pytest -q -p no:cacheprovider --noconftest tests/ut/worker/test_slot_mapping_cpu.py" in text
    assert words not in text.lower() if words == "optkit" else words not in text


def test_a_test_run_in_pr_md_holds_no_machine_path():
    """Finding 20 of issue 25: a run's summary line carried the local venv path into PR.md."""
    from optkit.versions.export import TestRun

    runs = [TestRun("base", 1, "/root/.venvs/x/bin/python: No module named pytest"), TestRun("series", 0, "3 passed")]
    text = _pr_text("blocktable-slot-mapping-cpu-fastpath", "0.30.0rc2", runs)
    assert "without the series): failed (exit 1: python: No module named pytest)." in text
    assert "/root" not in text and ".venvs" not in text


@pytest.mark.parametrize("text, words", [
    ("/root/.venv/bin/python: No module named pytest", "python: No module named pytest"),
    ("E   ImportError: cannot import x (/tmp/optkit-export-base-1/base/vllm_ascend/x.py)", "E   ImportError: cannot import x (x.py)"),
    ("~/src/tree/ is gone", "… is gone"),
    ("tests/ut/worker/test_slot_mapping_cpu.py 3 passed", "tests/ut/worker/test_slot_mapping_cpu.py 3 passed"),
    ("1 failed, 2 passed", "1 failed, 2 passed"),
])
def test_without_paths(text, words):
    from optkit.versions.export_pr import without_paths

    assert without_paths(text) == words


def _interpreter(tmp_path: Path, name: str, body: str) -> str:
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("body, message", [
    pytest.param(f'exec {sys.executable} -S "$@"', "--run-tests needs pytest, torch, numpy in the Python that runs",
                 id="no-pytest-no-torch"),
    pytest.param("exit 3", "--run-tests needs a working interpreter in the Python that runs", id="broken-interpreter"),
    pytest.param(None, "--run-tests: cannot run ", id="no-interpreter"),
])
def test_run_tests_checks_its_prerequisites_first(tmp_path, body, message):
    """Finding 20 of issue 25: without pytest, --run-tests reported 'the exported tests failed on the series'."""
    python = str(tmp_path / "missing-python") if body is None else _interpreter(tmp_path, "python", body)
    with pytest.raises(ExportError) as info:
        export(CATALOG, ["blocktable-slot-mapping-cpu-fastpath"], tmp_path / "out", VERSION, author=AUTHOR,
               run_tests=True, python=python)
    assert message in str(info.value)
    assert "drop --run-tests" in str(info.value) and "pip install" in str(info.value) or body is None
    assert not (tmp_path / "out").exists()


def test_the_prerequisites_hold_for_the_test_python():
    from optkit.versions.export import check_test_prerequisites

    pytest.importorskip("torch")
    check_test_prerequisites(sys.executable)  # no error


@pytest.mark.parametrize("args, release", [
    pytest.param([], "0.23.0", id="default-is-plans-default"),
    pytest.param(["--release", "0.30.0rc2"], "0.30.0rc2", id="named"),
    pytest.param(["--tree", "."], None, id="tree-decides"),
])
def test_export_s_default_release_is_the_one_every_command_uses(monkeypatch, tmp_path, args, release):
    """Finding 25 of issue 25: plan defaulted to 0.23.0, export to the newest release (0.30.0rc2)."""
    import optkit.versions.export as module
    from optkit.resolve.request_record import DEFAULT_VLLM_ASCEND

    seen = {}

    def fake(catalog, recipes, out, version, **kwargs):
        seen["version"] = version
        raise ExportError("stop here")

    monkeypatch.setattr(module, "export", fake)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["export", "blocktable-slot-mapping-cpu-fastpath", "-o", "out", *args])
    assert result.exit_code == 1 and "stop here" in result.output
    assert seen["version"] == release
    assert DEFAULT_VLLM_ASCEND == "0.23.0"
    help_text = " ".join(CliRunner().invoke(cli, ["export", "--help"]).output.split())
    assert f"default {DEFAULT_VLLM_ASCEND}, the default release of every optkit command" in help_text


def test_the_library_needs_a_release_or_a_tree(tmp_path):
    with pytest.raises(ExportError, match=r"name the release to export for \(--release\) or give a tree \(--tree\)"):
        export(CATALOG, ["blocktable-slot-mapping-cpu-fastpath"], tmp_path / "out", author=AUTHOR)


@pytest.mark.parametrize("condition, message", [
    pytest.param("parallel.tpp > 1", "patches[2].risks[0].when: in condition 'parallel.tpp > 1': unknown fact "
                 "'parallel.tpp'", id="unknown-fact"),
    pytest.param("model.family == 'qwen3.5'", "patches[2].risks[0].when: condition reads model.family, a profile's "
                 "name, not its architecture", id="profile-name"),
])
def test_lint_checks_the_conditions_of_a_patch_entry_s_risks(tmp_path, monkeypatch, condition, message):
    monkeypatch.chdir(tmp_path)
    source = "blocktable-slot-mapping-cpu-fastpath"
    target = Path("mine") / "team-slots"
    shutil.copytree(ROOT / "recipes" / source, target)
    path = target / "recipe.yaml"
    text = path.read_text(encoding="utf-8").replace(f"id: {source}", "id: team-slots", 1)
    text = text.replace("      - severity: low\n        text: >-\n          The kernel pads",
                        f"      - severity: low\n        when: \"{condition}\"\n        text: >-\n          The kernel pads", 1)
    path.write_text(text, encoding="utf-8")
    found = [str(p) for p in lint(Path("mine"))]
    assert any(message in f for f in found), found
