"""optkit.versions: release data read from the real trees, the knob registry, the declared moves."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from compat_support import CATALOG, catalog_specs, release_trees
from optkit.tree.apply import apply
from optkit.versions.knobs import Section, scan_knobs
from optkit.versions.onrelease import has_knob
from optkit.versions.probes import in_range, inspect_recipes
from optkit.versions.releases import (UnknownRelease, known_versions, load_moves, load_release, release_named,
                                     versions_dir)
from optkit.versions.scan import registry_data, release_yaml, scan_tree
from optkit.versions.schema import Knobs

KNOWN = [str(v) for v in known_versions()]


# --------------------------------------------------------------------------- the data is current


@pytest.mark.tree
@pytest.mark.parametrize("version", KNOWN)
def test_release_data_is_the_scan_of_the_real_tree(version):
    """versions/<version>.yaml is exactly what `optkit versions scan` reads from the release's sdist."""
    tree = release_trees()[version]
    assert (versions_dir() / f"{version}.yaml").read_text(encoding="utf-8") == release_yaml(scan_tree(tree)), (
        f"versions/{version}.yaml is stale: run `optkit versions scan {tree} -o versions/`")


@pytest.mark.tree
def test_every_release_on_pypi_from_0_18_0_is_known():
    """The index lists no release (pre-releases included) from 0.18.0 on that optkit has no data for."""
    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "--pre", "vllm-ascend"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"pip index failed: {proc.stderr.strip()[-300:]}")
    line = next(line for line in proc.stdout.splitlines() if line.startswith("Available versions:"))
    listed = {Version(v.strip()) for v in line.split(":", 1)[1].split(",")}
    assert sorted(v for v in listed if v >= Version("0.18.0")) == known_versions()


@pytest.mark.parametrize("version, vllm, torch_npu, cann", [
    pytest.param("0.18.0", "0.18.0", "2.9.0", "8.5.1", id="0.18.0"),
    pytest.param("0.23.0", "0.23.0", "2.10.0.post4", "9.1.0", id="0.23.0-op-package-beats-stale-notes"),
    pytest.param("0.23.0.post1", "0.23.0", "2.10.0.post4", "9.1.0", id="0.23.0.post1"),
    pytest.param("0.24.0rc1", "0.24.0", "2.10.0.post2", "9.0.1", id="0.24.0rc1"),
    pytest.param("0.30.0rc2", "0.30.0", "2.10.0.post4", "9.2.0", id="0.30.0rc2-docker-image"),
])
def test_release_facts(version, vllm, torch_npu, cann):
    release = load_release(version)
    assert (release.vllm.value, release.pins["torch_npu"].value, release.cann.minimum) == (vllm, torch_npu, cann)
    assert all(":" in s.source for s in [release.vllm, *release.pins.values(), *release.cann.statements])


def test_0_23_0_cann_statements_name_their_files():
    sources = {s.source.split(":")[0]: s.value for s in load_release("0.23.0").cann.statements}
    assert sources == {"csrc/version.info": "9.1.0", "Dockerfile.a3": "9.1.0",
                       "docs/source/user_guide/release_notes.md": "9.0.1"}


def test_unknown_release_names_the_known_ones():
    with pytest.raises(UnknownRelease) as info:
        load_release("0.26.0")
    assert "vllm-ascend 0.26.0 is not a release optkit knows (known: 0.18.0, " in str(info.value)
    assert "--tree DIR" in str(info.value)


