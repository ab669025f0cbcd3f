"""The generated bad-input suite: hundreds of damaged, hostile or absurd inputs and environments, each
run through the real CLI under a time limit (tests/bad_input_support.py).

Every case must end without an internal error (exit 3, "internal error", a traceback) and without
a hang; every case that touches a tree must leave it pristine or fully applied, with no lock behind;
the unsafe ones must leave files outside the tree as they were. Families: encodings, parser limits,
conditions, damaged locks, damaged tree records, unsafe paths and links, environment faults,
absurd request values, output encodings. The property-based parts (hypothesis, derandomized:
the same cases on every run) mutate valid locks, records and requests at random places.
``test_summary`` (last) prints the counts. The subprocess families are marked ``slow``.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bad_input_support import OUTCOMES, check, run, run_subprocess, summary
from optkit.tree.schema import digest
from test_catalog_validation import PATCHED, VALID, write_patched, write_recipe
from tree_support import (REPO, ROOT, FullDisk, make_bundle, make_read_only, make_tree, source_sums, three_patches,
                          undo_read_only)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
PROPERTY = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def examples(n: int) -> settings:
    """Hypothesis settings for ``n`` derandomized examples (the same cases on every run)."""
    return settings(PROPERTY, max_examples=n)
REQUEST = "model: qwen3.5-35b\nmtp: true\nconcurrency: [1, 4]\n"
CONFIG = REPO / "tests" / "fixtures" / "hf" / "qwen3_5_moe" / "config.json"


def scratch(base: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bad-input")


@pytest.fixture(scope="module")
def flagship(base) -> Path:
    """A real bundle (the article's flagship plan), written once."""
    check(run("setup", "flagship-bundle", ["plan", "qwen3.5-35b", "--mtp", "-o", base / "flagship"]), (0,))
    return base / "flagship"


@pytest.fixture(scope="module")
def trees(base):
    """(pristine sums, applied sums, a bundle, a function giving a fresh tree: pristine or applied)."""
    bundle = make_bundle(base / "bundle", three_patches())
    template = make_tree(base / "template")
    pristine = source_sums(template)
    applied_template = base / "applied-template"
    shutil.copytree(template, applied_template, symlinks=True)
    check(run("setup", "apply-template", ["apply", bundle, "--tree", applied_template]), (0,))

    def fresh(applied: bool = False) -> Path:
        tree = scratch(base, "tree") / "tree"
        shutil.copytree(applied_template if applied else template, tree, symlinks=True)
        return tree

    return pristine, source_sums(applied_template), bundle, fresh


def assert_tree_whole(tree: Path, pristine: dict, applied: dict, outcome) -> None:
    """Pristine or fully applied, no lock left, no unfinished journal."""
    assert source_sums(tree) in (pristine, applied), outcome.describe()
    assert not (tree / ".optkit" / "lock").exists(), outcome.describe()
    if not (tree / ".optkit").is_symlink() and (tree / ".optkit").is_dir():
        assert not (tree / ".optkit" / "journal.json").is_file() or "journal" in outcome.case, outcome.describe()


# --------------------------------------------------------------------------- encodings

ENCODINGS = {
    "utf-16": lambda b: b.decode().encode("utf-16"),
    "utf-16-be-bom": lambda b: codecs.BOM_UTF16_BE + b.decode().encode("utf-16-be"),
    "utf-16-le-no-bom": lambda b: b.decode().encode("utf-16-le"),
    "utf-32": lambda b: b.decode().encode("utf-32"),
    "latin-1-byte": lambda b: b[: len(b) // 2] + b"\xe9" + b[len(b) // 2:],
    "nul-byte": lambda b: b[: len(b) // 2] + b"\0" + b[len(b) // 2:],
    "truncated-utf8": lambda b: b + b"\xe2\x82",
    "random-binary": lambda b: random.Random(len(b)).randbytes(512),
    "control-character": lambda b: b[: len(b) // 2] + b"\x07" + b[len(b) // 2:],
    "utf8-bom": lambda b: codecs.BOM_UTF8 + b,
    "crlf": lambda b: b.replace(b"\n", b"\r\n"),
    "empty": lambda b: b"",
    "whitespace": lambda b: b"  \n\t\n",
    "half": lambda b: b[: len(b) // 2],
}


def _request_case(base, trees, flagship, data: bytes):
    path = scratch(base, "request") / "r.yaml"
    path.write_bytes(data)
    return ["plan", "--request", path], None


def _config_case(base, trees, flagship, data: bytes):
    path = scratch(base, "config") / "config.json"
    path.write_bytes(data)
    return ["plan", "--model-config", path, "--target", "910c"], None


def _recipe_case(base, trees, flagship, data: bytes):
    root = scratch(base, "catalog")
    write_recipe(root, VALID)
    (root / "recipes" / "demo" / "recipe.yaml").write_bytes(data)
    return ["lint", root], None


def _layered_recipe(base, data: bytes) -> Path:
    """A ``--catalog`` folder (``<id>/recipe.yaml``) whose one recipe is ``data``."""
    folder = scratch(base, "layer")
    (folder / "demo").mkdir()
    (folder / "demo" / "recipe.yaml").write_bytes(data)
    return folder


def _catalog_flag_case(base, trees, flagship, data: bytes):
    return ["plan", "qwen3.5-35b", "--mtp", "--catalog", _layered_recipe(base, data)], None


def _target_case(base, trees, flagship, data: bytes):
    root = scratch(base, "catalog")
    write_recipe(root, VALID)
    (root / "targets").mkdir()
    (root / "targets" / "910c.yaml").write_bytes(data)
    return ["lint", root], None


def _kernel_case(base, trees, flagship, data: bytes):
    root = scratch(base, "catalog")
    write_recipe(root, VALID)
    shutil.copytree(REPO / "kernels" / "gdn-l2norm-recurrent", root / "kernels" / "gdn-l2norm-recurrent")
    (root / "kernels" / "gdn-l2norm-recurrent" / "kernel.yaml").write_bytes(data)
    return ["lint", root], None


def _bundle_copy(base, trees) -> Path:
    bundle = scratch(base, "bundle") / "bundle"
    shutil.copytree(trees[2], bundle)
    return bundle


def _series_case(base, trees, flagship, data: bytes):
    bundle = _bundle_copy(base, trees)
    (bundle / "patches" / "series").write_bytes(data)
    tree = trees[3]()
    return ["apply", bundle, "--tree", tree], tree


def _lock_case(base, trees, flagship, data: bytes):
    bundle = _bundle_copy(base, trees)
    (bundle / "optkit.lock.json").write_bytes(data)
    tree = trees[3]()
    return ["apply", bundle, "--tree", tree], tree


def _from_lock_case(base, trees, flagship, data: bytes):
    path = scratch(base, "lock") / "optkit.lock.json"
    path.write_bytes(data)
    return ["plan", "--from-lock", path], None


def _state_case(base, trees, flagship, data: bytes):
    tree = trees[3](applied=True)
    (tree / ".optkit" / "state.json").write_bytes(data)
    return ["revert", "--tree", tree], tree


ENCODING_TARGETS = {
    "request": (_request_case, lambda base, trees, flagship: REQUEST.encode()),
    "config.json": (_config_case, lambda base, trees, flagship: CONFIG.read_bytes()),
    "recipe.yaml": (_recipe_case, lambda base, trees, flagship: VALID.encode()),
    "catalog-flag": (_catalog_flag_case, lambda base, trees, flagship: VALID.encode()),
    "target.yaml": (_target_case, lambda base, trees, flagship: (REPO / "targets" / "910c.yaml").read_bytes()),
    "kernel.yaml": (_kernel_case, lambda base, trees, flagship:
                    (REPO / "kernels" / "gdn-l2norm-recurrent" / "kernel.yaml").read_bytes()),
    "series": (_series_case, lambda base, trees, flagship: (trees[2] / "patches" / "series").read_bytes()),
    "lock": (_lock_case, lambda base, trees, flagship: (trees[2] / "optkit.lock.json").read_bytes()),
    "from-lock": (_from_lock_case, lambda base, trees, flagship: (flagship / "optkit.lock.json").read_bytes()),
    "state.json": (_state_case, lambda base, trees, flagship: _applied_state(trees)),
}


def _applied_state(trees) -> bytes:
    tree = trees[3](applied=True)
    return (tree / ".optkit" / "state.json").read_bytes()


@pytest.mark.parametrize("encoding", list(ENCODINGS))
@pytest.mark.parametrize("target", list(ENCODING_TARGETS))
def test_encodings(base, trees, flagship, target, encoding):
    make_case, valid = ENCODING_TARGETS[target]
    args, tree = make_case(base, trees, flagship, ENCODINGS[encoding](valid(base, trees, flagship)))
    outcome = check(run("encoding", f"{target}/{encoding}", args), (0, 1))
    if tree is not None:
        assert_tree_whole(tree, trees[0], trees[1], outcome)


# --------------------------------------------------------------------------- parser limits


def _laughs(levels: int) -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


YAML_DOCUMENTS = {
    **{f"laughs-{n}": _laughs(n) for n in (3, 5, 6, 9, 12)},
    "laughs-in-a-field": "model: qwen3.5-35b\n" + _laughs(9) + "with: *l8\n",
    "alias-cycle": "a: &a [1, *a]\nmodel: qwen3.5-35b\n",
    "mapping-cycle": "a: &a {b: *a}\n",
    "undefined-alias": "model: *nowhere\n",
    **{f"deep-flow-{n}": "model: " + "[" * n + "]" * n + "\n" for n in (62, 63, 64, 1000, 100_000)},
    "deep-block-70": "".join(f"{'  ' * i}k{i}:\n" for i in range(70)) + "  " * 70 + "x: 1\n",
    **{f"int-{n}-digits": f"model: qwen3.5-35b\ninput_len: {'9' * n}\n" for n in (19, 100, 101, 4300, 5000)},
    "hex-int-5000": "input_len: 0x" + "f" * 5000 + "\n",
    "negative-int-5000": "tp: -" + "9" * 5000 + "\n",
    "float-huge": "model: qwen3.5-35b\ninput_len: 1e999\n",
    "impossible-date": "model: qwen3.5-35b\nvllm_ascend_version: 2026-13-45\n",
    "impossible-timestamp": "last: 2026-02-30 25:61:00\n",
    "int-tag-on-text": "tp: !!int two\n",
    "float-tag-on-text": "tp: !!float two\n",
    "binary-tag": "model: !!binary '@@@'\n",
    "python-tag": "model: !!python/object/apply:os.system ['true']\n",
    "set-tag": "with: !!set {a, b}\n",
    "two-documents": "model: a\n---\nmodel: b\n",
    "duplicate-key": "model: qwen3.5-35b\nmodel: qwen3.6-27b\n",
    "duplicate-nested": "a:\n  b: 1\n  b: 2\n",
    "duplicate-flow": "{model: a, model: b}\n",
    "null-key": "~: 1\nmodel: qwen3.5-35b\n",
    "int-key": "1: 1\nmodel: qwen3.5-35b\n",
    "list-key": "? [a, b]\n: 1\n",
    "merge-key": "base: &b {tp: 2}\n<<: *b\nmodel: qwen3.5-35b\n",
    "top-level-list": "- model\n- qwen3.5-35b\n",
    "top-level-scalar": "qwen3.5-35b\n",
    "tab-indent": "model:\n\tqwen3.5-35b\n",
    "long-line": "model: " + "x" * 1_000_000 + "\n",
    "many-keys": "".join(f"k{i}: {i}\n" for i in range(20_000)),
}
JSON_DOCUMENTS = {
    **{f"deep-{n}": "[" * n + "]" * n for n in (63, 64, 65, 900, 1000, 100_000)},
    **{f"deep-object-{n}": '{"a":' * n + "1" + "}" * n for n in (65, 5000)},
    **{f"int-{n}-digits": '{"num_hidden_layers": ' + "9" * n + "}" for n in (100, 101, 5000)},
    "negative-5000-digits": '{"num_hidden_layers": -' + "9" * 5000 + "}",
    "nan": '{"hidden_size": NaN}',
    "infinity": '{"hidden_size": -Infinity}',
    "duplicate-key": '{\n "a": 1,\n "a": 2\n}',
    "duplicate-nested": '{"text_config": {"x": 1,\n "x": 2}}',
    "lone-surrogate": '{"model_type": "\\ud800"}',
    "trailing-garbage": '{"a": 1} x',
    "top-level-list": "[1, 2]",
    "top-level-string": '"x"',
    "control-in-string": '{"a": "\x01"}',
    "huge-float": '{"hidden_size": 1e999999}',
}
SLOW_DOCUMENTS = {"laughs-9", "laughs-12", "laughs-in-a-field", "deep-flow-100000", "long-line", "many-keys",
                  "deep-100000", "deep-object-5000"}


def _yaml_target(base, name: str, text: str, where: str):
    if where == "request":
        path = scratch(base, "doc") / "r.yaml"
        path.write_text(text)
        return ["plan", "--request", path]
    recipe = VALID + text if not text.lstrip().startswith(("-", "[", "{")) else text
    if where == "catalog-flag":
        return ["plan", "qwen3.5-35b", "--catalog", _layered_recipe(base, recipe.encode())]
    root = scratch(base, "catalog")
    write_recipe(root, recipe)
    return ["lint", root]


def _json_target(base, trees, name: str, text: str, where: str):
    if where == "config.json":
        path = scratch(base, "doc") / "config.json"
        path.write_text(text)
        return ["plan", "--model-config", path, "--target", "910c"], None
    bundle = _bundle_copy(base, trees)
    (bundle / "optkit.lock.json").write_text(text)
    tree = trees[3]()
    return ["apply", bundle, "--tree", tree], tree


def _run_document(family: str, case: str, args, slow: bool):
    return check(run_subprocess(family, case, args) if slow else run(family, case, args), (0, 1))


@pytest.mark.parametrize("where", ["request", "recipe.yaml", "catalog-flag"])
@pytest.mark.parametrize("name", [n for n in YAML_DOCUMENTS if n not in SLOW_DOCUMENTS])
def test_yaml_limits(base, name, where):
    _run_document("parser-limits", f"{where}/{name}", _yaml_target(base, name, YAML_DOCUMENTS[name], where), False)


@pytest.mark.parametrize("where", ["config.json", "lock"])
@pytest.mark.parametrize("name", [n for n in JSON_DOCUMENTS if n not in SLOW_DOCUMENTS])
def test_json_limits(base, trees, name, where):
    args, tree = _json_target(base, trees, name, JSON_DOCUMENTS[name], where)
    outcome = _run_document("parser-limits", f"{where}/{name}", args, False)
    if tree is not None:
        assert_tree_whole(tree, trees[0], trees[1], outcome)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_DOCUMENTS))
def test_limits_that_used_to_hang_or_crash_the_interpreter(base, trees, name):
    """In a fresh interpreter with a time limit: a hang or a crash of the process (libyaml's composer
    died with SIGSEGV on 100,000 nested brackets) cannot take the test run with it."""
    if name in YAML_DOCUMENTS:
        for where in ("request", "recipe.yaml", "catalog-flag"):
            _run_document("parser-limits", f"{where}/{name}", _yaml_target(base, name, YAML_DOCUMENTS[name], where), True)
    else:
        for where in ("config.json", "lock"):
            args, tree = _json_target(base, trees, name, JSON_DOCUMENTS[name], where)
            outcome = _run_document("parser-limits", f"{where}/{name}", args, True)
            if tree is not None:
                assert_tree_whole(tree, trees[0], trees[1], outcome)


# --------------------------------------------------------------------------- conditions

CONDITIONS = {
    **{f"parentheses-{n}": "(" * n + "spec.mtp" + ")" * n for n in (31, 32, 33, 1000, 5000)},
    **{f"not-chain-{n}": "not " * n + "spec.mtp" for n in (32, 33, 5000)},
    **{f"lists-{n}": "spec.mtp in " + "[" * n + "true" + "]" * n for n in (31, 33, 5000)},
    "unclosed-5000": "(" * 5000 + "spec.mtp",
    "flat-20000": " and ".join(["spec.mtp"] * 20_000),
    "long-whitespace": "spec.mtp" + " " * 500_000,
    "long-garbage": "spec.mtp and " + "@" * 100_000,
    "huge-number": "parallel.tp == " + "9" * 5000,
    "huge-float": "parallel.tp == 1" + "0" * 400 + ".5",
    "empty": "",
    "not-a-string": None,
}


@pytest.mark.parametrize("command", ["lint", "plan"])
@pytest.mark.parametrize("name", list(CONDITIONS))
def test_conditions(base, name, command):
    """Compiled when the recipe loads (lint), and evaluated too when it is planned (--catalog)."""
    text = VALID.replace('"parallel.tp == 2"', json.dumps(CONDITIONS[name]))
    if command == "plan":
        args = ["plan", "qwen3.5-35b", "--mtp", "--catalog", _layered_recipe(base, text.encode())]
    else:
        root = scratch(base, "catalog")
        write_recipe(root, text)
        args = ["lint", root]
    check(run("conditions", f"{command}/{name}", args), (0, 1))


# --------------------------------------------------------------------------- damaged locks


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2 ** 70), max_value=2 ** 70) | st.floats(allow_nan=False)
    | st.text(max_size=20) | st.sampled_from(["../x", "/etc/passwd", ".optkit/state.json", "0" * 64, "", "series"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)


def _mutate(data, path: tuple, action: str, value):
    """``data`` with ``action`` done at ``path``: replace the value, delete it, or add an unknown key."""
    if not path:
        return value if action == "replace" else data
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if action == "delete":
        del parent[path[-1]]
    elif action == "add-key" and isinstance(parent[path[-1]], dict):
        parent[path[-1]]["unexpected"] = value
    else:
        parent[path[-1]] = value
    return data


def _mutations(valid: dict):
    paths = list(_paths(valid))
    return st.tuples(st.sampled_from(paths), st.sampled_from(["replace", "replace", "delete", "add-key"]), JSON_VALUES)


LOCK_DAMAGE = {
    "patch-null": (("patches", 0), None), "patch-string": (("patches", 0), "x"),
    "name-number": (("patches", 0, "name"), 5), "name-dotdot": (("patches", 0, "name"), "../../x"),
    "name-series": (("patches", 0, "name"), "series"), "sha-upper": (("patches", 0, "sha256"), "A" * 64),
    "targets-string": (("patches", 0, "targets"), "vllm_ascend/moe.py"),
    "targets-outside": (("patches", 0, "targets"), ["../moe.py"]),
    "pending-string": (("pending_patches",), "x"), "pending-entry-null": (("pending_patches",), [None]),
    "recipes-list": (("recipes",), []), "recipe-null": (("recipes", "moe-a"), None),
    "versions-list": (("recipes", "moe-a", "versions"), []), "range-number": (("recipes", "moe-a", "versions", "vllm_ascend"), 23),
    "lock-version-2": (("lock_version",), 2), "lock-version-true": (("lock_version",), True),
    "launch-null": (("launch",), None), "request-list": (("request",), []),
}


@pytest.mark.parametrize("name", list(LOCK_DAMAGE))
def test_damaged_lock_table(base, trees, name):
    path, value = LOCK_DAMAGE[name]
    bundle = _bundle_copy(base, trees)
    lock = json.loads((bundle / "optkit.lock.json").read_text())
    (bundle / "optkit.lock.json").write_text(json.dumps(_mutate(lock, path, "replace", value), indent=2))
    tree = trees[3]()
    outcome = check(run("lock-damage", name, ["apply", bundle, "--tree", tree]), (0, 1))
    assert_tree_whole(tree, trees[0], trees[1], outcome)


FLAGSHIP_DAMAGE = {
    "launch-null": ("launch", None), "argv-string": ("launch.argv", "vllm serve"),
    "env-numbers": ("launch.env", [5]), "env-entry-without-name": ("launch.env", [{"value": "1"}]),
    "sources-list": ("launch.sources", []), "parameters-numbers": ("launch.parameters", {"PORT": 8000}),
    "versions-list": ("versions", []), "vllm-ascend-number": ("versions.vllm_ascend", 0.23),
    "patches-null": ("patches", None), "request-null": ("request", None), "request-tp-true": ("request.tp", True),
    "request-unknown-key": ("request.bogus", 1), "optkit-string": ("optkit", "x"), "bundle-list": ("bundle", []),
}


@pytest.mark.parametrize("command", ["from-lock", "bundle-check"])
@pytest.mark.parametrize("name", list(FLAGSHIP_DAMAGE))
def test_damaged_real_lock(base, flagship, trees, command, name):
    dotted, value = FLAGSHIP_DAMAGE[name]
    bundle = scratch(base, "flagship") / "bundle"
    shutil.copytree(flagship, bundle)
    lock = json.loads((bundle / "optkit.lock.json").read_text())
    target = lock
    *parents, last = dotted.split(".")
    for key in parents:
        target = target[key]
    target[last] = value
    (bundle / "optkit.lock.json").write_text(json.dumps(lock, indent=2))
    args = (["plan", "--from-lock", bundle / "optkit.lock.json"] if command == "from-lock"
            else ["bundle", "check", bundle, "--no-vllm", "--tree", trees[3]()])
    check(run("lock-damage", f"{command}/{name}", args), (0, 1))


@examples(90)
@given(data=st.data())
def test_randomly_damaged_lock(base, trees, data):
    bundle = _bundle_copy(base, trees)
    lock = json.loads((bundle / "optkit.lock.json").read_text())
    path, action, value = data.draw(_mutations(lock))
    (bundle / "optkit.lock.json").write_text(json.dumps(_mutate(lock, path, action, value), indent=2))
    tree = trees[3]()
    outcome = check(run("lock-damage", f"random/{action}/{'.'.join(map(str, path))}", ["apply", bundle, "--tree", tree]),
                    (0, 1))
    assert_tree_whole(tree, trees[0], trees[1], outcome)


# --------------------------------------------------------------------------- damaged tree records


def _valid_journal(tree: Path) -> dict:
    return {"state": "applying", "pid": 2 ** 22 + 7, "backup": {"vllm_ascend/moe.py": source_sums(tree)["vllm_ascend/moe.py"]},
            "new_dirs": [], "patches": ["0001-moe-a--0001-moe-a.patch"], "done": []}


@examples(60)
@given(data=st.data(), command=st.sampled_from(["status", "revert", "apply"]))
def test_randomly_damaged_state(base, trees, data, command):
    tree = trees[3](applied=True)
    state_path = tree / ".optkit" / "state.json"
    state = json.loads(state_path.read_text())
    path, action, value = data.draw(_mutations(state))
    state_path.write_text(json.dumps(_mutate(state, path, action, value), indent=2))
    args = {"status": ["status"], "revert": ["revert"], "apply": ["apply", trees[2]]}[command]
    outcome = check(run("state-damage", f"{command}/{action}/{'.'.join(map(str, path))}", [*args, "--tree", tree]),
                    (0, 1))
    assert_tree_whole(tree, trees[0], trees[1], outcome)


@examples(40)
@given(data=st.data(), command=st.sampled_from(["status", "revert", "apply"]))
def test_randomly_damaged_journal(base, trees, data, command):
    tree = trees[3]()
    record = _valid_journal(tree)
    record["digest"] = digest(record)  # as optkit writes it
    path, action, value = data.draw(_mutations(record))
    (tree / ".optkit").mkdir()
    (tree / ".optkit" / "journal.json").write_text(json.dumps(_mutate(record, path, action, value), indent=2))
    args = {"status": ["status"], "revert": ["revert"], "apply": ["apply", trees[2]]}[command]
    outcome = check(run("state-damage", f"journal/{command}/{action}/{'.'.join(map(str, path))}",
                        [*args, "--tree", tree]), (0, 1))
    assert_tree_whole(tree, trees[0], trees[1], outcome)


# --------------------------------------------------------------------------- unsafe paths and links


def _outside(base) -> Path:
    outside = scratch(base, "outside")
    for name in ("backup", "pristine", "tmp"):
        (outside / name).mkdir()
        (outside / name / "precious.txt").write_text("not optkit's\n")
    (outside / "state.json").write_text("{}")
    return outside


def _sums(path: Path) -> dict:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


UNSAFE_LINKS = [".optkit", ".optkit/backup", ".optkit/pristine", ".optkit/tmp", ".optkit/state.json",
                ".optkit/journal.json", ".optkit/lock", "vllm_ascend/moe.py", "vllm_ascend"]


@pytest.mark.parametrize("command", ["apply", "revert", "status"])
@pytest.mark.parametrize("link", UNSAFE_LINKS)
@pytest.mark.parametrize("applied", [False, True], ids=["pristine", "applied"])
def test_links_out_of_the_tree(base, trees, link, command, applied):
    tree = trees[3](applied=applied)
    outside = _outside(base)
    before = _sums(outside)
    place = tree / link
    if link == "vllm_ascend/moe.py":
        (outside / "moe.py").write_bytes(place.read_bytes())
        before = _sums(outside)
        place.unlink()
        place.symlink_to(outside / "moe.py")
    elif link == "vllm_ascend":
        shutil.copytree(place, outside / "vllm_ascend")
        before = _sums(outside)
        shutil.rmtree(place)
        place.symlink_to(outside / "vllm_ascend", target_is_directory=True)
    else:
        target = outside / Path(link).name if link != ".optkit" else outside
        if place.is_dir() and not place.is_symlink():
            shutil.rmtree(place)
        elif place.exists():
            place.unlink()
        place.parent.mkdir(exist_ok=True)
        place.symlink_to(target, target_is_directory=target.is_dir())
    args = {"apply": ["apply", trees[2]], "revert": ["revert"], "status": ["status"]}[command]
    outcome = check(run("unsafe", f"{command}/{'applied' if applied else 'pristine'}/{link}", [*args, "--tree", tree]),
                    (0, 1))
    assert _sums(outside) == before, outcome.describe()


UNSAFE_TARGETS = ["../outside.py", "/etc/optkit-test.py", ".git/hooks/pre-commit", ".optkit/state.json",
                  "vllm_ascend/../../outside.py", "C:/x.py"]


@pytest.mark.parametrize("target", UNSAFE_TARGETS)
@pytest.mark.parametrize("where", ["bundle", "recipe"])
def test_patches_reaching_outside_the_tree(base, trees, target, where):
    text = f"--- /dev/null\n+++ b/{target}\n@@ -0,0 +1 @@\n+X = 1\n"
    if where == "bundle":
        bundle = make_bundle(scratch(base, "bundle") / "b", [("evil-a", target, text)])
        tree = trees[3]()
        outcome = check(run("unsafe", f"bundle/{target}", ["apply", bundle, "--tree", tree]), (1,))
        assert_tree_whole(tree, trees[0], trees[1], outcome)
        assert not Path("/etc/optkit-test.py").exists()
        return
    root = write_patched(scratch(base, "catalog"), patch=text)
    outcome = check(run("unsafe", f"recipe-diff/{target}", ["lint", root]), (1,))
    assert "touches" in outcome.output, outcome.describe()
    write_recipe(root, PATCHED.replace("[vllm_ascend/envs.py]", json.dumps([target])))
    outcome = check(run("unsafe", f"recipe-targets/{target}", ["lint", root]), (1,))
    assert "is not a file of the vllm-ascend tree" in outcome.output, outcome.describe()


@pytest.mark.parametrize("link", ["patch-file", "recipe-yaml", "recipe-folder"])
def test_symlinks_in_a_catalog(base, link):
    root = write_patched(scratch(base, "catalog"))
    outside = scratch(base, "outside")
    folder = root / "recipes" / "demo"
    if link == "patch-file":
        shutil.move(folder / "0001-demo.patch", outside / "0001-demo.patch")
        (folder / "0001-demo.patch").symlink_to(outside / "0001-demo.patch")
    elif link == "recipe-yaml":
        shutil.move(folder / "recipe.yaml", outside / "recipe.yaml")
        (folder / "recipe.yaml").symlink_to(outside / "recipe.yaml")
    else:
        shutil.move(folder, outside / "demo")
        folder.symlink_to(outside / "demo", target_is_directory=True)
    outcome = check(run("unsafe", f"catalog/{link}", ["lint", root]), (1,))
    assert "is a symlink" in outcome.output, outcome.describe()


# --------------------------------------------------------------------------- environment faults


@pytest.mark.parametrize("command", ["apply", "revert"])
@pytest.mark.parametrize("n", range(1, 13))
def test_disk_full_at_each_write(base, trees, monkeypatch, n, command):
    tree = trees[3](applied=command == "revert")
    FullDisk(monkeypatch, tree.resolve(), n)
    args = ["apply", trees[2]] if command == "apply" else ["revert"]
    outcome = check(run("environment", f"enospc-write-{n}/{command}", [*args, "--tree", tree]), (0, 1))
    assert_tree_whole(tree, trees[0], trees[1], outcome)
    monkeypatch.undo()
    again = check(run("environment", f"enospc-write-{n}/{command}-after", [*args, "--tree", tree]), (0,))
    assert_tree_whole(tree, trees[0], trees[1], again)


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="mounting a tmpfs needs root")
def test_real_full_disk_at_each_size(base, trees):
    mount = scratch(base, "disk")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        for pages in range(0, 10):
            tree = mount / "tree"
            shutil.copytree(trees[3](), tree, symlinks=True)
            stat = os.statvfs(mount)
            with open(mount / "filler", "wb") as f:
                f.write(b"\0" * max(stat.f_bavail * stat.f_frsize - pages * stat.f_frsize, 0))
            outcome = check(run_subprocess("environment", f"disk-full-{pages}-pages", ["apply", trees[2], "--tree", tree]),
                            (0, 1))
            assert_tree_whole(tree, trees[0], trees[1], outcome)
            (mount / "filler").unlink()
            shutil.rmtree(tree)
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


@pytest.mark.parametrize("command", ["apply", "revert", "status", "apply-dry-run"])
@pytest.mark.parametrize("applied", [False, True], ids=["pristine", "applied"])
def test_read_only_tree(base, trees, command, applied):
    tree = trees[3](applied=applied)
    if not make_read_only(tree):
        pytest.skip("cannot make a read-only directory here")
    try:
        args = {"apply": ["apply", trees[2]], "revert": ["revert"], "status": ["status"],
                "apply-dry-run": ["apply", trees[2], "--dry-run"]}[command]
        outcome = check(run("environment", f"read-only-tree/{command}/{applied}", [*args, "--tree", tree]), (0, 1))
        assert source_sums(tree) == (trees[1] if applied else trees[0]), outcome.describe()
    finally:
        undo_read_only(tree)


@pytest.mark.parametrize("what", ["target-file", "target-directory", "package-directory"])
def test_read_only_parts(base, trees, what):
    tree = trees[3]()
    place = {"target-file": tree / "vllm_ascend" / "moe.py", "target-directory": tree / "vllm_ascend",
             "package-directory": tree / "vllm_ascend"}[what]
    place.chmod(0o444 if place.is_file() else 0o555)
    try:
        outcome = check(run("environment", f"read-only/{what}", ["apply", trees[2], "--tree", tree]), (1,))
        assert_tree_whole(tree, trees[0], trees[1], outcome)
    finally:
        place.chmod(0o644 if place.is_file() else 0o755)


@pytest.mark.parametrize("case", ["under-a-file", "is-a-file", "deep-under-a-file", "foreign-directory"])
def test_bundle_output_places(base, case):
    where = scratch(base, "out")
    (where / "file").write_text("x")
    (where / "foreign").mkdir()
    (where / "foreign" / "notes.txt").write_text("mine")
    out = {"under-a-file": where / "file" / "b", "is-a-file": where / "file", "deep-under-a-file": where / "file" / "x" / "y",
           "foreign-directory": where / "foreign"}[case]
    check(run("environment", f"output/{case}", ["plan", "qwen3.5-35b", "-o", out]), (1, 2))
    assert (where / "file").read_text() == "x" and (where / "foreign" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("command", ["plan", "tree-fetch", "apply", "status", "lint", "recipes"])
@pytest.mark.parametrize("cache", ["under-a-file", "a-file", "unreadable-entries"])
def test_cache_dir_faults(base, trees, monkeypatch, command, cache):
    where = scratch(base, "cache")
    (where / "file").write_text("x")
    if cache == "unreadable-entries":
        (where / "cache" / "catalog").mkdir(parents=True)
        for name in ("recipes", "kernels", "models", "targets"):
            (where / "cache" / "catalog" / f"{name}.pickle").write_bytes(b"\x80\x04garbage")
        (where / "cache" / "catalog" / "secret").write_bytes(b"x" * 32)
    path = {"under-a-file": where / "file" / "cache", "a-file": where / "file", "unreadable-entries": where / "cache"}[cache]
    monkeypatch.setattr("optkit.tree.fetch._require_build_tools", lambda: None)
    monkeypatch.setattr("optkit.tree.fetch._pip_download", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOTDIR, "Not a directory")))
    args = {"plan": ["plan", "qwen3.5-35b"], "tree-fetch": ["tree", "fetch", "0.23.0", where / "dest"],
            "apply": ["apply", trees[2], "--tree", trees[3]()], "status": ["status", "--tree", trees[3]()],
            "lint": ["lint"], "recipes": ["recipes"]}[command]
    check(run("environment", f"cache-{cache}/{command}", args, env={"OPTKIT_CACHE_DIR": str(path)}), (0, 1))


