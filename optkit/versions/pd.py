"""Prefill/decode disaggregation with the Mooncake connector, per release, as that release's tutorial
launches it: the connector, the KV roles and ports, the environment, the proxy and its options.

The data is read from each release's own tutorials (docs/source/tutorials/features/
pd_disaggregation_mooncake_single_node.md, ``SINGLE``, and pd_disaggregation_mooncake_multi_node.md,
``MULTI``) and its examples; every value cites the file and line it comes from, and
``tests/test_pd.py`` proves each name on the release's real tree (the connector registered by
``vllm_ascend/distributed/kv_transfer/__init__.py``, the proxy script and its options, the cited lines).
0.23.0 and 0.30.0rc2 write the same launch (the 0.30.0rc2 tutorial adds an optional ``qos_priority``,
default 1, which optkit leaves at its default); the lines differ.
"""

from __future__ import annotations

from optkit.errors import RequestError
from optkit.value import field, valueclass

SINGLE = "docs/source/tutorials/features/pd_disaggregation_mooncake_single_node.md"
MULTI = "docs/source/tutorials/features/pd_disaggregation_mooncake_multi_node.md"
PROXY = "examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py"
REGISTRY = "vllm_ascend/distributed/kv_transfer/__init__.py"
CONNECTOR = "vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py"


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
    sources: dict[str, str] = field(default_factory=dict)  # what → file:line(s) in the release's tree

    def kv_port_base(self, devices_per_node: int) -> int:
        """The first instance's kv_port: the tutorial's, raised above the ports AscendDirectTransport
        takes on a node of ``devices_per_node`` devices (16 devices: ≥ 36000, the kv_port guide's table)."""
        return max(self.kv_port, 20000 + devices_per_node * self.reserved_ports_per_device)


PD_RELEASES = {
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
    }),
}
"""The releases whose PD tutorials optkit has read, by version."""


def pd_release(version: str) -> PDRelease:
    """The PD launch of vllm-ascend ``version``, or a RequestError naming the releases optkit has."""
    found = PD_RELEASES.get(version)
    if found is None:
        raise RequestError(f"--pd on vllm-ascend {version}: optkit writes PD bundles as the releases' own tutorials "
                           f"launch them, and has read those of {', '.join(PD_RELEASES)}; plan for one of them "
                           "(--vllm-ascend-version)")
    return found


__all__ = ["PDRelease", "PD_RELEASES", "pd_release"]
