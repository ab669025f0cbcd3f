"""The compiled catalog cache never changes a result: cold, warm, stale, damaged or unwritable."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit.catalog import cache
from optkit.catalog.loader import load_catalog
from optkit.catalog.paths import project_root
from optkit.cli.main import cli
from optkit.errors import ValidationFailed
from optkit.resolve.plan import load_workspace

PLAN = ["plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--json"]
DATA = ("recipes", "models", "targets", "kernels")
RECIPE = "recipes/mtp-enable-k4/recipe.yaml"


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    """An empty cache directory of this test's own (and nothing kept in memory from another test's)."""
    from optkit.catalog import specifiers
    from optkit.resolve import request_record
    from optkit.versions import releases

    path = tmp_path / "cache"
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(path))
    request_record._validator.cache_clear()
    specifiers._cached_answers.cache_clear()
    monkeypatch.setattr(specifiers, "_KNOWN", {})
    releases._load.cache_clear()
    releases._moves.cache_clear()
    return path


@pytest.fixture
def root(tmp_path) -> Path:
    """A copy of the shipped catalog, free to edit."""
    copy = tmp_path / "root"
    for name in DATA:
        shutil.copytree(project_root() / name, copy / name)
    return copy


def snapshot(root: Path) -> dict:
    """Everything a workspace loaded from ``root`` holds, as comparable data."""
    ws = load_workspace(root)
    catalog = ws.catalog
    return {
        "recipes": dict(catalog.recipes),  # records: equal by class, shape and values
        "folders": {rid: path.relative_to(root) for rid, path in catalog.folders.items()},
        "lines": {rid: (lines.file, lines.lines) for rid, lines in catalog.lines.items()},
        "models": dict(ws.models),
        "targets": dict(ws.targets),
        "baselines": ws.baselines,
        "unavailable": ws.unavailable,
    }


def uncached(root: Path, monkeypatch, tmp_path) -> dict:
    """``snapshot`` with the cache out of the way (its directory is a file)."""
    blocker = tmp_path / "no-cache"
    blocker.write_text("")
    with monkeypatch.context() as patch:
        patch.setenv("OPTKIT_CACHE_DIR", str(blocker))
        return snapshot(root)


def plan_json() -> str:
    result = CliRunner().invoke(cli, PLAN)
    assert result.exit_code == 0, result.output
    return result.output


# --------------------------------------------------------------------------- same results


def test_plan_json_is_byte_identical_cold_warm_and_without_a_cache(tmp_path, monkeypatch, cache_home):
    cold = plan_json()
    # An entry that is missing here could not be pickled through the cache's loader (records, enums,
    # dataclasses, dates, containers, registered validator functions): its loader validates every run.
    assert sorted(p.name for p in (cache_home / "catalog").iterdir() if p.suffix != ".key") == [
        "baselines.pickle", "kernels.pickle", "models.pickle", "recipes.pickle", "request.pickle", "secret",
        "specifiers.pickle", "targets.pickle", "versions-0.23.0.pickle", "versions-moves.pickle"]
    warm = plan_json()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "a-file"))
    unwritable_file = plan_json()
    assert cold == warm == unwritable_file


def test_plan_json_is_byte_identical_with_a_read_only_cache_dir(tmp_path, monkeypatch):
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(read_only))
    expected = plan_json()
    shutil.rmtree(read_only)
    read_only.mkdir(mode=0o500)
    if os.access(read_only, os.W_OK):  # root writes anyway
        pytest.skip("this user can write to a read-only directory")
    assert plan_json() == expected
    assert list(read_only.iterdir()) == []


def test_plan_json_is_byte_identical_across_processes(tmp_path):
    env = dict(os.environ, OPTKIT_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(project_root()), *filter(None, [env.get("PYTHONPATH")])])
    runs = [subprocess.run([sys.executable, "-m", "optkit", *PLAN], env=env, capture_output=True, check=True).stdout
            for _ in range(2)]  # the first writes the cache, the second reads it
    assert runs[0] == runs[1] == plan_json().encode()


def test_a_warm_load_validates_nothing_and_equals_a_cold_one(root, cache_home, monkeypatch, tmp_path):
    cold = snapshot(root)
    monkeypatch.setattr("optkit.catalog.loader.parse_model", _must_not_validate)
    monkeypatch.setattr("optkit.catalog.kernels.parse_model", _must_not_validate)  # the others import it when called
    assert snapshot(root) == cold
    monkeypatch.undo()
    assert uncached(root, monkeypatch, tmp_path) == cold


def _must_not_validate(*args):
    raise AssertionError("validated although the cache is warm")


# --------------------------------------------------------------------------- invalidation


def _retitle(path: Path) -> None:
    """Change one character of the title, keeping the size and the modification time."""
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    title = next(line for line in text.splitlines() if line.startswith("title:"))
    path.write_text(text.replace(title, title[:-1] + ("X" if title[-1] != "X" else "Y"), 1), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns


def _add_recipe(root: Path) -> None:
    new = root / "recipes" / "mtp-enable-k4-copy"
    shutil.copytree(root / "recipes" / "mtp-enable-k4", new)
    recipe = new / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("id: mtp-enable-k4", "id: mtp-enable-k4-copy", 1))


def _edit_model(root: Path) -> None:
    path = next((root / "models").glob("*.yaml"))
    path.write_text(path.read_text().replace("dtype: bfloat16", "dtype: float16", 1))


def _edit_target(root: Path) -> None:
    path = root / "targets" / "910c.yaml"
    path.write_text(re.sub(r"(?m)^hbm_gib_per_device: \d+$", "hbm_gib_per_device: 1", path.read_text()))


def _add_patch_file(root: Path) -> None:
    (root / "kernels" / "gdn-l2norm-recurrent" / "stray.txt").write_text("not a spec")


def _remove_kernel_source(root: Path) -> None:
    """The kernel's patch goes: its recipe becomes unavailable (a live check, not a cached one)."""
    next((root / "kernels" / "gdn-l2norm-recurrent").glob("*.patch")).unlink()