# --------------------------------------------------------------------------- absurd request values

ABSURD = {
    "concurrency-2-63": "concurrency: [9223372036854775808]", "concurrency-true": "concurrency: true",
    "concurrency-null": "concurrency: null", "concurrency-empty": "concurrency: []",
    "concurrency-negative": "concurrency: [-1]", "concurrency-float": "concurrency: [1.5]",
    "concurrency-nested": "concurrency: [[1]]", "concurrency-mapping": "concurrency: {a: 1}",
    "concurrency-string-list": "concurrency: ['1']", "concurrency-comma-spaces": "concurrency: ' 1 , 4 '",
    "concurrency-comma-trailing": "concurrency: '1,4,'", "concurrency-unicode-digit": "concurrency: '١'",
    "input-len-10-12": "input_len: 1000000000000", "output-len-zero": "output_len: 0",
    "tp-true": "tp: true", "tp-huge": "tp: 99999999999999999999", "dp-negative": "dp: -2",
    "k-zero": "mtp: true\nnum_speculative_tokens: 0", "mtp-string": "mtp: 'yes'", "mtp-null": "mtp: null",
    "dtype-number": "dtype: 16", "sampling-list": "sampling: [greedy]", "model-list": "model: [a]",
    "model-huge": "model: " + "a" * 100_000, "model-control": 'model: "\\x01"', "target-null": "target: null",
    "version-float": "vllm_ascend_version: 0.23", "version-junk": "vllm_ascend_version: 'latest!!'",
    "version-huge": "vllm_ascend_version: '" + "9" * 5000 + "'", "vllm-version-epoch": "vllm_version: '99!1.0'",
    "with-string": "with: compile-super-kernel", "with-numbers": "with: [1, 2]", "without-everything": "without: ['*']",
    "model-config-missing": "model: null\nmodel_config: /nonexistent/config.json",
    "model-config-dir": "model: null\nmodel_config: /", "variant-junk": "variant: '../../x'",
}


