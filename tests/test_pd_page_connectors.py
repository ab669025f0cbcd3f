"""The KV connector of a PD plan whose model's own page runs its roles with one (``optkit.versions.pd``
PAGE_CONNECTORS, BY_MODULE): carried with its keys on both roles, shapes written only where the connector reads
them, proved on the real trees; the two roles always get one connector (``role_plans.pair_connector``)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from optkit.bundle.check import _string_calls, check_pd
from optkit.bundle.pd import role_launches
from optkit.errors import RequestError
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.resolve.role_plans import pair_connector
from optkit.versions.pd import BY_MODULE, PAGE_CONNECTORS, REGISTRY, reads_shapes
from optkit.versions.tutorial_data import load

WORKSPACE = load_workspace()
V4_PRO_A2 = {"model": "deepseek-v4-pro", "target": "910b", "vllm_ascend_version": "0.30.0rc2", "tp": 4, "dp": 8,
             "prefix_caching": False, "async_scheduling": True, "enforce_eager": True, "flashcomm1": True,
             "quantization": "w4a8", "spec_method": "mtp", "num_speculative_tokens": 1, "concurrency": [64],
             "pd": "1:1", "prefill_tp": 8, "prefill_dp": 4}
"""DeepSeek-V4-Pro.md's A2 PD pair (0.30.0rc2 :1336-1385): TP 8 × DP 4 prefill, TP 4 × DP 8 decode."""
REGISTERED = {"0.23.0": {"MooncakeConnectorV1", "MooncakeHybridConnector"},
              "0.30.0rc2": {"MooncakeConnectorV1", "MooncakeHybridConnector", "MooncakeConnectorV2"}}
NOT_WRITTEN = {"MultiConnector", "MooncakeLayerwiseConnector"}
"""A connector a page names that optkit does not write (PAGE_CONNECTORS' docstring says why)."""


def _configs(fields: dict) -> dict[str, dict]:
    launches = role_launches(plan(Request(**fields), WORKSPACE), WORKSPACE)
    return {role: json.loads(launch.instances_data()[0]["kv_transfer_config"]) for role, launch in launches.items()}


def test_deepseek_v4_pro_runs_its_pages_hybrid_connector_on_both_roles():
    result = plan(Request(**V4_PRO_A2), WORKSPACE)
    launches = role_launches(result, WORKSPACE)
    for role, launch in launches.items():
        config = json.loads(launch.instances_data()[0]["kv_transfer_config"])
        assert config["kv_connector"] == "MooncakeHybridConnector"
        assert config["kv_connector_extra_config"] == {"decode": {"dp_size": 8, "tp_size": 4},
                                                       "prefill": {"dp_size": 4, "tp_size": 8}}
        assert "--no-disable-hybrid-kv-cache-manager" in launch.argv, role  # the page keeps the manager on
        owner = launch.sources[launch.argv.index("--kv-transfer-config") + 1]
        assert owner.startswith("request,page:DeepSeek-V4-Pro.md:"), owner
    from optkit.bundle.pd import pd_lock

    lock = pd_lock(launches)
    assert lock["connector"] == "MooncakeHybridConnector"
    assert lock["sources"]["connector"].startswith("page:DeepSeek-V4-Pro.md:")


def test_a_connector_that_reads_no_shapes_gets_none():
    """GLM5.3-Flash.md's A3 PD pair (0.30.0rc2 :473) runs MooncakeConnectorV2, which reads no extra config."""
    fields = {"model": "glm-5.3-flash", "target": "910c", "vllm_ascend_version": "0.30.0rc2", "tp": 1, "dp": 16,
              "prefix_caching": False, "async_scheduling": True, "flashcomm1": False, "quantization": "w8a8",
              "spec_method": "mtp", "num_speculative_tokens": 5, "concurrency": [160], "pd": "1:1"}
    for config in _configs(fields).values():
        assert config["kv_connector"] == "MooncakeConnectorV2"
        assert "kv_connector_extra_config" not in config


def test_a_class_named_by_its_module_is_written_by_its_registered_name_with_its_keys():
    """Qwen3.5-397B-A17B.md's 950 PD roles (0.30.0rc2 :620) name MooncakeConnector with its module path and the
    950's endpoint directory: optkit writes MooncakeConnectorV1 and carries the directory."""
    fields = {"model": "qwen3.5-397b-a17b", "target": "950", "vllm_ascend_version": "0.30.0rc2", "tp": 8, "dp": 1,
              "prefix_caching": False, "async_scheduling": True, "enforce_eager": True, "flashcomm1": False,
              "quantization": "w4a4-mxfp4", "spec_method": "mtp", "num_speculative_tokens": 1, "concurrency": [64],
              "pd": "1:1"}
    for config in _configs(fields).values():
        assert config["kv_connector"] == "MooncakeConnectorV1"
        assert config["kv_connector_extra_config"]["ascend_local_comm_res_path"] == "/etc/hixlep"
        assert "kv_connector_module_path" not in config