@pytest.mark.parametrize("given, known, expected", [
    pytest.param("0.23", None, "0.23.0", id="short-is-the-final-release"),
    pytest.param("0.23.0.0", None, "0.23.0", id="long-spelling"),
    pytest.param("v0.23.0", None, "0.23.0", id="v-prefix"),
    pytest.param("0.23.0.post1", None, "0.23.0.post1", id="post-release-is-its-own"),
    pytest.param("0.30.0rc2", None, "0.30.0rc2", id="pre-release-exact"),
    pytest.param("0.30", None, "; the releases of 0.30 it knows are 0.30.0rc1, 0.30.0rc2; give one of them "
                 "(`optkit versions list`), or plan for", id="short-of-pre-releases-only"),
    pytest.param("0.26.0", None, "; the releases of 0.26.0 it knows are 0.26.0rc1;", id="final-of-an-rc"),
    pytest.param("0.99", None, "vllm-ascend 0.99 is not a release optkit knows (known: 0.18.0, ", id="unknown"),
    pytest.param("0.23", ["0.23", "0.23.0"], "vllm-ascend 0.23 names 2 releases optkit knows (0.23, 0.23.0); "
                 "give one of them exactly", id="two-files-of-one-release"),
])
def test_a_version_names_one_release_or_is_refused(given, known, expected):
    if not expected[0].isdigit():
        with pytest.raises(UnknownRelease) as info:
            release_named(given, known, flag="--vllm-ascend-version")
        assert str(info.value).startswith("--vllm-ascend-version: vllm-ascend ") and expected in str(info.value)
        return
    assert release_named(given, known) == expected


def _plan_version(text):
    from optkit.resolve.facts import ascend_version
    from optkit.resolve.request_record import parse_request

    return str(ascend_version(parse_request({"model": "qwen3.5-35b", "vllm_ascend_version": text})))


def _compat_version(text):
    from optkit.versions.compat import releases_named

    (named,) = releases_named([text])
    return named


def _port_version(text):
    from optkit.versions.port import _release

    return _release(text, "--to", KNOWN)


def _fetched_version(text):
    from optkit.tree.fetch import _normalize_version

    return _normalize_version(text)


@pytest.mark.parametrize("view", [
    pytest.param(lambda v: load_release(v).version, id="load_release"),
    pytest.param(_plan_version, id="plan-request"),
    pytest.param(_compat_version, id="compat-releases"),
    pytest.param(_port_version, id="port-to"),
    pytest.param(_fetched_version, id="tree-fetch"),
])
@pytest.mark.parametrize("given, expected", [
    pytest.param("0.23", "0.23.0", id="0.23"),
    pytest.param("0.23.0.post1", "0.23.0.post1", id="0.23.0.post1"),
    pytest.param("0.30.0rc1", "0.30.0rc1", id="0.30.0rc1"),
])
def test_every_caller_reads_a_version_alike(view, given, expected):
    assert view(given) == expected


@pytest.mark.parametrize("view, flag", [
    pytest.param(_plan_version, "--vllm-ascend-version", id="plan-request"),
    pytest.param(_compat_version, "--releases", id="compat-releases"),
])
def test_every_caller_refuses_an_unknown_version_alike(view, flag):
    with pytest.raises(UnknownRelease) as info:
        view("0.30")
    assert str(info.value).startswith(f"{flag}: vllm-ascend 0.30 is not a release optkit knows (known: 0.18.0, ")
    assert info.value.near == ["0.30.0rc1", "0.30.0rc2"]


# --------------------------------------------------------------------------- the registry, on the real data


def _keys(section, path=()):
    for key, value in section.keys.items():
        yield ".".join((*path, key))
        if not isinstance(value, str):
            yield from _keys(value, (*path, key))


