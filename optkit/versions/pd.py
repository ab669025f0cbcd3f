"""Prefill/decode disaggregation with the Mooncake connector, per release, as that release's tutorial
launches it: the connector, the KV roles and ports, the environment, the proxy and its options.

The data is read from each release's own tutorials (docs/source/tutorials/features/
pd_disaggregation_mooncake_single_node.md, ``SINGLE``, and pd_disaggregation_mooncake_multi_node.md,
``MULTI``) and its examples; every value cites the file and line it comes from, and
``tests/test_pd.py`` proves each name on the release's real tree (the connector registered by
``vllm_ascend/distributed/kv_transfer/__init__.py``, the proxy script and its options, the cited lines).

Every release optkit knows is in ``PD_RELEASES`` or ``NO_PD``. The 13 from 0.21.0rc1 to 0.30.0rc2
have the same paths and launch 1P1D alike (connector, roles, ports, env, proxy options); the lines
differ. 0.21.0rc1 and 0.22.1rc1's tutorials state no rule for speculative tokens across the roles:
their ``speculative`` source is the connector's Mamba state transfer (a hybrid model's tokens equal on
both roles) and the tutorial's prefiller (1), ``UNSTATED_RULE``. From 0.28.0rc1 the multi-node
tutorial adds an optional ``qos_priority`` (default 1, which optkit leaves at its default). 0.18.0,
0.19.1rc1 and 0.20.2rc1 are ``NO_PD``: their ``MooncakeConnectorV1`` lacks vLLM's ``SupportsHMA``,
which the hybrid (Gated DeltaNet) models optkit ships need, and their Qwen3.5 tutorial runs PD with
``MooncakeLayerwiseConnector``, a launch optkit does not write (their PD tutorial also sets an
``engine_id`` per instance).
"""

from __future__ import annotations

from optkit.errors import RequestError
from optkit.value import field, valueclass

SINGLE = "docs/source/tutorials/features/pd_disaggregation_mooncake_single_node.md"
MULTI = "docs/source/tutorials/features/pd_disaggregation_mooncake_multi_node.md"
PROXY = "examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"
REGISTRY = "vllm_ascend/distributed/kv_transfer/__init__.py"
CONNECTOR = "vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py"
QWEN35 = "docs/source/tutorials/models/Qwen3.5-397B-A17B.md"
UNSTATED_RULE = ("self.num_speculative_tokens - 1", '"num_speculative_tokens": 1')
"""What the speculative lines of a release whose tutorials state no rule say: the connector line that
takes the prefiller's Mamba state block by the decoder's own speculative tokens, the tutorial's prefiller."""


@valueclass(frozen=True)
class PDRelease:
    """How one release launches a 1P1D deployment (its tutorial's values), and where each is written."""

    version: str
    connector: str = "MooncakeConnectorV1"
    kv_roles: dict[str, str] = field(default_factory=lambda: {"prefill": "kv_producer", "decode": "kv_consumer"})
    kv_port: int = 30000  # the prefiller's; the decoder's is 100 above (30100)
    kv_port_step: int = 100
    reserved_ports_per_device: int = 1000  # AscendDirectTransport takes [20000, 20000 + devices × 1000)
    api_port: int = 13700  # the prefiller's; the decoder's is the next (13701)
    env: tuple[tuple[str, str], ...] = (("OMP_PROC_BIND", "false"), ("OMP_NUM_THREADS", "10"))
    proxy_script: str = PROXY
    proxy_port: int = 8080
    proxy_options: tuple[str, ...] = ("--host", "--port", "--prefiller-hosts", "--prefiller-ports",
                                      "--decoder-hosts", "--decoder-ports")
    mooncake_module: str = "mooncake.engine"  # what the connector imports its TransferEngine from
    max_tokens_line: int = 0  # the proxy line that sends each request to the prefiller with max_tokens 1
    speculative_words: tuple[str, ...] = ("Hybrid Mamba",)  # what each of sources["speculative"]'s cites says
    sources: dict[str, str] = field(default_factory=dict)  # what → file:line(s) in the release's tree

    def kv_port_base(self, devices_per_node: int) -> int:
        """The first instance's kv_port: the tutorial's, raised above the ports AscendDirectTransport
        takes on a node of ``devices_per_node`` devices (16 devices: ≥ 36000, the kv_port guide's table)."""
        return max(self.kv_port, 20000 + devices_per_node * self.reserved_ports_per_device)