@pytest.mark.parametrize("edit", [
    pytest.param(lambda root: _retitle(root / RECIPE), id="recipe-same-size-and-mtime"),
    pytest.param(_add_recipe, id="recipe-added"),
    pytest.param(lambda root: shutil.rmtree(root / "recipes" / "rope-dsv4-return-view"), id="recipe-removed"),
    pytest.param(_edit_model, id="model-edited"),
    pytest.param(_edit_target, id="target-edited"),
    pytest.param(_add_patch_file, id="kernel-folder-file-added"),
    pytest.param(_remove_kernel_source, id="kernel-patch-removed"),
])
@pytest.mark.parametrize("settled", [pytest.param(False, id="just-written"),
                                     pytest.param(True, id="settled-files-keys-from-their-stats")])
def test_an_edit_is_seen_by_the_next_load(edit, settled, root, cache_home, monkeypatch, tmp_path):
    if settled:  # the files count as long unchanged: the next load takes its keys from their stats if it can
        monkeypatch.setattr(cache, "_SETTLED_NS", 0)
    before = snapshot(root)
    if settled:
        assert sorted(p.name for p in (cache_home / "catalog").glob("*.key")) == [
            "baselines.key", "kernels.key", "models.key", "recipes.key", "targets.key"]
    edit(root)
    after = snapshot(root)
    assert after == uncached(root, monkeypatch, tmp_path)
    assert after != before or edit.__name__ == "_add_patch_file"


def test_a_warm_load_of_settled_files_reads_none_of_them(root, cache_home, monkeypatch):
    """Their keys come from the files' stats (signed beside the entries): no file is read, same result."""
    monkeypatch.setattr(cache, "_SETTLED_NS", 0)
    first = snapshot(root)
    read = []
    monkeypatch.setattr(cache, "folder_key", lambda *a, **k: read.append(a) or b"")
    assert snapshot(root) == first and read == []


@pytest.mark.parametrize("damage", [
    pytest.param(lambda key: key.write_bytes(key.read_bytes()[:-1] + b"x"), id="bad-signature"),
    pytest.param(lambda key: key.write_bytes(b""), id="empty"),
    pytest.param(lambda key: key.unlink(), id="missing"),
])
def test_a_damaged_key_file_is_no_shortcut(damage, root, cache_home, monkeypatch):
    monkeypatch.setattr(cache, "_SETTLED_NS", 0)
    first = snapshot(root)
    damage(cache_home / "catalog" / "recipes.key")
    read = []
    real = cache.folder_key
    monkeypatch.setattr(cache, "folder_key", lambda *a, **k: read.append(a[0]) or real(*a, **k))
    assert snapshot(root) == first and root / "recipes" in read


def test_recipe_edit_changes_the_title_it_loads(root, cache_home):
    load_catalog(root)
    _retitle(root / RECIPE)
    assert load_catalog(root)["mtp-enable-k4"].title.endswith(("X", "Y"))