@pytest.mark.parametrize("name", list(ABSURD))
def test_absurd_request_values(base, name):
    path = scratch(base, "request") / "r.yaml"
    body = ABSURD[name]
    path.write_text(body + "\n" if body.startswith("model") else f"model: qwen3.5-35b\n{body}\n")
    check(run("absurd-values", name, ["plan", "--request", path]), (0, 1))


FIELDS = ["model", "target", "variant", "tp", "dp", "ep", "context_parallel", "concurrency", "input_len", "output_len",
          "sampling", "logprobs", "penalties", "min_tokens", "structured_output", "prefix_caching", "async_scheduling",
          "mtp", "spec_method", "draft_model", "num_speculative_tokens", "vllm_ascend_version", "vllm_version", "dtype",
          "quantization", "quantized", "enforce_eager", "lora", "with", "without", "model_config", "bogus"]
YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2 ** 80), max_value=2 ** 80) | st.floats(allow_nan=True)
    | st.text(max_size=12) | st.sampled_from(["qwen3.5-35b", "910c", "0.26.0", "1,4", "greedy", "bfloat16", "752t"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=2),
    max_leaves=4)


@examples(150)
@given(fields=st.dictionaries(st.sampled_from(FIELDS), YAML_VALUES, min_size=1, max_size=5))
def test_random_request_files(base, fields):
    path = scratch(base, "request") / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "qwen3.5-35b", **fields}, allow_unicode=True))
    check(run("absurd-values", "random-file/" + ",".join(sorted(fields)), ["plan", "--request", path]), (0, 1))