PD_RELEASES = {
    "0.21.0rc1": PDRelease("0.21.0rc1", max_tokens_line=801, speculative_words=UNSTATED_RULE, sources={
        "connector": f"{SINGLE}:173, {MULTI}:534; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:174 (kv_producer), {SINGLE}:215 (kv_consumer)",
        "kv_port": f"{SINGLE}:175 (30000), {SINGLE}:216 (30100); reserved range: {MULTI}:229-234",
        "kv_connector_extra_config": f"{SINGLE}:176-185 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:1650-1669",
        "api_port": f"{SINGLE}:163 (13700), {SINGLE}:204 (13701)",
        "devices": f"{SINGLE}:153 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:194 (=1), {SINGLE}:234",
        "env": f"{SINGLE}:154-159, {SINGLE}:195-200",
        "proxy": f"{SINGLE}:238-248; its options: {PROXY}:644-649",
        "speculative": f"{CONNECTOR}:703 (hybrid models: the decoder takes the prefiller's Mamba state "
                       f"block by its own num_speculative_tokens, so both roles draft alike; the tutorials state no "
                       f"rule), {MULTI}:531 (other models: the tutorial's prefiller drafts 1)",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1264 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.22.1rc1": PDRelease("0.22.1rc1", max_tokens_line=801, speculative_words=UNSTATED_RULE, sources={
        "connector": f"{SINGLE}:173, {MULTI}:534; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:174 (kv_producer), {SINGLE}:215 (kv_consumer)",
        "kv_port": f"{SINGLE}:175 (30000), {SINGLE}:216 (30100); reserved range: {MULTI}:229-234",
        "kv_connector_extra_config": f"{SINGLE}:176-185 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:1807-1826",
        "api_port": f"{SINGLE}:163 (13700), {SINGLE}:204 (13701)",
        "devices": f"{SINGLE}:153 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:194 (=1), {SINGLE}:234",
        "env": f"{SINGLE}:154-159, {SINGLE}:195-200",
        "proxy": f"{SINGLE}:238-248; its options: {PROXY}:644-649",
        "speculative": f"{CONNECTOR}:728 (hybrid models: the decoder takes the prefiller's Mamba state "
                       f"block by its own num_speculative_tokens, so both roles draft alike; the tutorials state no "
                       f"rule), {MULTI}:531 (other models: the tutorial's prefiller drafts 1)",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1305 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.23.0rc1": PDRelease("0.23.0rc1", max_tokens_line=801, sources={
        "connector": f"{SINGLE}:173, {MULTI}:539; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:174 (kv_producer), {SINGLE}:215 (kv_consumer)",
        "kv_port": f"{SINGLE}:175 (30000), {SINGLE}:216 (30100); reserved range: {MULTI}:229-234",
        "kv_connector_extra_config": f"{SINGLE}:176-185 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2007-2026",
        "api_port": f"{SINGLE}:163 (13700), {SINGLE}:204 (13701)",
        "devices": f"{SINGLE}:153 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:194 (=1), {SINGLE}:234",
        "env": f"{SINGLE}:154-159, {SINGLE}:195-200",
        "proxy": f"{SINGLE}:238-248; its options: {PROXY}:644-649",
        "speculative": f"{MULTI}:250-253",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1449 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.23.0": PDRelease("0.23.0", max_tokens_line=801, sources={
        "connector": f"{SINGLE}:173, {MULTI}:558; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:174 (kv_producer), {SINGLE}:215 (kv_consumer)",
        "kv_port": f"{SINGLE}:175 (30000), {SINGLE}:216 (30100); reserved range: {MULTI}:233-238",
        "kv_connector_extra_config": f"{SINGLE}:176-185 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2066-2085",
        "api_port": f"{SINGLE}:163 (13700), {SINGLE}:204 (13701)",
        "devices": f"{SINGLE}:153 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:194 (=1), {SINGLE}:234",
        "env": f"{SINGLE}:154-159, {SINGLE}:195-200",
        "proxy": f"{SINGLE}:238-248; its options: {PROXY}:644-649",
        "speculative": f"{MULTI}:270-272",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1508 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.23.0.post1": PDRelease("0.23.0.post1", max_tokens_line=801, sources={
        "connector": f"{SINGLE}:173, {MULTI}:558; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:174 (kv_producer), {SINGLE}:215 (kv_consumer)",
        "kv_port": f"{SINGLE}:175 (30000), {SINGLE}:216 (30100); reserved range: {MULTI}:233-238",
        "kv_connector_extra_config": f"{SINGLE}:176-185 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2066-2085",
        "api_port": f"{SINGLE}:163 (13700), {SINGLE}:204 (13701)",
        "devices": f"{SINGLE}:153 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:194 (=1), {SINGLE}:234",
        "env": f"{SINGLE}:154-159, {SINGLE}:195-200",
        "proxy": f"{SINGLE}:238-248; its options: {PROXY}:644-649",
        "speculative": f"{MULTI}:270-272",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1508 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.24.0rc1": PDRelease("0.24.0rc1", max_tokens_line=801, sources={
        "connector": f"{SINGLE}:170, {MULTI}:525; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:171 (kv_producer), {SINGLE}:210 (kv_consumer)",
        "kv_port": f"{SINGLE}:172 (30000), {SINGLE}:211 (30100); reserved range: {MULTI}:221-226",
        "kv_connector_extra_config": f"{SINGLE}:173-182 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2059-2078",
        "api_port": f"{SINGLE}:160 (13700), {SINGLE}:199 (13701)",
        "devices": f"{SINGLE}:150 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:189 (=1), {SINGLE}:225",
        "env": f"{SINGLE}:151-156, {SINGLE}:190-195",
        "proxy": f"{SINGLE}:229-239; its options: {PROXY}:644-649",
        "speculative": f"{MULTI}:258-260",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1499 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.25.1rc1": PDRelease("0.25.1rc1", max_tokens_line=829, sources={
        "connector": f"{SINGLE}:170, {MULTI}:511; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:171 (kv_producer), {SINGLE}:210 (kv_consumer)",
        "kv_port": f"{SINGLE}:172 (30000), {SINGLE}:211 (30100); reserved range: {MULTI}:221-226",
        "kv_connector_extra_config": f"{SINGLE}:173-182 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2010-2029",
        "api_port": f"{SINGLE}:160 (13700), {SINGLE}:199 (13701)",
        "devices": f"{SINGLE}:150 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:189 (=1), {SINGLE}:225",
        "env": f"{SINGLE}:151-156, {SINGLE}:190-195",
        "proxy": f"{SINGLE}:229-239; its options: {PROXY}:672-677",
        "speculative": f"{MULTI}:242-245",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1452 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.26.0rc1": PDRelease("0.26.0rc1", max_tokens_line=834, sources={
        "connector": f"{SINGLE}:170, {MULTI}:511; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:171 (kv_producer), {SINGLE}:210 (kv_consumer)",
        "kv_port": f"{SINGLE}:172 (30000), {SINGLE}:211 (30100); reserved range: {MULTI}:221-226",
        "kv_connector_extra_config": f"{SINGLE}:173-182 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2153-2172",
        "api_port": f"{SINGLE}:160 (13700), {SINGLE}:199 (13701)",
        "devices": f"{SINGLE}:150 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:189 (=1), {SINGLE}:225",
        "env": f"{SINGLE}:151-156, {SINGLE}:190-195",
        "proxy": f"{SINGLE}:229-239; its options: {PROXY}:673-678",
        "speculative": f"{MULTI}:242-245",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1556 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.27.1rc1": PDRelease("0.27.1rc1", max_tokens_line=829, sources={
        "connector": f"{SINGLE}:170, {MULTI}:526; registered in {REGISTRY}:29-31",
        "kv_roles": f"{SINGLE}:171 (kv_producer), {SINGLE}:210 (kv_consumer)",
        "kv_port": f"{SINGLE}:172 (30000), {SINGLE}:211 (30100); reserved range: {MULTI}:221-226",
        "kv_connector_extra_config": f"{SINGLE}:173-182 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2203-2222",
        "api_port": f"{SINGLE}:160 (13700), {SINGLE}:199 (13701)",
        "devices": f"{SINGLE}:150 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:189 (=1), {SINGLE}:225",
        "env": f"{SINGLE}:151-156, {SINGLE}:190-195",
        "proxy": f"{SINGLE}:229-239; its options: {PROXY}:672-677",
        "speculative": f"{MULTI}:258-260",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1605 (MooncakeConnector implements SupportsHMA)",
    }),
    "0.28.0rc1": PDRelease("0.28.0rc1", max_tokens_line=829, sources={
        "connector": f"{SINGLE}:172, {MULTI}:584; registered in {REGISTRY}:45-47",
        "kv_roles": f"{SINGLE}:173 (kv_producer), {SINGLE}:212 (kv_consumer)",
        "kv_port": f"{SINGLE}:174 (30000), {SINGLE}:213 (30100); reserved range: {MULTI}:279-284",
        "kv_connector_extra_config": f"{SINGLE}:175-184 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2214-2233",
        "api_port": f"{SINGLE}:162 (13700), {SINGLE}:201 (13701)",
        "devices": f"{SINGLE}:152 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:191 (=1), {SINGLE}:227",
        "env": f"{SINGLE}:153-158, {SINGLE}:192-197",
        "proxy": f"{SINGLE}:231-241; its options: {PROXY}:672-677",
        "speculative": f"{MULTI}:316-318",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1608 (MooncakeConnector implements SupportsHMA)",
        "qos_priority": f"{MULTI}:221-224 (optional, default 1: left at its default)",
    }),
    "0.29.0rc1": PDRelease("0.29.0rc1", max_tokens_line=830, sources={
        "connector": f"{SINGLE}:172, {MULTI}:584; registered in {REGISTRY}:45-47",
        "kv_roles": f"{SINGLE}:173 (kv_producer), {SINGLE}:212 (kv_consumer)",
        "kv_port": f"{SINGLE}:174 (30000), {SINGLE}:213 (30100); reserved range: {MULTI}:279-284",
        "kv_connector_extra_config": f"{SINGLE}:175-184 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2214-2233",
        "api_port": f"{SINGLE}:162 (13700), {SINGLE}:201 (13701)",
        "devices": f"{SINGLE}:152 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:191 (=1), {SINGLE}:227",
        "env": f"{SINGLE}:153-158, {SINGLE}:192-197",
        "proxy": f"{SINGLE}:231-241; its options: {PROXY}:673-678",
        "speculative": f"{MULTI}:316-318",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1608 (MooncakeConnector implements SupportsHMA)",
        "qos_priority": f"{MULTI}:221-224 (optional, default 1: left at its default)",
    }),
    "0.30.0rc1": PDRelease("0.30.0rc1", max_tokens_line=830, sources={
        "connector": f"{SINGLE}:172, {MULTI}:584; registered in {REGISTRY}:45-47",
        "kv_roles": f"{SINGLE}:173 (kv_producer), {SINGLE}:212 (kv_consumer)",
        "kv_port": f"{SINGLE}:174 (30000), {SINGLE}:213 (30100); reserved range: {MULTI}:279-284",
        "kv_connector_extra_config": f"{SINGLE}:175-184 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2222-2241",
        "api_port": f"{SINGLE}:162 (13700), {SINGLE}:201 (13701)",
        "devices": f"{SINGLE}:152 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:191 (=1), {SINGLE}:227",
        "env": f"{SINGLE}:153-158, {SINGLE}:192-197",
        "proxy": f"{SINGLE}:231-241; its options: {PROXY}:673-678",
        "speculative": f"{MULTI}:316-318",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1608 (MooncakeConnector implements SupportsHMA)",
        "qos_priority": f"{MULTI}:221-224 (optional, default 1: left at its default)",
    }),
    "0.30.0rc2": PDRelease("0.30.0rc2", max_tokens_line=830, sources={
        "connector": f"{SINGLE}:172, {MULTI}:584; registered in {REGISTRY}:45-47",
        "kv_roles": f"{SINGLE}:173 (kv_producer), {SINGLE}:212 (kv_consumer)",
        "kv_port": f"{SINGLE}:174 (30000), {SINGLE}:213 (30100); reserved range: {MULTI}:279-284",
        "kv_connector_extra_config": f"{SINGLE}:175-184 (prefill and decode dp_size, tp_size), "
                                     f"read by {CONNECTOR}:2222-2241",
        "api_port": f"{SINGLE}:162 (13700), {SINGLE}:201 (13701)",
        "devices": f"{SINGLE}:152 (ASCEND_RT_VISIBLE_DEVICES=0), {SINGLE}:191 (=1), {SINGLE}:227",
        "env": f"{SINGLE}:153-158, {SINGLE}:192-197",
        "proxy": f"{SINGLE}:231-241; its options: {PROXY}:673-678",
        "speculative": f"{MULTI}:316-318",
        "mooncake": f"{CONNECTOR}:25",
        "hybrid_kv_cache": f"{CONNECTOR}:1608 (MooncakeConnector implements SupportsHMA)",
        "qos_priority": f"{MULTI}:221-224 (optional, default 1: left at its default)",
    }),
}
"""The releases whose PD tutorials optkit has read, by version, oldest first."""