def test_an_entry_of_another_optkit_is_rebuilt(root, cache_home, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(cache, "_fingerprint", lambda code: b"another optkit")
        load_catalog(root)
    builds = []
    monkeypatch.setattr(cache, "_write", lambda name, key, value: builds.append(name))
    load_catalog(root)
    assert builds == ["recipes"]


def test_the_key_covers_the_validating_code(root):
    assert cache.folder_key(root / "models") != cache.folder_key(root / "models", ("resolve/profiles.py",))


# --------------------------------------------------------------------------- damaged entries


def _entry(cache_home: Path) -> Path:
    return cache_home / "catalog" / "recipes.pickle"


def _signed(cache_home: Path, payload: bytes, key: bytes) -> bytes:
    import hmac

    secret = (cache_home / "catalog" / "secret").read_bytes()
    return cache.MAGIC + key + hmac.new(secret, key + payload, "sha256").digest() + payload


class _RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _code_payload(cache_home: Path, root: Path) -> None:
    key = cache.folder_key(root / "recipes")
    payload = pickle.dumps(_RunsCode(cache_home / "pwned"))
    _entry(cache_home).write_bytes(_signed(cache_home, payload, key))


def _rewrite(change):
    """Damage that replaces the bytes of the recipes entry by ``change(bytes)``."""
    return lambda home, root: _entry(home).write_bytes(change(_entry(home).read_bytes()))


def _resign_with_stale_key(home: Path, root: Path) -> None:
    payload = _entry(home).read_bytes()[len(cache.MAGIC) + 64:]
    _entry(home).write_bytes(_signed(home, payload, b"\0" * 32))


DAMAGE = {
    "truncated-half": _rewrite(lambda data: data[: len(data) // 2]),
    "truncated-to-header": _rewrite(lambda data: data[: len(cache.MAGIC) + 10]),
    "empty": _rewrite(lambda data: b""),
    "garbage": _rewrite(lambda data: os.urandom(len(data))),
    "byte-flipped": _rewrite(lambda data: data[:-1] + bytes([data[-1] ^ 1])),
    "other-magic": _rewrite(lambda data: b"X" + data[1:]),
    "foreign-secret": lambda home, root: (home / "catalog" / "secret").write_bytes(os.urandom(32)),
    "secret-missing": lambda home, root: (home / "catalog" / "secret").unlink(),
    "secret-damaged": lambda home, root: (home / "catalog" / "secret").write_bytes(b"short"),
    "stale-key": _resign_with_stale_key,
    "signed-but-runs-code": _code_payload,
    "entry-is-a-directory": lambda home, root: (_entry(home).unlink(), _entry(home).mkdir()),
    "unreadable-entry": lambda home, root: _entry(home).chmod(0),
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_cache_is_rebuilt_without_error(damage, root, cache_home, monkeypatch, tmp_path):
    expected = snapshot(root)
    damage(cache_home, root)
    assert snapshot(root) == expected == uncached(root, monkeypatch, tmp_path)
    assert not (cache_home / "pwned").exists()
    if _entry(cache_home).is_file():
        assert cache._read("recipes", cache.folder_key(root / "recipes")) is not None  # rewritten, whole


def test_the_cache_builds_data_classes_only(cache_home, root):
    load_catalog(root)
    _code_payload(cache_home, root)
    assert cache._read("recipes", cache.folder_key(root / "recipes")) is None
    assert not (cache_home / "pwned").exists()


# --------------------------------------------------------------------------- errors


def _misspell_title(root: Path) -> None:
    path = root / RECIPE
    path.write_text(path.read_text().replace("title:", "titel:", 1))


@pytest.mark.parametrize("break_it, message", [
    pytest.param(_misspell_title, f"{RECIPE}:2: titel: unknown field 'titel' (did you mean 'title'?)",
                 id="recipe-typo"),
    pytest.param(lambda root: (root / RECIPE).write_text("id: [unclosed\n"),
                 f"{RECIPE}:2: invalid YAML: ", id="recipe-yaml-syntax"),
    pytest.param(lambda root: (root / "recipes" / "mtp-enable-k4" / "recipe.yaml").unlink(),
                 "recipes/mtp-enable-k4: no recipe.yaml in this folder", id="recipe-file-removed"),
])
def test_errors_come_from_the_files_never_from_the_cache(break_it, message, root, cache_home, monkeypatch, tmp_path):
    load_catalog(root)  # warm
    break_it(root)
    errors = []
    for _ in range(2):  # the failed load stores nothing, so the second run validates again
        with pytest.raises(ValidationFailed) as exc:
            load_catalog(root)
        errors.append(str(exc.value))
    (tmp_path / "no-cache").write_text("")
    monkeypatch.setenv("OPTKIT_CACHE_DIR", str(tmp_path / "no-cache"))
    with pytest.raises(ValidationFailed) as uncached_exc:
        load_catalog(root)
    assert errors == [str(uncached_exc.value)] * 2
    assert errors[0].startswith(message)
