"""The target catalog (targets/*.yaml): the facts each target gives, its variants, the sources every fact
cites (checked against the cached release trees when they are there), the errors of a bad target file,
and which recipes each target can select (docs/targets.md)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from optkit.bundle.k8s import DEVICE_RESOURCES, device_resource
from optkit.catalog.loader import load_catalog
from optkit.errors import BundleError, UnknownName, ValidationFailed
from optkit.resolve.profile_catalog import find_target, load_targets
from optkit.resolve.profiles import SOURCED_TARGET_FACTS
from optkit.resolve.target_review import reach_markdown, recipe_reach
from optkit.tree.cache import tree_path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = load_targets(ROOT / "targets")


@pytest.mark.parametrize("target, variant, expected", [
    ("910b", None, ("ascend910b", "ascend910b1", "A2", 1, 8, 64, "hccs", "roce")),
    ("910b", "32g", ("ascend910b", "ascend910b1", "A2", 1, 8, 32, "hccs", "roce")),
    ("910c", None, ("ascend910_93", "ascend910_9391", "A3", 2, 16, 64, "hccs", "hccs")),
    ("910c", "752t", ("ascend910_93", "ascend910_9391", "A3", 2, 16, 64, "hccs", "hccs")),
    ("950", None, ("ascend950", "ascend950dt_9582", "A5", 1, 8, 96, "ub", "ub")),
    ("950", "950PR", ("ascend950", "ascend950pr_9599", "A5", 1, 8, 128, "ub", "ub")),
    ("300i-duo", None, ("ascend310p", "ascend310p1", "310P", 2, 8, 48, "pcie", "unknown")),
], ids=["a2-64g", "a2-32g", "a3", "a3-752t", "a5-950dt", "a5-950pr-upper", "300i-duo"])
def test_target_facts(target, variant, expected):
    keys = ["target.soc_family", "target.soc_version", "target.generation", "target.dies_per_card",
            "target.devices_per_node", "target.hbm_gib_per_device", "target.interconnect.within_node",
            "target.interconnect.across_nodes"]
    facts = TARGETS[target].facts(variant)
    assert tuple(facts[k] for k in keys) == expected
    assert facts["target.variant"] == (variant or "").lower()


@pytest.mark.parametrize("name, expected", [
    ("a5", "950"), ("950DT", "950"), ("ascend950", "950"), ("310p", "300i-duo"), ("Atlas-300I-DUO", "300i-duo"),
], ids=["a5", "950dt", "soc-family", "310p", "title-case"])
def test_find_new_targets(name, expected):
    assert find_target(TARGETS, name).id == expected


def test_variant_memory_only_where_the_variant_says():
    assert TARGETS["910b"].hbm_gib() == 64 and TARGETS["910b"].hbm_gib("32g") == 32
    assert TARGETS["910c"].hbm_gib("560t") == TARGETS["910c"].hbm_gib_per_device
    with pytest.raises(UnknownName, match="unknown variant of target 910b '16g'"):
        TARGETS["910b"].hbm_gib("16g")


def test_every_soc_version_is_the_targets_family():
    for target in TARGETS.values():  # build_aclnn.sh picks its SOC branch by this prefix
        assert all(v.startswith(target.soc_family) for v in target.soc_versions), target.id


# --- sources ----------------------------------------------------------------------------------

SOURCES = [pytest.param(target.id, source, id=f"{target.id}-{source.where.rsplit('/', 1)[-1]}-{n}")
           for target in TARGETS.values() for n, source in enumerate(target.sources) if source.release]


def test_every_target_fact_has_a_source():
    for target in TARGETS.values():
        named = {fact for source in target.sources for fact in source.facts}
        assert set(SOURCED_TARGET_FACTS) <= named, target.id
        assert all(s.release or s.where.startswith("https://") for s in target.sources), target.id


@pytest.mark.parametrize("target, source", SOURCES)
def test_tree_sources_say_what_they_are_cited_for(target, source):
    tree = tree_path("vllm-ascend", source.release)
    if not tree.is_dir():
        pytest.skip(f"vllm-ascend {source.release} is not in the tree cache")
    path, line = source.where.rsplit(":", 1)
    lines = (tree / path).read_text(encoding="utf-8").splitlines()
    assert source.quote in lines[int(line) - 1], f"{target}: {source.where} of {source.release}"


# --- bad target files -------------------------------------------------------------------------


def _broken(tmp_path: Path, target: str, edit) -> Path:
    folder = tmp_path / "targets"
    shutil.copytree(ROOT / "targets", folder)
    data = yaml.safe_load((folder / f"{target}.yaml").read_text())
    edit(data)
    (folder / f"{target}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    return folder


def _drop_interconnect_sources(data):
    data["sources"] = [s for s in data["sources"] if not any(f.startswith("interconnect") for f in s["facts"])]


@pytest.mark.parametrize("target, edit, message", [
    ("950", _drop_interconnect_sources,
     "no entry of sources cites interconnect.within_node, interconnect.across_nodes: add where each is read"),
    ("910b", lambda d: d["sources"][0]["facts"].append("hbm_gib"),
     "sources name 'hbm_gib', not a target fact"),
    ("950", lambda d: d["variants"][0].update(soc_version="ascend950xx"),
     "variant soc_version 'ascend950xx' is not one of soc_versions"),
    ("910b", lambda d: d["variants"][0].update(hbm_gib_per_device=0), "greater than 0"),
    ("300i-duo", lambda d: d["interconnect"].update(within_node="nvlink"), "'hccs', 'ub' or 'pcie'"),
    ("910c", lambda d: d.update(serving_dtypes=["float16"]),
     "no entry of sources cites serving_dtypes: add where each is read"),
], ids=["missing-source", "unknown-fact", "stray-variant-soc", "zero-memory", "unknown-link", "unsourced-dtypes"])
def test_bad_target_file_is_refused_with_its_file(tmp_path, target, edit, message):
    with pytest.raises(ValidationFailed) as caught:
        load_targets(_broken(tmp_path, target, edit))
    text = str(caught.value)
    assert f"{target}.yaml:" in text and message in text


def test_a_target_serves_its_own_dtypes():
    """Atlas 300I DUO serves float16 alone (the pages' notes): a plan there serves it unasked, and refuses
    --dtype bfloat16 naming the page line; the other targets serve bfloat16 unasked."""
    from optkit.cli.main import cli
    from click.testing import CliRunner

    duo = find_target(TARGETS, "300i-duo")
    assert duo.serving_dtype(None) == "float16" and find_target(TARGETS, "910c").serving_dtype(None) == "bfloat16"
    with pytest.raises(Exception, match=r"--dtype bfloat16: Atlas 300I DUO .* serves float16 only .*PaddleOCR-VL.md:162"):
        duo.serving_dtype("bfloat16")
    runner = CliRunner()
    shown = runner.invoke(cli, ["plan", "qwen3-vl-8b-instruct", "--target", "300i-duo", "--json"])
    assert shown.exit_code == 0, shown.output
    assert '"--dtype float16"' in shown.output or "--dtype float16" in shown.output
    refused = runner.invoke(cli, ["plan", "qwen3-vl-8b-instruct", "--target", "300i-duo", "--dtype", "bfloat16"])
    assert refused.exit_code != 0 and "serves float16 only" in refused.output


# --- which recipes each target selects --------------------------------------------------------

A3_ONLY = ["compile-super-kernel", "gdn-l2norm-fused-recurrent-kernel", "mc2-token-capacity-1024", "moe-fused-mc2-enable",
           "moe-fusedmc2-overlap-coexist", "op-matmul-allreduce-add-rmsnorm-910c"]


def _reach():
    return {row.recipe: {tid: v.verdict for tid, v in row.verdicts}
            for row in recipe_reach(load_catalog(ROOT), TARGETS)}


def test_a3_only_recipes_are_refused_on_every_other_target():
    reach = _reach()
    for rid in A3_ONLY:
        assert reach[rid] == {"300i-duo": "no", "910b": "no", "910c": "yes", "950": "no"}, rid


def test_no_source_patch_is_selected_on_a5_or_310p():
    catalog = load_catalog(ROOT)
    reach = _reach()
    for recipe in catalog:
        if recipe.kind.value in ("source-patch", "kernel"):
            assert reach[recipe.id]["950"] == reach[recipe.id]["300i-duo"] == "no", recipe.id


def test_docs_table_is_the_recipes_own_rules():
    page = (ROOT / "docs" / "targets.md").read_text(encoding="utf-8")
    region = re.search(r"<!-- optkit:target-reach -->(.*?)<!-- /optkit:target-reach -->", page, re.S).group(1)
    assert region.strip() == reach_markdown(recipe_reach(load_catalog(ROOT), TARGETS))


def test_recipes_without_a_target_rule_are_explained_in_the_docs():
    page = (ROOT / "docs" / "targets.md").read_text(encoding="utf-8")
    open_everywhere = [rid for rid, marks in _reach().items() if set(marks.values()) == {"yes"}]
    assert open_everywhere
    for rid in open_everywhere:
        assert f"- **{rid}**:" in page, f"docs/targets.md does not say why {rid} holds on every target"


# --- Kubernetes resource names -----------------------------------------------------------------


@pytest.mark.parametrize("plugin, generation, resource", [
    ("mindcluster", "A2", "huawei.com/Ascend910"), ("mindcluster", "A3", "huawei.com/Ascend910"),
    ("mindcluster", "310P", "huawei.com/Ascend310P"), ("cce", "A3", "huawei.com/ascend-1980"),
    ("cce", "310P", "huawei.com/ascend-310"), ("cce", "A5", "huawei.com/npu"),
], ids=lambda v: str(v))
def test_device_resource(plugin, generation, resource):
    assert device_resource(plugin, generation) == resource


def test_device_resource_unknown_pair_says_which_plugin_has_one():
    with pytest.raises(BundleError, match=r"^--k8s-device-plugin mindcluster: no public source names its resource "
                                          r"for A5 NPUs; use --k8s-device-plugin cce$"):
        device_resource("mindcluster", "A5")


def test_every_generation_has_a_resource_on_some_plugin():
    generations = {target.device_generation for target in TARGETS.values()}
    assert all(any(g in names for names in DEVICE_RESOURCES.values()) for g in generations)