def _no_hybrid(connector_line: int, tutorial_line: int) -> str:
    return (f"its MooncakeConnectorV1 has no hybrid KV cache support ({CONNECTOR}:{connector_line}: class "
            "MooncakeConnector(KVConnectorBase_V1), without vLLM's SupportsHMA), which a model with Gated DeltaNet "
            "layers needs; its Qwen3.5 tutorial runs PD with MooncakeLayerwiseConnector "
            f"instead ({QWEN35}:{tutorial_line}), a launch optkit does not write; for models without Gated DeltaNet "
            "layers (MLA, DeepSeek-V4, Kimi) optkit has not read this release's PD launch")


NO_PD = {
    "0.18.0": _no_hybrid(810, 334),
    "0.19.1rc1": _no_hybrid(814, 336),
    "0.20.2rc1": _no_hybrid(861, 333),
}
"""The releases that cannot get a PD bundle the way optkit writes it, and why (citing their tree)."""


def pd_release(version: str) -> PDRelease:
    """The PD launch of vllm-ascend ``version``, or a RequestError saying why there is none and naming
    the releases that have one."""
    found = PD_RELEASES.get(version)
    if found is None:
        why = NO_PD.get(version, "optkit writes PD bundles as the releases' own tutorials launch them, and has not "
                                 "read this release's")
        raise RequestError(f"--pd on vllm-ascend {version}: {why}; optkit writes PD bundles for "
                           f"{', '.join(PD_RELEASES)}: plan for one of them (--vllm-ascend-version)")
    return found


