"""Bad recipes: one case per validation rule; each error names file, line, field and a fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from optkit.catalog.loader import load_catalog
from optkit.errors import ValidationFailed
from optkit.catalog.lint import lint

VALID = textwrap.dedent("""\
    id: demo
    title: Demo recipe
    summary: A recipe used by the validation tests.
    kind: env
    provenance:
      article:
        part: 2
        section: test
        quote: "some quote"
      seed_map: B.0
      upstream:
        status: new
        evidence: nowhere yet
    versions:
      vllm_ascend: ">=0.23.0,<0.24"
    preconditions:
      - when: "parallel.tp == 2"
        msg: needs TP2
    env:
      - name: DEMO_VAR
        value: "1"
    verification:
      level: declared
      needs_npu: true
    """)


def write_recipe(root: Path, text: str, folder: str = "demo") -> Path:
    path = root / "recipes" / folder / "recipe.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return root


def errors_of(root: Path) -> str:
    with pytest.raises(ValidationFailed) as info:
        load_catalog(root)
    return str(info.value)


F = "recipes/demo/recipe.yaml"

CASES = [
    ("unknown-top-level-key", ("title: Demo recipe", "titel: Demo recipe"),
     [f"{F}:2: titel: unknown field 'titel' (did you mean 'title'?)"]),
    ("unknown-nested-key", ("    part: 2", "    prat: 2"),
     [f"{F}:7: provenance.article.prat: unknown field 'prat' (did you mean 'part'?)"]),
    ("bad-kind", ("kind: env", "kind: envv"),
     [f"{F}:4: kind: Input should be 'config', 'env', 'source-patch', 'kernel', 'compile', 'launch' or 'host'"]),
    ("bad-specifier", ('  vllm_ascend: ">=0.23.0,<0.24"', '  vllm_ascend: "0.23"'),
     [f"{F}:15: versions.vllm_ascend: '0.23' is not a PEP 440 version specifier (e.g. '>=0.23.0,<0.26')"]),
    ("unknown-fact", ('"parallel.tp == 2"', '"parallel.tpp == 2"'),
     [f"{F}:17: preconditions[0].when: in condition 'parallel.tpp == 2': unknown fact 'parallel.tpp' "
      "(at column 1); did you mean 'parallel.tp'?"]),
    ("type-error", ('"parallel.tp == 2"', "\"parallel.tp == 'two'\""),
     [f"{F}:17: preconditions[0].when: in condition \"parallel.tp == 'two'\": cannot compare int with str "
      "using '==' (at column 13)"]),
    ("unsafe-input", ('"parallel.tp == 2"', "\"__import__('os').system('x')\""),
     [f"{F}:17: preconditions[0].when: in condition \"__import__('os').system('x')\": "
      "unexpected character '.' (at column 17)"]),
    ("unsafe-call", ('"parallel.tp == 2"', "\"exec('x')\""),
     [f"{F}:17: preconditions[0].when: in condition \"exec('x')\": unknown fact 'exec' (at column 1); "
      "see `optkit facts --list`"]),
    ("not-boolean", ('"parallel.tp == 2"', '"parallel.tp"'),
     [f"{F}:17: preconditions[0].when: in condition 'parallel.tp': expected a true/false test, but fact "
      "'parallel.tp' is int (at column 1); compare it, e.g. parallel.tp == 2"]),
    ("bad-choice", ('"parallel.tp == 2"', "\"target.soc_family == 'ascend910_39'\""),
     [f"{F}:17: preconditions[0].when: in condition \"target.soc_family == 'ascend910_39'\": "
      "target.soc_family is never 'ascend910_39' (at column 22); did you mean 'ascend910_93'?"]),
    ("bad-version-literal", ('"parallel.tp == 2"', "\"versions.vllm_ascend < 'next'\""),
     [f"{F}:17: preconditions[0].when: in condition \"versions.vllm_ascend < 'next'\": 'next' is not a "
      "version (at column 24); write a PEP 440 version such as '0.26.0'"]),
    ("bad-env-name", ("  - name: DEMO_VAR", "  - name: demo-var"),
     [f"{F}:20: env[0]: 'demo-var' is not an environment variable name (A-Z, 0-9, _)"]),
    ("missing-provenance", ("provenance:", "provenancee:"),
     [f"{F}:5: provenancee: unknown field 'provenancee' (did you mean 'provenance'?)"]),
    ("empty-quote", ('quote: "some quote"', 'quote: ""'),
     [f"{F}:9: provenance.article.quote: String should have at least 4 characters"]),
    ("bad-verification", ("level: declared", "level: tested"),
     [f"{F}:23: verification.level: Input should be 'declared', 'config-checked', 'applies', 'compiles', "
      "'cpu-reference' or 'hardware-verified'"]),
    ("source-patch-without-patches", ("kind: env", "kind: source-patch"),
     [f"{F}:1: a source-patch recipe needs at least one entry in 'patches'"]),
    ("host-without-host", ("kind: env", "kind: host"),
     [f"{F}:1: a host recipe needs at least one entry in 'host'"]),
    ("host-file-not-absolute", ("env:\n", "host:\n  - {name: demo setting, file: proc/sys/x, fix: set it}\nenv:\n"),
     [f"{F}:20: host[0].file: String should match pattern '^/[A-Za-z0-9_./-]+$'"]),
    ("id-differs-from-folder", ("id: demo", "id: other"),
     [f"{F}:1: id: id 'other' differs from its folder name 'demo' (rename one of them)"]),
    ("bad-id-shape", ("id: demo", "id: Demo_Recipe"),
     [f"{F}:1: id: String should match pattern '^[a-z0-9]+(-[a-z0-9]+)*$'"]),
    ("hardware-verified-declared", ("level: declared", "level: hardware-verified"),
     [f"{F}:22: verification: level: hardware-verified is reached only through a measurement record in "
      "verified/ (`optkit report LADDER --record`), not declared; give the strongest level the tests back"]),
    ("tolerance-without-margin", ("verification:\n", "accuracy:\n  check: tolerance\n  why: a fused kernel\nverification:\n"),
     [f"{F}:22: accuracy: a tolerance check needs 'margin' (percentage points of exact-match accuracy)"]),
    ("greedy-identical-with-margin",
     ("verification:\n", "accuracy:\n  check: greedy-identical\n  margin: 2\n  why: same argmax\nverification:\n"),
     [f"{F}:22: accuracy: 'margin' is only meaningful with check: tolerance (greedy-identical allows no change)"]),
    ("unknown-accuracy-check", ("verification:\n", "accuracy:\n  check: exact\n  why: same argmax\nverification:\n"),
     [f"{F}:23: accuracy.check: Input should be 'greedy-identical' or 'tolerance'"]),
    ("invalid-yaml", ("title: Demo recipe", "title: [unclosed"),
     # the wording is the YAML parser's (libyaml's or PyYAML's); the location is ours
     [f"{F}:3: invalid YAML: …"]),
]


@pytest.mark.parametrize("old_new, expected", [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_bad_recipe_is_located(tmp_path, old_new, expected):
    old, new = old_new
    assert old in VALID
    message = errors_of(write_recipe(tmp_path, VALID.replace(old, new, 1)))
    lines = message.splitlines()
    assert len(lines) == len(expected), lines
    for line, want in zip(lines, expected):
        assert line.startswith(want[:-1]) if want.endswith("…") else line == want


def test_valid_recipe_loads(tmp_path):
    catalog = load_catalog(write_recipe(tmp_path, VALID))
    assert list(catalog.recipes) == ["demo"]


def test_all_problems_of_all_files_reported_together(tmp_path):
    write_recipe(tmp_path, VALID.replace("kind: env", "kind: envv"))
    write_recipe(tmp_path, VALID.replace("id: demo", "id: two").replace("part: 2", "part: 3"), "two")
    lines = errors_of(tmp_path).splitlines()
    assert any(l.startswith("recipes/demo/recipe.yaml:4: kind:") for l in lines)
    assert any(l.startswith("recipes/two/recipe.yaml:7: provenance.article.part:") for l in lines)


LINT_CASES = [
    ("unknown-requires", "requires:\n  - recipe: demoo\n    msg: needs it\n",
     "recipes/demo/recipe.yaml:26: requires[0].recipe: unknown recipe 'demoo' (did you mean 'demo'?)"),
    ("self-conflict", "conflicts:\n  - recipe: demo\n    msg: itself\n",
     "recipes/demo/recipe.yaml:26: conflicts[0].recipe: conflicts names the recipe itself"),
    ("unknown-template-fact", "additional_config:\n  x: \"${spec.num_speculative_token}\"\n",
     "recipes/demo/recipe.yaml:25: additional_config: unknown fact ${spec.num_speculative_token} "
     "(did you mean 'spec.num_speculative_tokens'?)"),
    ("no-accuracy-claim", "",
     "recipes/demo/recipe.yaml:1: changes what the server runs but makes no accuracy claim (add `accuracy:` with "
     "check greedy-identical, or tolerance and a margin)"),
    ("pending-patch-claimed-applies",
     "patches:\n  - file: 0001-x.patch\n    description: a patch\n    origin: vendor\n"
     "    last_update: 2026-11-29\n    targets: [vllm_ascend/envs.py]\n",
     None),
]


@pytest.mark.parametrize("extra, expected", [(c[1], c[2]) for c in LINT_CASES], ids=[c[0] for c in LINT_CASES])
def test_lint_cases(tmp_path, extra, expected):
    text = VALID + extra
    if expected is None:  # a pending patch with a level that claims it applies
        text = text.replace("level: declared", "level: applies")
        expected = ("recipes/demo/recipe.yaml:23: verification.level: level applies claims patches that are "
                    "pending: 0001-x.patch")
    problems = [str(p) for p in lint(write_recipe(tmp_path, text))]
    assert expected in problems, problems


def test_lint_finds_requirement_cycle(tmp_path):
    write_recipe(tmp_path, VALID + "requires:\n  - recipe: two\n    msg: needs two\n")
    two = VALID.replace("id: demo", "id: two") + "requires:\n  - recipe: demo\n    msg: needs demo\n"
    write_recipe(tmp_path, two, "two")
    problems = [str(p) for p in lint(tmp_path)]
    assert "recipes/demo/recipe.yaml:25: requires: requirement cycle: demo → two → demo" in problems


def test_lint_finds_conflicting_settings_without_conflict(tmp_path):
    write_recipe(tmp_path, VALID)
    write_recipe(tmp_path, VALID.replace("id: demo", "id: two").replace('value: "1"', 'value: "2"'), "two")
    problems = [str(p) for p in lint(tmp_path)]
    assert "recipes/two/recipe.yaml:1: env.DEMO_VAR = '2' but demo sets '1', and no conflict links them" in problems


PATCHED = VALID.replace("kind: env", "kind: source-patch") + textwrap.dedent("""\
    patches:
      - file: 0001-demo.patch
        description: a demo patch
        origin: vendor
        last_update: 2026-01-01
        status: present
        targets: [vllm_ascend/envs.py]
    """)
PATCH_TEXT = "--- a/vllm_ascend/envs.py\n+++ b/vllm_ascend/envs.py\n@@ -1 +1 @@\n-A = 1\n+A = 2\n"


def write_patched(root: Path, recipe: str = PATCHED, patch: str = PATCH_TEXT) -> Path:
    write_recipe(root, recipe)
    (root / "recipes" / "demo" / "0001-demo.patch").write_text(patch)
    return root


TARGET_CASES = [
    ("dot-dot", "../../etc/passwd", "a '..' component leaves the tree"),
    ("absolute", "/etc/passwd", "an absolute path"),
    ("git-dir", ".git/hooks/post-checkout", ".git/ is not part of the source"),
    ("state-dir", ".optkit/state.json", ".optkit/ is not part of the source"),
]


@pytest.mark.parametrize("target, why", [c[1:] for c in TARGET_CASES], ids=[c[0] for c in TARGET_CASES])
def test_patch_targets_outside_the_tree_refused_at_load_and_lint(tmp_path, target, why):
    root = write_patched(tmp_path, PATCHED.replace("[vllm_ascend/envs.py]", f"['{target}']"))
    expected = f"{F}:31: patches[0].targets[0]: {target!r} is not a file of the vllm-ascend tree: {why}"
    assert errors_of(root) == expected
    assert [str(p) for p in lint(root)] == [expected]


def test_diff_touching_a_path_outside_the_tree_is_a_lint_problem(tmp_path):
    root = write_patched(tmp_path, patch=PATCH_TEXT.replace("vllm_ascend/envs.py", "../outside.py"))
    assert (f"{F}:31: patches[0].targets: 0001-demo.patch touches '../outside.py': a '..' component leaves the tree"
            in [str(p) for p in lint(root)])


@pytest.mark.parametrize("cached_first", [False, True], ids=["cold", "after-a-cached-load"])
def test_symlinked_patch_file_refused_at_load_and_lint(tmp_path, monkeypatch, cached_first):
    """The patch would be copied into bundles from wherever the link points (outside the catalog).
    The cache must not hide it: a link to a file with the same bytes still changes the key."""
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = write_patched(tmp_path / "catalog")
    patch = root / "recipes" / "demo" / "0001-demo.patch"
    if cached_first:
        load_catalog(root)
    outside = tmp_path / "outside.patch"
    outside.write_text(PATCH_TEXT)
    patch.unlink()
    patch.symlink_to(outside)
    expected = (f"{F}:26: patches[0].file: 0001-demo.patch is a symlink (to {str(outside)!r}); a recipe's patches "
                "are files in its own folder, copied into bundles as they are (put the patch itself in the folder)")
    assert errors_of(root) == expected
    assert [str(p) for p in lint(root)] == [expected]


def test_symlinked_recipe_folder_refused(tmp_path):
    write_recipe(tmp_path / "elsewhere", VALID)
    (tmp_path / "catalog" / "recipes").mkdir(parents=True)
    (tmp_path / "catalog" / "recipes" / "demo").symlink_to(tmp_path / "elsewhere" / "recipes" / "demo")
    assert errors_of(tmp_path / "catalog").startswith("recipes/demo/recipe.yaml: recipes/demo is a symlink (to ")