@pytest.mark.parametrize("version, knob, present", [
    pytest.param("0.23.0", "env:VLLM_ASCEND_ENABLE_FUSED_MC2", True, id="fused-mc2-env-0.23"),
    pytest.param("0.26.0rc1", "env:VLLM_ASCEND_ENABLE_FUSED_MC2", True, id="fused-mc2-env-0.26"),
    pytest.param("0.27.1rc1", "env:VLLM_ASCEND_ENABLE_FUSED_MC2", False, id="fused-mc2-env-gone-0.27"),
    pytest.param("0.27.1rc1", "env:VLLM_ASCEND_ENABLE_FLASHCOMM1", True, id="flashcomm1-read-directly"),
    pytest.param("0.23.0", "additional_config:ascend_compilation_config.fuse_allreduce_rms", True, id="fuse-ar-rms-0.23"),
    pytest.param("0.30.0rc2", "additional_config:ascend_compilation_config.fuse_allreduce_rms", False, id="fuse-ar-rms-gone"),
    pytest.param("0.27.1rc1", "additional_config:ascend_compilation_config.enable_super_kernel", False, id="super-kernel-0.27"),
    pytest.param("0.28.0rc1", "additional_config:ascend_compilation_config.enable_super_kernel", True, id="super-kernel-0.28"),
    pytest.param("0.29.0rc1", "additional_config:enable_reduce_sample", True, id="reduce-sample-0.29"),
    pytest.param("0.30.0rc1", "additional_config:enable_reduce_sample", False, id="reduce-sample-gone-0.30"),
    pytest.param("0.23.0", "additional_config:weight_prefetch_config.prefetch_ratio", True, id="prefetch-config-0.23"),
    pytest.param("0.26.0rc1", "additional_config:weight_prefetch_config", False, id="prefetch-config-gone-0.26"),
    pytest.param("0.23.0", "additional_config:multistream_overlap_gate", True, id="overlap-gate-0.23"),
    pytest.param("0.26.0rc1", "additional_config:multistream_overlap_gate", False, id="overlap-gate-gone-0.26"),
])
def test_registry_shows_the_drift(version, knob, present):
    knobs = load_release(version).knobs
    kind, name = knob.split(":", 1)
    found = (name in knobs.env or name in knobs.env_read) if kind == "env" else name in set(_keys(knobs.additional_config))
    assert found is present


@pytest.mark.parametrize("version, strict", [("0.18.0", "ignored"), ("0.23.0", "ignored"), ("0.26.0rc1", "ignored"),
                                             ("0.27.1rc1", "rejected"), ("0.30.0rc2", "rejected")])
def test_unknown_keys_rejected_from_0_27_1rc1(version, strict):
    config = load_release(version).knobs.additional_config
    assert config.unknown_keys == strict
    assert config.keys["ascend_compilation_config"].unknown_keys == strict


@pytest.mark.parametrize("move", load_moves(), ids=lambda m: f"{m.old}->{m.new}")
def test_declared_move_matches_the_registries(move):
    """Before `since` the old knob exists; from `since` the new one exists and the old one is gone."""
    since = Version(move.since)
    for version in known_versions():
        knobs = load_release(version).knobs
        has = {knob: _has(knobs, knob) for knob in (move.old, move.new)}
        if version >= since:
            assert has == {move.old: False, move.new: True}, f"{version}: {has}"
    before = max(v for v in known_versions() if v < since)
    assert _has(load_release(before).knobs, move.old), f"{before} lacks {move.old}"


def _has(knobs, knob: str) -> bool:
    kind, name = knob.split(":", 1)
    if kind == "env":
        return name in knobs.env or name in knobs.env_read
    return name in set(_keys(knobs.additional_config))


# --------------------------------------------------------------------------- the scanner, on tiny sources


LEGACY = """
class AscendCompilationConfig:
    def __init__(self, enable_npugraph_ex=True, **kwargs):
        self.fuse_muls_add = kwargs.get("fuse_muls_add", True)
class EplbConfig:
    _defaults = {"dynamic_eplb": False}
    def __init__(self, user_config=None):
        for key, value in user_config.items():
            if key not in self._defaults:
                raise ValueError(key)
class Strict:
    def __init__(self, a=1):
        pass
class AscendConfig:
    def __init__(self, vllm_config):
        additional_config = vllm_config.additional_config or {}
        compile = additional_config.get("ascend_compilation_config", {})
        self.c = AscendCompilationConfig(**compile)
        self.e = EplbConfig(additional_config.get("eplb_config", {}))
        self.s = Strict(**additional_config.get("strict_config", {}))
        self.x = self._get_config_value(additional_config, "enable_fused_mc2", "VLLM_ASCEND_ENABLE_FUSED_MC2", 0)
        if "flag" in additional_config:
            pass
"""