PAGE_CONNECTORS = {
    "MooncakeConnectorV1": True,
    "MooncakeHybridConnector": True,
    "MooncakeConnectorV2": False,
}
"""The P2P connectors a model's own page may name for its PD roles that optkit writes as the page does, each with
whether its class reads both roles' shapes from ``kv_connector_extra_config`` (``prefill``/``decode``:
``get_from_extra_config("prefill", {})``), so optkit writes them only where it does. Where a release registers
each (``REGISTRY``; ``bundle check`` proves the bundle's on its tree) and what each module reads is proved on the
0.23.0 and 0.30.0rc2 trees by tests/test_pd.py:

- ``MooncakeConnectorV1``: the PD tutorials' connector (kv_p2p/mooncake_connector.py; reads both shapes);
- ``MooncakeHybridConnector``: DeepSeek-V4's pages (kv_p2p/mooncake_hybrid_connector.py, 0.23.0 and 0.30.0rc2:
  the same transfer for models whose KV cache has groups other than full attention; reads both shapes);
- ``MooncakeConnectorV2``: GLM5.3-Flash's page in 0.30.0rc2 (kv_p2p/mooncake/connector.py, registered from
  0.30.0rc2 only; the roles exchange their layouts in the handshake and it reads no shape).

Others the pages name are not written: ``MultiConnector`` with ``AscendStoreConnector`` (GLM5.2.md's A2 PD: a KV
pool whose Mooncake store master optkit does not deploy; the conformance table explains it), and
``MooncakeLayerwiseConnector`` (Qwen3.5-397B-A17B.md's A3 PD: the multi-node tutorial's "Layerwise" variant, KV
sent layer by layer while the prefill runs; optkit writes the tutorials' non-layerwise connector and does not
choose between them without a measurement, tests/conformance/disagreements.yaml). ``MooncakeConnector``
with a ``kv_connector_module_path`` is read as the registered name of the class it names (``BY_MODULE``)."""