FLAGS = ["--tp", "--dp", "--concurrency", "--input-len", "--output-len", "-k", "--target", "--variant",
         "--vllm-ascend-version", "--vllm-version", "--with", "--without", "--sampling", "--dtype"]
FLAG_VALUES = (st.integers(min_value=-(2 ** 70), max_value=2 ** 70).map(str) | st.text(max_size=10)
               | st.sampled_from(["1,4", "0", "", ",", "1,,4", "9" * 5000, "-1", "true", "0x10", "1e3", "٣"]))


@examples(60)
@given(flags=st.lists(st.tuples(st.sampled_from(FLAGS), FLAG_VALUES), min_size=1, max_size=3))
def test_random_flags(flags):
    args = ["plan", "qwen3.5-35b", "--mtp"] + [part for flag, value in flags for part in (flag, value)]
    check(run("absurd-values", "random-flags/" + ",".join(f for f, _ in flags), args), (0, 1, 2))


@examples(50)
@given(data=st.binary(max_size=400))
def test_random_bytes_as_request(base, data):
    path = scratch(base, "request") / "r.yaml"
    path.write_bytes(data)
    check(run("encoding", f"random-bytes/{len(data)}", ["plan", "--request", path]), (0, 1))


# --------------------------------------------------------------------------- output encodings