PYDANTIC = """
from vllm_ascend.config_utils import config
@config
class AscendCompilationConfig:
    enable_npugraph_ex: bool = True
    enable_super_kernel: bool | None = None
    HIDDEN: ClassVar[int] = 1
@config
class AscendConfig:
    model_config = ConfigDict(extra="forbid")
    enable_fused_mc2: int = 0
    ascend_compilation_config: AscendCompilationConfig = dataclasses.field(default_factory=AscendCompilationConfig)
    _private: set = dataclasses.field(default_factory=set, init=False)
    derived: int = dataclasses.field(default=0, init=False)
def init_ascend_config(vllm_config):
    _NON_USER_INPUT_KEYS = {"refresh", "enable_fused_mc2"}
"""

ENVS = """
env_variables = {
    "VLLM_ASCEND_ENABLE_FUSED_MC2": lambda: int(os.getenv("VLLM_ASCEND_ENABLE_FUSED_MC2", "0")),
}
"""


def _tree(tmp_path: Path, ascend_config: str, extra: dict[str, str] | None = None) -> Path:
    package = tmp_path / "vllm_ascend"
    package.mkdir(parents=True)
    for name, text in {"__init__.py": "", "envs.py": ENVS, "ascend_config.py": ascend_config,
                       "config_utils.py": 'merged = ConfigDict(extra="forbid")\n', **(extra or {})}.items():
        (package / name).write_text(textwrap.dedent(text))
    return tmp_path


def _flat(section: Section, path=()) -> dict[str, str]:
    out = {}
    for key, value in section.keys.items():
        if isinstance(value, Section):
            out[".".join((*path, key))] = value.unknown_keys
            out.update(_flat(value, (*path, key)))
        else:
            out[".".join((*path, key))] = "key"
    return out


def test_legacy_registry(tmp_path):
    extra = {"worker.py": 'import os\nX = os.environ.get("HCCL_BUFFSIZE")\nY = "ASCEND_X" in os.environ\n'}
    registry = scan_knobs(_tree(tmp_path, LEGACY, extra))
    assert _flat(registry.additional_config) == {
        "ascend_compilation_config": "ignored", "ascend_compilation_config.enable_npugraph_ex": "key",
        "ascend_compilation_config.fuse_muls_add": "key",
        "eplb_config": "rejected", "eplb_config.dynamic_eplb": "key",
        "strict_config": "rejected", "strict_config.a": "key",
        "enable_fused_mc2": "key", "flag": "key"}
    assert registry.additional_config.unknown_keys == "ignored"
    assert registry.additional_config.env == {"enable_fused_mc2": "VLLM_ASCEND_ENABLE_FUSED_MC2"}
    assert registry.env == {"VLLM_ASCEND_ENABLE_FUSED_MC2": "vllm_ascend/envs.py:3"}
    assert registry.env_read == {"ASCEND_X": "vllm_ascend/worker.py:3", "HCCL_BUFFSIZE": "vllm_ascend/worker.py:2"}


def test_pydantic_registry(tmp_path):
    registry = scan_knobs(_tree(tmp_path, PYDANTIC))
    config = registry.additional_config
    assert _flat(config) == {"enable_fused_mc2": "key", "ascend_compilation_config": "rejected",
                             "ascend_compilation_config.enable_npugraph_ex": "key",
                             "ascend_compilation_config.enable_super_kernel": "key", "refresh": "key"}
    assert config.unknown_keys == "rejected" and config.factory == ["refresh"]
    assert config.keys["ascend_compilation_config"].source == "vllm_ascend/ascend_config.py:12"
    assert config.env == {}