BY_MODULE = {
    ("MooncakeConnector", "vllm_ascend.distributed.kv_transfer.kv_p2p.mooncake_connector"): "MooncakeConnectorV1",
}
"""A page's connector class named with its ``kv_connector_module_path`` → the name the release's registry gives that
very class (``REGISTRY``: ``register_connector("MooncakeConnectorV1", "<that module>", "MooncakeConnector")``; vLLM
loads the class from the module path first, factory.py:105-107 in 0.30.0). Qwen3.5-397B-A17B.md's 950 PD roles
name it so; optkit writes the registered name (the conformance table explains the two spellings)."""

PAGE_CONNECTOR_KEYS = ("kv_connector", "kv_load_failure_policy")
"""The ``--kv-transfer-config`` keys of a page's role command a plan carries with its connector, beside its
``kv_connector_extra_config`` keys other than the shapes (``ascend_local_comm_res_path``: the directory of the
950's UB endpoint files, vllm_ascend/utils.py:584 in 0.23.0, :700 in 0.30.0rc2); vLLM's ``kv_load_failure_policy``
(``fail`` by default, vllm/config/kv_transfer.py:70 in 0.23.0, :103 in 0.30.0) applies to any connector."""

INERT_EXTRA_KEYS = ("use_ascend_direct",)
"""``kv_connector_extra_config`` keys no code of the compared releases reads (tests/conformance/catalog.yaml):
not carried."""


def reads_shapes(connector: str) -> bool:
    """Whether ``connector`` reads both roles' TP and DP from ``kv_connector_extra_config``."""
    return PAGE_CONNECTORS.get(connector, True)


__all__ = ["PDRelease", "PD_RELEASES", "NO_PD", "PAGE_CONNECTORS", "pd_release", "reads_shapes"]