def test_a_connector_optkit_does_not_write_takes_its_keys_with_it():
    """GLM5.2.md's A2 PD (0.30.0rc2 :834) runs a MultiConnector with a KV pool and kv_load_failure_policy
    recompute: optkit writes the release's P2P connector and none of the pool's keys."""
    fields = {"model": "glm-5.2", "target": "910b", "vllm_ascend_version": "0.30.0rc2", "tp": 8, "dp": 4,
              "prefix_caching": True, "async_scheduling": True, "enforce_eager": True, "flashcomm1": True,
              "quantization": "w8a8c8", "spec_method": "mtp", "num_speculative_tokens": 1, "concurrency": [2048],
              "pd": "1:1"}
    for config in _configs(fields).values():
        assert config["kv_connector"] == "MooncakeConnectorV1"
        assert set(config) == {"kv_connector", "kv_connector_extra_config", "kv_port", "kv_role"}


def test_a_role_without_a_page_command_takes_its_partners_connector():
    def role_plan(transfer, sources):
        return SimpleNamespace(kv_transfer=transfer, config_sources=sources, roles={}, pd=object())

    decode = role_plan({"kv_connector": "MooncakeHybridConnector"}, {"kv_transfer_config.kv_connector": "page:X.md:9"})
    result = role_plan({}, {})
    result.roles = {"decode": decode}
    pair_connector(result)  # the prefill role runs result's own plan
    assert result.kv_transfer == {"kv_connector": "MooncakeHybridConnector"}
    assert result.config_sources["kv_transfer_config.kv_connector"] == "page:X.md:9"

    prefill = role_plan({"kv_connector": "MooncakeConnectorV2"}, {"kv_transfer_config.kv_connector": "page:X.md:5"})
    result.roles = {"decode": decode, "prefill": prefill}
    with pytest.raises(RequestError, match=r"different KV connectors \(the prefill role's page:X.md:5 names "
                                           r"MooncakeConnectorV2, the decode role's page:X.md:9 names "
                                           r"MooncakeHybridConnector\)"):
        pair_connector(result)


@pytest.mark.parametrize("release", sorted(REGISTERED))
def test_every_connector_a_pd_page_names_is_written_or_said_not_to_be(release):
    """A new connector in upstream's model pages fails here until optkit decides how to write it."""
    data = load(release)
    named = {(c["options"]["--kv-transfer-config.kv_connector"]["value"],
              c["options"].get("--kv-transfer-config.kv_connector_module_path", {}).get("value"))
             for page in data.pages.values() if page["kind"] == "llm" for c in page["commands"]
             if "--kv-transfer-config.kv_connector" in c.get("options", {})}
    unknown = {(name, module) for name, module in named if (name, module) not in BY_MODULE
               and (module is not None or name not in {*PAGE_CONNECTORS, *NOT_WRITTEN})}
    assert not unknown


@pytest.mark.tree
@pytest.mark.parametrize("release", sorted(REGISTERED))
def test_the_page_connectors_are_registered_and_read_what_optkit_writes(release):
    from optkit.tree.fetch import fetch

    root = fetch(release).path
    registry = _registry(root)
    assert {name for name in PAGE_CONNECTORS if name in registry} == REGISTERED[release]
    for name in REGISTERED[release]:
        module, _ = registry[name]
        source = (root / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
        assert ('get_from_extra_config("prefill"' in source) == reads_shapes(name), name
        assert ("kv_connector_extra_config" in source or "get_from_extra_config" in source) == reads_shapes(name)
    for (cls, module), name in BY_MODULE.items():
        assert registry[name] == (module, cls)  # the very class the page names by its module


@pytest.mark.tree
def test_bundle_check_finds_the_pages_connector_in_the_tree(tmp_path):
    from optkit.bundle.writer import write_bundle
    from optkit.tree.fetch import fetch

    write_bundle(plan(Request(**V4_PRO_A2), WORKSPACE), WORKSPACE, tmp_path / "b")
    lock = json.loads((tmp_path / "b" / "optkit.lock.json").read_text(encoding="utf-8"))
    result = check_pd(lock, fetch("0.30.0rc2").path)
    assert result.status == "pass", result.problems
    assert "MooncakeHybridConnector registered" in result.note


def _registry(root: Path) -> dict[str, tuple[str, str]]:
    """The tree's ``register_connector(name, module, class)`` calls: name → (module, class)."""
    assert "MooncakeConnectorV1" in _string_calls(root / REGISTRY, "register_connector")
    found = {}
    for node in ast.walk(ast.parse((root / REGISTRY).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "register_connector":
            name, module, cls = (a.value for a in node.args[:3])
            found[name] = (module, cls)
    return found