OUTPUT_COMMANDS = {
    "plan-table": ["plan", "qwen3.5-35b", "--mtp"], "explain": ["explain", "compile-super-kernel", "qwen3.5-35b", "--mtp"],
    "plan-json": ["plan", "qwen3.5-35b", "--mtp", "--json"], "show": ["show", "waterfall-hccl-aiv"],
    "recipes": ["recipes"], "facts": ["facts", "qwen3.5-35b"], "error-message": ["plan", "qwen3.5-35bb"],
    "lint": ["lint"],
}


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "C-locale"])
@pytest.mark.parametrize("name", list(OUTPUT_COMMANDS))
def test_output_encodings(name, encoding):
    """The plan table's '−', the article's Chinese quotes: shown as escapes where stdout cannot encode them."""
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "", "PYTHONUTF8": "0"} if encoding == "C-locale" \
        else {"PYTHONIOENCODING": encoding}
    check(run_subprocess("output-encoding", f"{name}/{encoding}", OUTPUT_COMMANDS[name], env=env), (0, 1))


# --------------------------------------------------------------------------- the counts


def test_summary(capsys):
    """Last in the file: the counts of everything above (when it ran)."""
    if len({o.family for o in OUTCOMES}) < 3:
        pytest.skip("only part of the suite ran")
    with capsys.disabled():
        print("\n" + summary())
    assert not [o for o in OUTCOMES if o.internal or o.hung]
