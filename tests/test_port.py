"""optkit port on tiny trees and a made-up catalog: one case per outcome, the write (its recipe.yaml
edit, idempotence, determinism, rollback), the worksheets, the range cut, and the patch sections it
reads. The real releases are in tests/test_port_trees.py."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from optkit.catalog.loader import load_catalog
from optkit.catalog.patchfile import split_patch
from optkit.errors import Location, OptkitError, Problem, ValidationFailed
from optkit.versions.port import Trees, patch_name, port
from optkit.versions.port_write import worksheet_path, write_port
from optkit.versions.ranges import split
from optkit.versions.recipe_edit import Declaration, Piece, edited_text, write_checked

DATE = dt.date(2026, 12, 3)

MODULE = textwrap.dedent('''\
    """A made-up module."""

    import os


    def compute(x):
        first = x + 1
        second = first + 2
        third = second + 3
        value = third * 2
        fourth = value + 4
        fifth = fourth + 5
        sixth = fifth + 6
        return sixth


    def helper(y):
        return os.fspath(y)
''')

PATCH = textwrap.dedent('''\
    Description: doubles the factor
    Origin: test
    Forwarded: no
    Last-Update: 2026-01-01
    Recipe: tiny
    ---
    diff --git a/vllm_ascend/m.py b/vllm_ascend/m.py
    --- a/vllm_ascend/m.py
    +++ b/vllm_ascend/m.py
    @@ -7,7 +7,7 @@ def compute(x):
         first = x + 1
         second = first + 2
         third = second + 3
    -    value = third * 2
    +    value = third * 4
         fourth = value + 4
         fifth = fourth + 5
         sixth = fifth + 6
''')

RECIPE = textwrap.dedent('''\
    id: tiny
    title: Tiny recipe
    summary: A recipe made up for the port tests.
    kind: source-patch
    provenance:
      article: {part: 2, section: s, quote: "quote text"}
      seed_map: B.0
      upstream: {status: new, evidence: made up}
    versions: {vllm_ascend: ">=0.18.0"}
    releases:
      # the release the patch was written for
      - versions: '>=0.23.0,<0.24'
        status: new
        msg: made up for the test
        patches: [0001-tiny.patch]
        probe: [{file: vllm_ascend/__init__.py, exists: true}]
      - versions: '>=0.24.0'
        status: {status}
        msg: the newer releases, made up
        probe: [{file: vllm_ascend/__init__.py, exists: true}]
    patches:
      - file: 0001-tiny.patch
        description: >-
          Doubles the factor of compute.
        origin: test
        last_update: 2026-01-01
        targets: [vllm_ascend/m.py]
        status: present
    verification: {level: declared, needs_npu: false}
''')


def _tree(root: Path, files: dict[str, str | bytes]) -> Path:
    (root / "vllm_ascend").mkdir(parents=True)
    (root / "vllm_ascend" / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode() if isinstance(text, str) else text)
    return root


def _catalog(tmp_path: Path, status: str = "new"):
    root = tmp_path / "catalog"
    folder = root / "recipes" / "tiny"
    folder.mkdir(parents=True)
    (folder / "0001-tiny.patch").write_text(PATCH)
    (folder / "recipe.yaml").write_text(RECIPE.replace("{status}", status))
    return load_catalog(root)


def _trees(tmp_path: Path, target: dict, version: str = "0.24.0") -> Trees:
    base = _tree(tmp_path / "0.23.0", {"vllm_ascend/m.py": MODULE})
    return Trees({"0.23.0": base, version: _tree(tmp_path / version, target)}, ["0.23.0", version])


CONFLICTING = MODULE.replace("third * 2", "third * 3")
CASES = [
    # id, files of the 0.24.0 tree, status of its entry, patch outcome, file outcome, action
    ("exact", {"vllm_ascend/m.py": MODULE}, "new", "exact", "exact", "write"),
    ("offset", {"vllm_ascend/m.py": "# a comment\n" * 30 + MODULE}, "new", "offset", "offset", "write"),
    ("context-moved", {"vllm_ascend/m.py": MODULE.replace("x + 1", "x + 100")}, "new", "merged", "merged", "write"),
    ("line-ends", {"vllm_ascend/m.py": MODULE.replace("\n", "\r\n").encode()}, "new", "merged", "merged", "write"),
    ("code-changed", {"vllm_ascend/m.py": CONFLICTING}, "new", "conflict", "conflict", "needs-hand"),
    ("reverse-applies", {"vllm_ascend/m.py": MODULE.replace("third * 2", "third * 4")}, "new", "upstream",
     "upstream", "needs-hand"),
    ("renamed-file", {"vllm_ascend/ops/n.py": MODULE}, "new", "moved", "moved", "write"),
    ("moved-and-changed", {"vllm_ascend/ops/n.py": CONFLICTING}, "new", "moved", "moved", "needs-hand"),
    ("gone", {"vllm_ascend/other.py": "def unrelated():\n    return 1\n"}, "new", "missing", "missing", "needs-hand"),
    ("entry-superseded", {"vllm_ascend/m.py": MODULE}, "superseded", "superseded", "exact", "left-out"),
    ("entry-upstream", {"vllm_ascend/m.py": MODULE}, "upstream", "upstream", "exact", "left-out"),
]


@pytest.mark.parametrize("target, status, outcome, file_outcome, action", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_outcomes(tmp_path, target, status, outcome, file_outcome, action):
    catalog = _catalog(tmp_path, status)
    result = port(catalog, ["tiny"], "0.23.0", "0.24.0", _trees(tmp_path, target), DATE).recipes[0]
    patch = result.patches[0]
    assert (patch.outcome, patch.files[0].outcome, result.action) == (outcome, file_outcome, action), result.why


def test_merged_shows_the_one_refreshed_hunk(tmp_path):
    catalog = _catalog(tmp_path)
    target = {"vllm_ascend/m.py": MODULE.replace("x + 1", "x + 100")}
    result = port(catalog, ["tiny"], "0.23.0", "0.24.0", _trees(tmp_path, target), DATE).recipes[0]
    (hunk,) = result.patches[0].refreshed_hunks
    assert hunk.splitlines()[1:] == ["     first = x + 100", "     second = first + 2", "     third = second + 3",
                                     "-    value = third * 2", "+    value = third * 4", "     fourth = value + 4",
                                     "     fifth = fourth + 5", "     sixth = fifth + 6"]
    assert "Last-Update: 2026-12-03" in result.patches[0].refreshed
    assert (result.new_range, result.split) == (">=0.24.0", (None, ">=0.24.0", None))


def test_moved_names_where_the_code_went(tmp_path):
    catalog = _catalog(tmp_path)
    result = port(catalog, ["tiny"], "0.23.0", "0.24.0", _trees(tmp_path, {"vllm_ascend/ops/n.py": MODULE}), DATE)
    file = result.recipes[0].patches[0].files[0]
    assert (file.moved_to, file.merges_clean) == ("vllm_ascend/ops/n.py", True)
    assert "hunk @@ -7 (compute) → vllm_ascend/ops/n.py:6 compute (same name)" in file.why
    new = result.recipes[0].new_patches[0]
    assert new.targets == ("vllm_ascend/ops/n.py",) and "diff --git a/vllm_ascend/ops/n.py b/vllm_ascend/ops/n.py" in new.text


def test_moved_without_the_name_is_found_by_its_identifiers(tmp_path):
    """The function was renamed and grew: its hunk is placed by the identifiers it shares."""
    catalog = _catalog(tmp_path)
    renamed = MODULE.replace("def compute(x):", "def compute_values(x, scale=1):").replace("return sixth",
                                                                                          "return sixth * scale")
    decoy = "def unrelated(first):\n    return first\n"
    trees = _trees(tmp_path, {"vllm_ascend/a.py": decoy, "vllm_ascend/ops/n.py": renamed})
    file = port(catalog, ["tiny"], "0.23.0", "0.24.0", trees, DATE).recipes[0].patches[0].files[0]
    assert file.moved_to == "vllm_ascend/ops/n.py" and "compute_values (holds" in file.why


def test_the_new_file_name_follows_the_porters_convention():
    assert patch_name("0001-x.patch", "0.23.0", "0.30.0rc2", set()) == "0001-x-0.30.patch"
    assert patch_name("0001-x.patch", "0.23.0", "0.23.0.post1", set()) == "0001-x-0.23.0.post1.patch"
    assert patch_name("0001-x-0.23.0.post1.patch", "0.23.0.post1", "0.30.0rc2", set()) == "0001-x-0.30.patch"
    assert patch_name("0001-x.patch", "0.23.0", "0.30.0rc2", {"0001-x-0.30.patch"}) == "0001-x-0.30.0rc2.patch"
    assert patch_name("0001-x.patch", "0.23.0", "0.30.0rc2", {"0001-x-0.30.patch", "0001-x-0.30.0rc2.patch"}) is None


# --------------------------------------------------------------------------- writing


def _post1_trees(tmp_path: Path) -> Trees:
    """0.23.0 and a post release whose context moved (the patch's entry covers both)."""
    base = _tree(tmp_path / "0.23.0", {"vllm_ascend/m.py": MODULE})
    post = _tree(tmp_path / "0.23.0.post1", {"vllm_ascend/m.py": MODULE.replace("x + 1", "x + 100")})
    return Trees({"0.23.0": base, "0.23.0.post1": post}, ["0.23.0", "0.23.0.post1", "0.24.0"])


def _write(catalog, trees):
    report = port(catalog, ["tiny"], "0.23.0", "0.23.0.post1", trees, DATE)
    return write_port(catalog, report)


def test_write_cuts_the_entry_and_declares_the_refreshed_patch(tmp_path):
    catalog = _catalog(tmp_path)
    trees = _post1_trees(tmp_path)
    before = (catalog.folders["tiny"] / "recipe.yaml").read_text()
    report = _write(catalog, trees)
    assert report.written == ["recipes/tiny/0001-tiny-0.23.0.post1.patch", "recipes/tiny/recipe.yaml"]
    after = (catalog.folders["tiny"] / "recipe.yaml").read_text()
    added = textwrap.dedent('''\
          - versions: '>=0.23.0,<0.23.0.post1'
            status: new
            msg: made up for the test
            patches: [0001-tiny.patch]
            probe: [{file: vllm_ascend/__init__.py, exists: true}]
          - versions: '>=0.23.0.post1,<0.24'
            status: new
            msg: made up for the test
            patches: [0001-tiny-0.23.0.post1.patch]
            probe: [{file: vllm_ascend/__init__.py, exists: true}]
        ''')
    assert textwrap.indent(added, "  ") in after and "  # the release the patch was written for\n" in after
    assert after.startswith(before.split("  - versions: '>=0.23.0,<0.24'")[0])
    assert after.endswith("    status: present\nverification: {level: declared, needs_npu: false}\n")
    reloaded = load_catalog(catalog.root)["tiny"]
    new = reloaded.patches[-1]
    assert (new.file, new.last_update, new.targets, new.origin) == ("0001-tiny-0.23.0.post1.patch", DATE,
                                                                    ["vllm_ascend/m.py"], "test")
    assert new.description.startswith("Doubles the factor of compute. Ported to >=0.23.0.post1,<0.24 by optkit port:")
    text = (catalog.folders["tiny"] / new.file).read_text()
    assert text.startswith("Description: Doubles the factor of compute. Ported to") and "Last-Update: 2026-12-03\n" in text


def test_write_twice_changes_nothing_the_second_time(tmp_path):
    catalog = _catalog(tmp_path)
    trees = _post1_trees(tmp_path)
    _write(catalog, trees)
    files = {p.name: p.read_bytes() for p in catalog.folders["tiny"].iterdir()}
    again = _write(load_catalog(catalog.root), trees)
    assert again.written == [] and again.recipes[0].action == "up-to-date"
    assert "this port's refresh is identical to it" in again.recipes[0].why
    assert {p.name: p.read_bytes() for p in catalog.folders["tiny"].iterdir()} == files


def test_write_is_deterministic(tmp_path):
    outputs = []
    for name in ("one", "two"):
        catalog = _catalog(tmp_path / name)
        _write(catalog, _post1_trees(tmp_path / name))
        outputs.append({p.name: p.read_bytes() for p in sorted(catalog.folders["tiny"].iterdir())})
    assert outputs[0] == outputs[1]


def test_a_dry_run_writes_nothing(tmp_path):
    catalog = _catalog(tmp_path)
    files = {p: p.read_bytes() for p in catalog.root.rglob("*") if p.is_file()}
    report = port(catalog, ["tiny"], "0.23.0", "0.23.0.post1", _post1_trees(tmp_path), DATE)
    assert report.recipes[0].action == "write" and report.written == []
    assert {p: p.read_bytes() for p in catalog.root.rglob("*") if p.is_file()} == files


@pytest.mark.parametrize("check", [
    pytest.param(lambda: [Problem(Location("recipes/tiny/recipe.yaml", 3), "made-up problem")], id="lint-problem"),
    pytest.param(lambda: (_ for _ in ()).throw(ValidationFailed([Problem(Location("x"), "does not load")])),
                 id="load-error"),
])
def test_a_failed_check_puts_everything_back(tmp_path, check):
    catalog = _catalog(tmp_path)
    folder = catalog.folders["tiny"]
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(ValidationFailed):
        write_checked(folder, "id: broken\n", {"0002-new.patch": "diff"}, check)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files


def test_a_clashing_file_is_refused_before_anything_is_written(tmp_path):
    catalog = _catalog(tmp_path)
    folder = catalog.folders["tiny"]
    (folder / "0002-new.patch").write_text("other\n")
    with pytest.raises(OptkitError, match="already exist with other content; nothing was written"):
        write_checked(folder, "id: broken\n", {"0002-new.patch": "diff"}, lambda: [])
    assert (folder / "recipe.yaml").read_text() == RECIPE.replace("{status}", "new")


def test_worksheet_written_then_removed_once_the_port_carries(tmp_path):
    catalog = _catalog(tmp_path)
    conflicted = port(catalog, ["tiny"], "0.23.0", "0.24.0", _trees(tmp_path / "a", {"vllm_ascend/m.py": CONFLICTING}),
                      DATE)
    write_port(catalog, conflicted)
    sheet = worksheet_path(catalog.folders["tiny"], "0001-tiny.patch", "0.24.0")
    text = sheet.read_text()
    assert conflicted.written == ["recipes/tiny/port-conflicts/0001-tiny-0.24.0.conflict"]
    assert "<<<<<<< 0.24.0\n    value = third * 3\n||||||| 0.23.0\n    value = third * 2\n=======\n" \
           "    value = third * 4\n>>>>>>> 0.23.0+patch\n" in text
    assert (catalog.folders["tiny"] / "recipe.yaml").read_text() == RECIPE.replace("{status}", "new")
    carried = port(catalog, ["tiny"], "0.23.0", "0.24.0", _trees(tmp_path / "b", {"vllm_ascend/m.py": MODULE}), DATE)
    write_port(catalog, carried)
    assert not sheet.exists() and not sheet.parent.exists()


# --------------------------------------------------------------------------- new callers of changed code


CLASS_MODULE = '"""A made-up module."""\n\n\nclass Rope:\n    def forward(self, x):\n        y = x\n' \
    '        out = x * 2\n        y.copy_(out)\n        return y\n\n    def fetch(self, key):\n' \
    '        value = key + 1\n        return value\n'
HEAD = "Description: made up\nOrigin: test\nForwarded: no\nLast-Update: 2026-01-01\nRecipe: tiny\n---\n" \
    "diff --git a/vllm_ascend/m.py b/vllm_ascend/m.py\n--- a/vllm_ascend/m.py\n+++ b/vllm_ascend/m.py\n"
FORWARD_PATCH = HEAD + "@@ -5,7 +5,5 @@ class Rope:\n     def forward(self, x):\n-        y = x\n         out = x * 2\n" \
    "-        y.copy_(out)\n-        return y\n+        return out\n \n     def fetch(self, key):\n"
FETCH_PATCH = HEAD + "@@ -11,3 +11,3 @@ class Rope:\n     def fetch(self, key):\n-        value = key + 1\n" \
    "+        value = key + 2\n         return value\n"
USER = "from vllm_ascend.m import compute\n\n\ndef use(v):\n    compute(v)\n    return v\n"
MODEL = "from vllm_ascend.m import Rope\n\n\nclass Model:\n    def __init__(self):\n        self.rope = Rope()\n\n" \
    "    def go(self, x):\n        self.rope(x)\n        return x\n"
LAYERS = "".join(f"class L{i}:\n    def forward(self, x):\n        return x\n\n\n" for i in range(4))
WRAP = "from vllm_ascend.m import compute\n\n\ndef wrap(x):\n    return compute(x)\n"
MANY = "from vllm_ascend.m import compute\n\n\n" + "".join(f"def use{i:02}(v):\n    return compute(v) + 1\n\n\n"
                                                         for i in range(12))

REVIEW_CASES = [
    # id, module, patch, extra files of 0.23.0, extra files of 0.24.0, action, callers (words), not searched
    pytest.param(MODULE, PATCH, {}, {"vllm_ascend/user.py": USER}, "needs-review",
                 ["vllm_ascend/user.py:5 (use; calls compute(), result unused)"], [], id="new-caller"),
    pytest.param(MODULE, PATCH, {"vllm_ascend/user.py": USER}, {"vllm_ascend/user.py": USER}, "write", [], [],
                 id="caller-in-both"),
    pytest.param(MODULE, PATCH, {"vllm_ascend/user.py": USER}, {"vllm_ascend/ops/user.py": USER}, "write", [], [],
                 id="caller-file-moved"),
    pytest.param(MODULE, PATCH, {}, {"vllm_ascend/tests/test_user.py": USER}, "write", [], [], id="tests-left-out"),
    pytest.param(CLASS_MODULE, FETCH_PATCH, {}, {"vllm_ascend/run.py": "def run(c):\n    return c.fetch(1)\n"},
                 "needs-review", ["vllm_ascend/run.py:2 (run; calls fetch())"], [], id="method-as-attribute"),
    pytest.param(CLASS_MODULE, FORWARD_PATCH, {}, {"vllm_ascend/model.py": MODEL}, "needs-review",
                 ["vllm_ascend/model.py:9 (Model.go; calls rope(), result unused)"], [], id="forward-via-instance"),
    pytest.param(CLASS_MODULE, FORWARD_PATCH, {}, {"vllm_ascend/model.py": MODEL, "vllm_ascend/layers.py": LAYERS},
                 "needs-review", ["vllm_ascend/model.py:9 (Model.go; calls rope(), result unused)"],
                 ["Rope.forward: .forward() calls not searched (5 definitions of forward in the release"],
                 id="common-name-not-searched"),
    pytest.param(CLASS_MODULE, FORWARD_PATCH, {}, {"vllm_ascend/other.py": MODEL.replace("Rope()", "dict()")},
                 "write", [], [], id="instance-name-holds-something-else"),
    pytest.param(MODULE, PATCH, {"vllm_ascend/wrap.py": WRAP},
                 {"vllm_ascend/wrap.py": WRAP + "\n\ndef late(x):\n    wrap(x)\n"}, "needs-review",
                 ["vllm_ascend/wrap.py:9 (late via wrap; calls wrap(), result unused)"], [], id="through-a-wrapper"),
]


def _review_port(tmp_path, module, patch, old, new, reviewed=()):
    catalog = _catalog(tmp_path)
    (catalog.folders["tiny"] / "0001-tiny.patch").write_text(patch)
    catalog = load_catalog(catalog.root)
    trees = Trees({"0.23.0": _tree(tmp_path / "0.23.0", {"vllm_ascend/m.py": module, **old}),
                   "0.24.0": _tree(tmp_path / "0.24.0", {"vllm_ascend/m.py": module, **new})}, ["0.23.0", "0.24.0"])
    return catalog, port(catalog, ["tiny"], "0.23.0", "0.24.0", trees, DATE, reviewed=reviewed)


@pytest.mark.parametrize("module, patch, old, new, action, callers, skipped", REVIEW_CASES)
def test_new_callers_hold_the_write_for_review(tmp_path, module, patch, old, new, action, callers, skipped):
    _, report = _review_port(tmp_path, module, patch, old, new)
    (result,) = report.recipes
    review = result.patches[0].review
    assert (result.patches[0].outcome, result.action) == ("exact", action), result.why
    assert [c.words() for c in review.callers] == callers
    assert [w for w in review.not_searched if not any(w.startswith(s) for s in skipped)] == []
    assert len(review.not_searched) == len(skipped)
    if callers:
        assert "--reviewed tiny writes it" in result.why and result.new_patches  # the refresh is still there


def test_the_callers_are_capped_and_counted(tmp_path):
    _, report = _review_port(tmp_path, MODULE, PATCH, {}, {"vllm_ascend/many.py": MANY})
    review = report.recipes[0].patches[0].review
    assert [c.enclosing for c in review.callers] == [f"use{i:02}" for i in range(10)] and review.more == 2
    assert review.words("0.24.0").endswith("; and 2 more") and "12 new caller(s) of compute" in report.recipes[0].why


def test_reviewed_writes_and_the_review_worksheet_comes_and_goes(tmp_path):
    catalog, held = _review_port(tmp_path, MODULE, PATCH, {}, {"vllm_ascend/user.py": USER})
    write_port(catalog, held)
    sheet = worksheet_path(catalog.folders["tiny"], "0001-tiny.patch", "0.24.0", "review")
    assert held.written == ["recipes/tiny/port-conflicts/0001-tiny-0.24.0.review"]
    text = sheet.read_text()
    assert "#   vllm_ascend/user.py:5 (use; calls compute(), result unused) → compute\n" in text
    assert "--write --reviewed tiny" in text and "+    value = third * 4\n" in text
    assert (catalog.folders["tiny"] / "recipe.yaml").read_text() == RECIPE.replace("{status}", "new")
    trees = Trees({"0.23.0": tmp_path / "0.23.0", "0.24.0": tmp_path / "0.24.0"}, ["0.23.0", "0.24.0"])
    consented = write_port(catalog, port(catalog, ["tiny"], "0.23.0", "0.24.0", trees, DATE, reviewed=["tiny"]))
    assert consented.recipes[0].action == "write" and "were reviewed (--reviewed)" in consented.recipes[0].why
    assert consented.written == ["recipes/tiny/0001-tiny-0.24.patch", "recipes/tiny/port-conflicts/0001-tiny-0.24.0.review",
                                 "recipes/tiny/recipe.yaml"]
    assert not sheet.exists()


def test_the_review_is_in_the_json(tmp_path):
    from optkit.resolve.report import dump_json

    _, report = _review_port(tmp_path, MODULE, PATCH, {}, {"vllm_ascend/user.py": USER})
    (patch,) = json.loads(dump_json(report.as_data()))["recipes"][0]["patches"]
    assert patch["review"]["changed"] == ["compute"]
    assert patch["review"]["callers"] == [{"path": "vllm_ascend/user.py", "line": 5, "enclosing": "use",
                                           "changed": "compute", "calls": "compute", "use": "dropped", "via": ""}]


# --------------------------------------------------------------------------- user errors


@pytest.mark.parametrize("ids, source, target, message", [
    (["tinny"], "0.23.0", "0.24.0", "unknown recipe 'tinny'; did you mean 'tiny'?"),
    (["tiny"], "0.24.0", "0.30.0rc2", "recipe tiny has no written patch set for 0.24.0 (its patches are for "
                                      ">=0.23.0,<0.24); port from one of those with --from"),
    (["tiny"], "0.23.0", "0.23", "--from and --to are both 0.23.0"),
    (["tiny"], "0.23.0", "latest", "--to 'latest' is not a release version"),
    (["tiny"], "0.23.0", "0.24.0", "--reviewed tiyn: not a recipe this port carries from 0.23.0 (ported: tiny)"),
])
def test_user_errors(tmp_path, ids, source, target, message):
    reviewed = ["tiyn"] if "--reviewed" in message else []
    with pytest.raises(OptkitError) as info:
        port(_catalog(tmp_path), ids, source, target, Trees({}, ["0.23.0", "0.24.0"]), reviewed=reviewed)
    assert message in str(info.value)


# --------------------------------------------------------------------------- the range cut and the YAML edit


KNOWN = ["0.18.0", "0.23.0", "0.23.0.post1", "0.24.0rc1", "0.28.0rc1", "0.30.0rc1", "0.30.0rc2"]


@pytest.mark.parametrize("spec, run, expected", [
    pytest.param(">=0.23.0,<0.24", ["0.23.0.post1"], (">=0.23.0,<0.23.0.post1", ">=0.23.0.post1,<0.24", None),
                 id="post-release"),
    pytest.param(">=0.24.0rc1", ["0.28.0rc1", "0.30.0rc1", "0.30.0rc2"],
                 (">=0.24.0rc1,<0.28.0rc1", ">=0.28.0rc1", None), id="open-ended-to-the-newest"),
    pytest.param(">=0.24.0rc1", ["0.28.0rc1"], (">=0.24.0rc1,<0.28.0rc1", ">=0.28.0rc1,<0.30.0rc1", ">=0.30.0rc1"),
                 id="a-run-in-the-middle"),
    pytest.param(">=0.24.0rc1", ["0.24.0rc1", "0.28.0rc1", "0.30.0rc1", "0.30.0rc2"], (None, ">=0.24.0rc1", None),
                 id="the-whole-entry"),
    pytest.param("==0.23.0.post1", ["0.23.0.post1"], (None, "==0.23.0.post1", None), id="one-release"),
    pytest.param(">=0.18.0,!=0.23.0,<0.24", ["0.23.0.post1"],
                 (">=0.18.0,<0.23.0.post1,!=0.23.0", ">=0.23.0.post1,<0.24,!=0.23.0", None), id="other-clauses-kept"),
])
def test_split(spec, run, expected):
    cut = split(spec, KNOWN, run)
    assert (cut.before, cut.run, cut.after) == expected


LAYOUTS = {
    "flow": "    patches: [0001-a.patch]\n    adds: ['env:X']\n",
    "block": "    patches:\n      - 0001-a.patch\n    adds:\n      - env:X\n",
}
ENTRY_DOC = textwrap.dedent('''\
    id: r
    releases:
      - versions: ">=0.23.0,<0.24"  # written for 0.23
        status: new
        msg: m
    {patches}    # a comment inside the entry
        probe: [{file: f, exists: true}]

      # a comment after the entry
      - versions: '>=0.24.0'
        status: new
        msg: n
        probe: [{file: f, exists: true}]
    patches:
      - file: 0001-a.patch
        description: >-
          Old words.
        last_update: 2026-01-01
        targets: [a.py]
        status: present
    # trailing comment
''')


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_yaml_edit_keeps_everything_else(layout):
    text = ENTRY_DOC.replace("{patches}", LAYOUTS[layout])
    out = edited_text(text, "r.yaml", 0, [Piece(">=0.23.0,<0.23.0.post1"),
                                          Piece(">=0.23.0.post1,<0.24", ["0001-a-0.23.0.post1.patch"], ["env:X"])],
                      [Declaration("0001-a.patch", "0001-a-0.23.0.post1.patch", "New words.", DATE, ["b.py"])])
    assert out.count("# a comment inside the entry") == 2 and "  # a comment after the entry\n" in out
    assert "  - versions: '>=0.23.0.post1,<0.24'  # written for 0.23\n" in out
    assert "    patches: [0001-a-0.23.0.post1.patch]\n" in out
    assert "    adds: ['env:X']\n" in out
    assert out.endswith("  - file: 0001-a-0.23.0.post1.patch\n    description: >-\n      New words.\n"
                        "    last_update: 2026-12-03\n    targets:\n      - b.py\n    status: present\n"
                        "# trailing comment\n")
    assert out.startswith("id: r\nreleases:\n  - versions: '>=0.23.0,<0.23.0.post1'  # written for 0.23\n")
    assert "  - versions: '>=0.24.0'\n    status: new\n    msg: n\n    probe: [{file: f, exists: true}]\n" in out


def test_the_yaml_edit_inserts_patches_into_an_entry_without_them():
    text = ENTRY_DOC.replace("{patches}", "")
    out = edited_text(text, "r.yaml", 1, [Piece(">=0.24.0", ["0001-a-0.24.patch"], [])], [])
    assert "    msg: n\n    patches: [0001-a-0.24.patch]\n    probe: [{file: f, exists: true}]\n" in out
    assert out.replace("    patches: [0001-a-0.24.patch]\n", "") == text


# --------------------------------------------------------------------------- patch sections


@pytest.mark.parametrize("text", [
    pytest.param(PATCH, id="dep3-and-git"),
    pytest.param("--- a/x.c\n+++ b/x.c\n@@ -1,2 +1,2 @@\n-a\r\n+b\r\n c\r\n", id="plain-crlf"),
    pytest.param("diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n"
                 "\\ No newline at end of file\n", id="created-no-newline"),
    pytest.param("diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,2 +1,1 @@\n--- not a header\n keep\n", id="dashes-in-a-hunk"),
])
def test_sections_read_back_exactly(text):
    preamble, sections = split_patch(text)
    assert preamble + "".join(s.text() for s in sections) == text


def test_every_catalog_patch_reads_back_exactly():
    from compat_support import CATALOG

    for recipe in CATALOG:
        for patch in recipe.patches:
            data = CATALOG.patch_path(recipe.id, patch.file).read_bytes().decode("utf-8", "surrogateescape")
            preamble, sections = split_patch(data)
            assert preamble + "".join(s.text() for s in sections) == data, patch.file


def test_a_copied_catalog_is_ported_and_written_where_it_lives(tmp_path):
    """--catalog DIR: the recipe's own folder is the one written, and the paths say so."""
    catalog = _catalog(tmp_path)
    layered = tmp_path / "mine"
    shutil.copytree(catalog.folders["tiny"], layered / "tiny")
    shipped = load_catalog(None, [layered])
    assert shipped.folders["tiny"] == layered / "tiny"
    report = write_port(shipped, port(shipped, ["tiny"], "0.23.0", "0.23.0.post1", _post1_trees(tmp_path), DATE))
    assert report.written == [f"{layered}/tiny/0001-tiny-0.23.0.post1.patch", f"{layered}/tiny/recipe.yaml"]


# --------------------------------------------------------------------------- the command's wiring


@pytest.mark.parametrize("args, code, words", [
    pytest.param(["--to", "0.30.0rc2"], 2, "name the recipes to port, or --all (not both)", id="nothing-named"),
    pytest.param(["--all", "compile-super-kernel", "--to", "0.30.0rc2"], 2, "(not both)", id="both"),
    pytest.param(["compile-super-kernel"], 2, "Missing option '--to'", id="no-target"),
    pytest.param(["compile-super-kernel", "--to", "0.30.0rc2", "--date", "yesterday"], 2, "--date", id="bad-date"),
    pytest.param(["compile-superkernel", "--to", "0.30.0rc2"], 1, "did you mean 'compile-super-kernel'?", id="typo"),
    pytest.param(["compile-super-kernel", "--from", "0.30.0rc2", "--to", "0.23.0"], 1,
                 "recipe compile-super-kernel has no written patch set for 0.30.0rc2", id="nothing-written-there"),
])
def test_cli_user_errors(args, code, words):
    from click.testing import CliRunner

    from optkit.cli.main import cli

    result = CliRunner().invoke(cli, ["port", *args])
    assert result.exit_code == code and words in result.output, result.output
