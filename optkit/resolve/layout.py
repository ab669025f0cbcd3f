"""How a request's TP × DP ranks (TP × PCP × PP × DP with prefill context or pipeline parallelism) sit on nodes:
one node, DP ranks spread over nodes, one TP group or a pipeline's stages spanning nodes. Every other stage reads
the layout from here (facts, serve.sh, the k8s manifests).

The node count is ``--nodes`` when given, else the fewest nodes that hold TP × DP
(``ceil(TP × DP / devices_per_node)``): TP × DP already says how many devices the plan runs, and the
target how many a node has, so a second number would only be a way to disagree. ``--nodes`` exists
for what the count cannot say, e.g. spreading DP ranks over more nodes than they need.

The layouts, each as vLLM 0.23.0 and vllm-ascend launch it:

- ``single-node``: TP × DP ≤ the node's devices.
- ``dp-across-nodes``: TP fits one node and the DP ranks split evenly over the nodes, each node
  running DP / nodes whole TP groups (vllm-ascend 0.23.0 docs/source/tutorials/models/
  Qwen3.5-397B-A17B.md, "Multi-Node Deployment with MP": ``--data-parallel-size-local``,
  ``--data-parallel-start-rank``, ``--data-parallel-address``, ``--data-parallel-rpc-port``,
  ``--headless`` on the other nodes).
- ``tp-across-nodes``: TP does not fit one node; with DP = 1 its ranks split evenly over the nodes
  (vLLM 0.23.0's multi-node multiprocessing executor, ``--nnodes``/``--node-rank``/
  ``--master-addr``/``--master-port``, ``--headless`` on the other nodes: vllm/engine/arg_utils.py
  ``create_engine_config``; vllm-ascend 0.23.0 runs it through ``AscendMultiprocExecutor``,
  vllm_ascend/patch/platform/patch_multiproc_executor.py, and documents it from 0.30.0rc2 in
  docs/source/user_guide/feature_guide/pipeline_parallel.md).

- ``pp-across-nodes``: a pipeline-parallel group (``--pp``) that does not fit one node; with DP = 1 its stages
  split evenly over the nodes, launched as ``tp-across-nodes`` is (vllm-ascend 0.30.0rc2 GLM5.md's PD prefiller:
  ``--pipeline-parallel-size 2 --distributed-executor-backend mp --nnodes 2 --node-rank`` with ``--headless`` on
  node 1, one stage of TP 16 per A3 node; docs/source/user_guide/feature_guide/pipeline_parallel.md).

A TP group spanning nodes together with DP > 1 is not planned: vLLM infers each node's DP rank from
its node rank then, and no vllm-ascend release documents that launch.
"""

from __future__ import annotations

from math import ceil

from optkit.errors import RequestError
from optkit.value import valueclass


@valueclass(frozen=True)
class NodeLayout:
    """Where the ranks of one plan run."""

    kind: str  # the fact parallel.layout: single-node, dp-across-nodes or tp-across-nodes
    nodes: int
    node_devices: int  # devices each node runs: TP × DP / nodes
    dp_local: int  # DP ranks each node runs (1 when a TP group spans nodes)
    placement: str  # what one node runs, e.g. "8 DP ranks of TP2 per node" ('' on one node)
    summary: str  # e.g. "TP2 DP16 on 2 nodes (8 DP ranks of TP2 per node)"


def _group(tp: int, pcp: int, pp: int = 1) -> str:
    """One DP rank's group as the messages name it: ``TP 8``, ``TP 8 × PCP 2``, ``TP 16 × PP 2``."""
    return f"TP {tp}" + (f" × PCP {pcp}" if pcp > 1 else "") + (f" × PP {pp}" if pp > 1 else "")


def _group_kind(pcp: int, pp: int) -> str:
    """The group's kind as the messages name it: ``TP``, ``TP × PCP``, ``TP × PP``."""
    return "TP" + (" × PCP" if pcp > 1 else "") + (" × PP" if pp > 1 else "")