def test_pydantic_registry_reads_an_or_with_an_env_var_as_one_switch(tmp_path):
    """0.27.1rc1 on: ``validate(additional_config.get("enable_flashcomm1")) or os.getenv(...)`` (ascend_config.py
    :753-756 in 0.30.0rc2) makes the key and the variable one knob; an ``or`` of two keys, or of a key no
    class or factory takes, makes none."""
    reads = PYDANTIC + """
def derive(vc):
    on = validate((vc.additional_config or {}).get("enable_fused_mc2", False), "x") or os.getenv(
        "VLLM_ASCEND_ENABLE_FUSED_MC2", "0").strip().lower() in ("1", "true")
    two = (vc.additional_config or {}).get("refresh") or (vc.additional_config or {}).get("enable_fused_mc2")
    unknown = (vc.additional_config or {}).get("nobody_takes_this") or os.getenv("NOBODY")
"""
    assert scan_knobs(_tree(tmp_path, reads)).additional_config.env == {
        "enable_fused_mc2": "VLLM_ASCEND_ENABLE_FUSED_MC2"}


def test_scan_cli_writes_the_release_file(tmp_path):
    tree = _tree(tmp_path / "tree", LEGACY)
    (tree / "vllm_ascend" / "_version.py").write_text("__version__ = '0.99.0'\n__commit_id__ = 'gabc'\n")
    (tree / "requirements.txt").write_text("torch==2.10.0\ntorch-npu==2.10.0.post9\n")
    (tree / "Dockerfile.a3").write_text('ARG CANN_VERSION="9.3.0"\nFROM x\nARG VLLM_TAG=v0.99.1\n')
    proc = subprocess.run([sys.executable, "-m", "optkit", "versions", "scan", str(tree), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    import yaml

    data = yaml.safe_load((tmp_path / "out" / "0.99.0.yaml").read_text())
    assert (data["commit"], data["vllm"], data["cann"]["minimum"]) == ("gabc", {"value": "0.99.1", "source": "Dockerfile.a3:3"}, "9.3.0")
    assert data["pins"]["torch_npu"] == {"value": "2.10.0.post9", "source": "requirements.txt:2"}
    assert json.dumps(data).count(str(tmp_path)) == 0


# --------------------------------------------------------------------------- probes, on every release


@pytest.mark.tree
@pytest.mark.parametrize("version", KNOWN)
def test_probes_agree_with_the_declared_statuses(version):
    """On every release, each probed recipe's declared entry holds, and no entry of another status does."""
    problems = []
    for found in inspect_recipes(CATALOG, release_trees()[version], Version(version)):
        if not found.agrees:
            failed = [r.why for results in found.results for r in results if not r.holds]
            declared = found.declared.status if found.declared else "nothing"
            problems.append(f"{found.recipe}: declared {declared}, probes say {found.status} ({failed})")
    assert problems == []


@pytest.mark.parametrize("recipe_id", [r.id for r in CATALOG if r.patches])
def test_every_known_release_is_covered_once(recipe_id):
    for version in known_versions():
        covering = [e.versions for e in CATALOG[recipe_id].releases if in_range(version, e.versions)]
        assert len(covering) == 1, f"{version}: {covering}"


@pytest.mark.tree
def test_patch_sets_add_the_knobs_they_declare(tmp_path):
    """A release entry's `adds` are missing from the release's tree and present once its patch set is applied."""
    entries = [(r.id, e) for r in CATALOG for e in r.releases if e.adds]
    assert entries, "no release entry declares added knobs"
    for rid, entry in entries:
        version = next(v for v in known_versions() if in_range(v, entry.versions))
        tree = tmp_path / rid
        shutil.copytree(release_trees()[str(version)], tree, symlinks=True)
        before = Knobs.model_validate(registry_data(scan_knobs(tree)))
        apply(tree, [s for s in catalog_specs(CATALOG, [rid]) if s.path.name in entry.patches])
        after = Knobs.model_validate(registry_data(scan_knobs(tree)))
        for knob in entry.adds:
            assert not has_knob(before, knob), f"{rid}: {knob} is already in {version}"
            assert has_knob(after, knob), f"{rid}: its patches do not add {knob}"


# --------------------------------------------------------------------------- tree inspect, plan --tree


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optkit", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.tree
def test_tree_inspect_on_a_release():
    proc = _run("tree", "inspect", str(release_trees()["0.28.0rc1"]), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    status = {r["recipe"]: r["status"] for r in report["recipes"]}
    assert report["version"] == "0.28.0rc1" and all(r["agrees"] for r in report["recipes"])
    assert (status["compile-super-kernel"], status["gdn-conv-weight-transpose-cache"],
            status["worker-pinned-staging-reuse"], status["attn-weight-prefetch-next-layer"]) == (
        "upstream", "upstream", "superseded", "broken")


@pytest.fixture
def backported(tmp_path) -> Path:
    """A 0.23.0 tree with upstream's super kernel backported (as a user's internal branch might have)."""
    tree = tmp_path / "branch"
    shutil.copytree(release_trees()["0.23.0"], tree, symlinks=True)
    config = tree / "vllm_ascend" / "ascend_config.py"
    config.write_text(config.read_text() + textwrap.dedent('''
        def _default_super_kernel(data):
            if "enable_super_kernel" not in data and "enable_static_kernel" in data:
                data["enable_super_kernel"] = data["enable_static_kernel"]
        '''))
    compiler = tree / "vllm_ascend" / "compilation" / "compiler_interface.py"
    compiler.write_text(compiler.read_text() + '\n# options["super_kernel_optimize"] = True\n')
    return tree


@pytest.mark.tree
def test_probes_beat_the_version_number(backported):
    inspected = json.loads(_run("tree", "inspect", str(backported), "--json").stdout)
    row = next(r for r in inspected["recipes"] if r["recipe"] == "compile-super-kernel")
    assert (row["status"], row["declared"], row["agrees"]) == ("upstream", "new", False)
    proc = _run("plan", "qwen3.5-35b", "--target", "910c", "--mtp", "--tree", str(backported), "--json")
    assert proc.returncode == 0, proc.stderr
    decision = json.loads(proc.stdout)["decisions"]["compile-super-kernel"]
    assert decision["status"] == "upstream"
    assert decision["notes"] == [f"probes on {backported.resolve()} show 'upstream' (>=0.28.0rc1), not 'new' as declared for 0.23.0"]


@pytest.mark.tree
def test_plan_for_a_release_tree_equals_the_plan_for_its_version():
    for version in ("0.23.0.post1", "0.30.0rc2"):
        by_tree = json.loads(_run("plan", "qwen3.5-35b", "--mtp", "--tree", str(release_trees()[version]), "--json").stdout)
        by_version = json.loads(_run("plan", "qwen3.5-35b", "--mtp", "--vllm-ascend-version", version, "--json").stdout)
        assert (by_tree["selected"], by_tree["launch"]) == (by_version["selected"], by_version["launch"])


def test_tree_and_a_different_version_are_refused(tmp_path):
    tree = _tree(tmp_path / "tree", LEGACY)
    (tree / "vllm_ascend" / "_version.py").write_text("__version__ = '0.23.0'\n")
    proc = _run("plan", "qwen3.5-35b", "--tree", str(tree), "--vllm-ascend-version", "0.30.0rc2")
    assert proc.returncode == 1
    assert f"--vllm-ascend-version 0.30.0rc2 but --tree {tree.resolve()} is vllm-ascend 0.23.0; drop one of them" in proc.stderr


# --------------------------------------------------------------------------- done means


@pytest.mark.tree
@pytest.mark.parametrize("version", ["0.27.1rc1", "0.30.0rc2"])
def test_flagship_sets_nothing_the_release_lacks_or_rejects(version):
    """Every env var of the flagship plan is read by the real tree, every --additional-config key (nested ones
    too) is one the real tree's AscendConfig has (re-read from the tree now, not from versions/)."""
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    knobs = Knobs.model_validate(registry_data(scan_knobs(release_trees()[version])))
    assert knobs.additional_config.unknown_keys == "rejected"
    workspace = load_workspace()
    # The flagship itself, and the flagship with fused MC2 forced in (it loses to the shared-expert side
    # stream on its own): the env var that became an additional_config key is set as the key.
    for forced in ([], ["moe-fused-mc2-enable"]):
        request = Request(model="qwen3.5-35b", target="910c", mtp=True, vllm_ascend_version=version,
                          **{"with": forced})
        result = plan(request, workspace)
        env = [f"env:{s.key}" for s in result.env if not _external(result, s)]
        config = [f"additional_config:{p}" for p in _leaves(result.additional_config)]
        assert [k for k in env + config if not has_knob(knobs, k)] == [], forced
        assert "additional_config:ascend_compilation_config.enable_super_kernel" not in config
        assert "env:VLLM_ASCEND_ENABLE_FUSED_MC2" not in env
        assert "additional_config:enable_fused_mc2" in config or not forced


def _external(result, setting) -> bool:
    recipe = CATALOG[setting.recipe]
    return any(e.name == setting.key and e.external for e in recipe.env)


def _leaves(fragment, prefix=""):
    for key, value in fragment.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


# --------------------------------------------------------------------------- one upstream status in every view


def _recipes_json(recipe_id):
    from click.testing import CliRunner

    from optkit.cli.main import cli

    rows = json.loads(CliRunner().invoke(cli, ["recipes", "--json"]).output)
    return next(r["upstream"] for r in rows if r["id"] == recipe_id)


def _recipes_table(recipe_id):
    from optkit.catalog.records import load_records
    from optkit.cli.render import recipes_table

    table = recipes_table(CATALOG, load_records(CATALOG.root, CATALOG))[0]
    return next(row[2] for row in table.rows if row[0] == recipe_id)


def _show(recipe_id):
    from optkit.catalog.markdown import recipe_markdown

    return recipe_markdown(CATALOG, recipe_id).split("upstream in 0.23.0: **", 1)[1].split("**", 1)[0]


def _show_release_section(recipe_id):
    from optkit.catalog.markdown import recipe_markdown

    line = next(x for x in recipe_markdown(CATALOG, recipe_id).splitlines() if x.startswith("- `>=0.23.0,<0.24`: **"))
    return line.split("**")[1]


def _catalog_md(recipe_id):
    from optkit.catalog.markdown import catalog_markdown

    row = next(x for x in catalog_markdown(CATALOG).splitlines() if x.startswith(f"| [{recipe_id}](#"))
    return row.split(" | ")[2]


def _tree_inspect(recipe_id):
    from compat_support import pristine

    return next(r.status for r in inspect_recipes(CATALOG, pristine("0.23.0"), Version("0.23.0")) if r.recipe == recipe_id)


@pytest.mark.parametrize("view", [
    pytest.param(_recipes_json, id="recipes-json"),
    pytest.param(_recipes_table, id="recipes-table"),
    pytest.param(_show, id="show"),
    pytest.param(_show_release_section, id="show-per-release"),
    pytest.param(_catalog_md, id="docs-catalog"),
    pytest.param(_tree_inspect, id="tree-inspect", marks=pytest.mark.tree),
])
@pytest.mark.parametrize("recipe_id, status", [
    pytest.param("attn-weight-prefetch-next-layer", "partly-upstream", id="attn-weight-prefetch-next-layer"),
    pytest.param("moe-shared-expert-sidestream-ar", "partly-upstream", id="moe-shared-expert-sidestream-ar"),
    pytest.param("sampler-min-tokens-spec-mask-cache", "new", id="sampler-min-tokens-spec-mask-cache"),
])
def test_every_view_shows_one_upstream_status_on_0_23_0(view, recipe_id, status):
    assert view(recipe_id) == status


@pytest.mark.parametrize("recipe_id", [r.id for r in CATALOG if r.releases])
def test_provenance_upstream_is_what_the_release_entries_say_on_0_23_0(recipe_id):
    """``provenance.upstream.status`` is the seed map's word for 0.23.0; the views read the release
    entries (``Recipe.upstream``: the status, and since when the probes show it), so the two must agree."""
    recipe = CATALOG[recipe_id]
    assert recipe.upstream("0.23.0")[0] == recipe.provenance.upstream.status.value
