"""What a role of a PD plan runs differently from the plan itself, as the releases' tutorials launch it.

Every prefiller of vllm-ascend's PD tutorials runs eager (``--enforce-eager``, its MTP draft too with
``"enforce_eager": true``) while every decoder keeps full-decode graphs (``cudagraph_mode``
``FULL_DECODE_ONLY``): the multi-node Mooncake tutorial (``pd_disaggregation_mooncake_multi_node.md``,
all four prefiller tabs, layerwise and not) and the model tutorials that deploy PD (Qwen3.5-397B-A17B,
Qwen3.5-27B / Qwen3.6-27B: "Decode nodes focus on low-latency token generation, … enabling full-decode
aclgraph"). A prefiller answers each request with one token (the proxy's ``max_tokens`` 1), so graphs
captured for decode batches would only cost capture time and device memory there.
``PREFILL_EAGER`` cites, per release, the multi-node tutorial's ``--enforce-eager`` lines of its prefiller
tabs; ``tests/test_pd_roles.py`` reads each on the release's tree.
"""

from __future__ import annotations

MULTI = "docs/source/tutorials/features/pd_disaggregation_mooncake_multi_node.md"

PREFILL_EAGER: dict[str, tuple[int, ...]] = {
    "0.21.0rc1": (287, 345, 526, 584),
    "0.22.1rc1": (287, 345, 526, 584),
    "0.23.0rc1": (292, 350, 531, 589),
    "0.23.0": (311, 369, 550, 608),
    "0.23.0.post1": (311, 369, 550, 608),
    "0.24.0rc1": (295, 350, 517, 572),
    "0.25.1rc1": (280, 335, 503, 558),
    "0.26.0rc1": (280, 335, 503, 558),
    "0.27.1rc1": (295, 350, 518, 573),
    "0.28.0rc1": (353, 408, 576, 631),
    "0.29.0rc1": (353, 408, 576, 631),
    "0.30.0rc1": (353, 408, 576, 631),
    "0.30.0rc2": (353, 408, 576, 631),
}
"""Per release: the lines of ``MULTI`` where a prefiller tab launches ``vllm serve`` with ``--enforce-eager``."""

GRAPH_ADDITIONAL_KEYS = ("ascend_compilation_config",)
"""``--additional-config`` keys that only act on captured graphs (npugraph_ex, static and super kernels),
left out of an eager role's argv as ``--compilation-config`` is."""


def graph_setting(key: str) -> bool:
    """Whether a plan's config key (``compilation_config.…``, ``additional_config.…``: the keys of
    ``Plan.config_sources``) is a graph setting an eager role leaves out."""
    prefix, _, rest = key.partition(".")
    return prefix == "compilation_config" or (prefix == "additional_config" and rest.split(".")[0] in GRAPH_ADDITIONAL_KEYS)


def prefill_eager_source(version: str) -> str:
    """Where release ``version``'s tutorial runs its prefillers eager ('' when optkit has not read it)."""
    lines = PREFILL_EAGER.get(version)
    return f"{MULTI}:{', '.join(map(str, lines))}" if lines else ""


__all__ = ["PREFILL_EAGER", "GRAPH_ADDITIONAL_KEYS", "graph_setting", "prefill_eager_source"]