def layout_problem(tp: int, dp: int, nodes: int, per_node: int, pcp: int = 1, pp: int = 1) -> str:
    """Why TP × PCP × PP × DP cannot run on ``nodes`` nodes of ``per_node`` devices ('' when it can). A DP rank's
    group is its TP × PCP × PP ranks (prefill context and pipeline parallelism add ranks: vLLM's world size is
    PP × TP × PCP, vllm/config/parallel.py:776-780 in 0.23.0)."""
    group, world = tp * pcp * pp, tp * pcp * pp * dp
    kind = _group_kind(pcp, pp)
    if world % nodes:
        return f"the {world} ranks ({kind} × DP) do not split evenly over {nodes} nodes"
    if world // nodes > per_node:
        return f"each node would run {world // nodes} devices, but a node has {per_node}"
    if group <= per_node and dp % nodes:
        return (f"DP {dp} does not split evenly over {nodes} nodes, so a {kind} group would "
                f"span nodes although {_group(tp, pcp, pp)} fits one")
    if group > per_node and dp > 1:
        return (f"{_group(tp, pcp, pp)} does not fit one node, and a {kind} group spanning "
                "nodes is planned with DP 1 only "
                "(vLLM would infer each node's DP rank from its node rank; no vllm-ascend release documents it)")
    if group > per_node and pp > 1 and nodes % pp and pp % nodes:
        return f"its {pp} pipeline stages do not split evenly over {nodes} nodes"
    return ""


def layout_of(tp: int, dp: int, nodes: int, pcp: int = 1, pp: int = 1) -> NodeLayout:
    """The layout of TP × PCP × PP × DP on ``nodes`` nodes (for which ``layout_problem`` is empty)."""
    name = f"TP{tp}" + (f" PCP{pcp}" if pcp > 1 else "") + (f" PP{pp}" if pp > 1 else "")
    node_devices = tp * pcp * pp * dp // nodes
    if nodes == 1:
        return NodeLayout("single-node", 1, node_devices, dp, "", f"{name} DP{dp}")
    if dp % nodes == 0:
        local = dp // nodes
        placement = f"{local} DP rank{'s' if local > 1 else ''} of {name} per node"
        kind = "dp-across-nodes"
    elif pp > 1:
        local, kind = 1, "pp-across-nodes"
        stages = pp // nodes if pp >= nodes else 0
        placement = (f"the pipeline's {pp} stages span the nodes, {stages} stage{'s' if stages > 1 else ''} of "
                     f"{tp * pcp} ranks per node" if stages else
                     f"the {_group_kind(pcp, pp)} group spans the nodes, {node_devices} of its ranks per node")
    else:
        local, kind = 1, "tp-across-nodes"
        placement = f"the {_group_kind(pcp, pp)} group spans the nodes, {node_devices} of its ranks per node"
    return NodeLayout(kind, nodes, node_devices, local, placement, f"{name} DP{dp} on {nodes} nodes ({placement})")


def allowed_nodes(tp: int, dp: int, per_node: int, pcp: int = 1, pp: int = 1) -> list[int]:
    """Every node count TP × PCP × PP × DP can run on."""
    return [n for n in range(1, tp * pcp * pp * dp + 1) if not layout_problem(tp, dp, n, per_node, pcp, pp)]


def node_layout(request, target) -> NodeLayout:
    """The layout of ``request`` (an ``optkit.resolve.request.Request``) on ``target``, or a
    RequestError naming the flags and the node counts that would work."""
    tp, dp, pcp, pp, per_node = request.tp, request.dp, request.pcp or 1, request.pp or 1, target.devices_per_node
    nodes = request.nodes or ceil(tp * pcp * pp * dp / per_node)
    problem = layout_problem(tp, dp, nodes, per_node, pcp, pp)
    if not problem:
        return layout_of(tp, dp, nodes, pcp, pp)
    given = f"--nodes {nodes}" if request.nodes else f"{nodes} node{'s' if nodes > 1 else ''} (the fewest that hold them)"
    allowed = allowed_nodes(tp, dp, per_node, pcp, pp)
    if allowed:
        way_out = f"{_group(tp, pcp, pp)} × DP {dp} runs on " + ", ".join(
            f"--nodes {n} ({layout_of(tp, dp, n, pcp, pp).placement or 'one node'})" for n in allowed[:4])
    else:  # only a group spanning nodes with DP > 1 has no node count at all
        way_out = f"use --dp 1 with --tp {tp}, or a TP of at most {per_node} with the DP ranks across nodes"
    flags = (f"--tp {tp}" + (f" × --pcp {pcp}" if pcp > 1 else "") + (f" × --pp {pp}" if pp > 1 else "")
             + f" × --dp {dp}")
    raise RequestError(f"{flags} on {given} of {target.id} ({per_node} devices each): {problem}; {way_out}")


__all__ = ["NodeLayout", "node_layout", "layout_of", "layout_problem", "allowed_nodes"]
