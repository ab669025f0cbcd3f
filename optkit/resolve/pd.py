"""Where the instances of a prefill/decode-disaggregated plan (``--pd P:D``) run.

A PD plan is P prefill and D decode instances of the same server: each instance is the request's
TP × DP (its own DP group, as vllm-ascend's PD tutorials run one ``vllm serve`` per instance), and
the instances are joined by the release's Mooncake connector (``optkit.bundle.pd``). How P:D maps
onto nodes and NPUs:

- an instance that fits a node runs on one node, on TP × DP devices of its own; the instances are packed
  onto nodes in order, prefill first, each on the next free devices (the single-node tutorial runs 1P1D on
  one server: the prefiller on device 0, the decoder on device 1, pd_disaggregation_mooncake_single_node.md);
  a node holds ``devices // (TP × DP)`` instances, and the node count follows (``--nodes`` counts the nodes
  of one server and is refused);
- an instance larger than a node spans whole nodes with its DP ranks across them, TP within each node (the
  ``dp-across-nodes`` layout of ``optkit.resolve.layout``): vllm-ascend's PD tutorials run decoders of TP 1 ×
  DP 32 over two A3 nodes (Kimi-K2.5.md, DeepSeek-V3.1.md), TP 4 × DP 8 (Qwen3-235B-A22B.md, GLM5.md); each
  node of such an instance runs one ``vllm serve`` with its local DP ranks, the first node's serving the API
  and the others headless, as a multi-node server's do (``optkit.bundle.launch``). Such instances take their
  own nodes, one after another. A TP group spanning nodes is refused, as for one server;
- a prefiller of ``--prefill-pp`` runs TP × PP × DP devices, its pipeline's stages across whole nodes where they
  do not fit one (``pp-across-nodes``: GLM5.md's A3 prefiller of TP 16 × PP 2 on two nodes, 0.30.0rc2); the
  decoders run PP 1 (vllm-ascend 0.30.0rc2 pipeline_parallel.md:307, :431).

Several instances with DP > 1 on one node do not share DP ports: with every DP engine local, vLLM
0.23.0 hands its engines off over an IPC path, not the DP RPC port (vllm/v1/engine/utils.py,
``handshake_local_only``), and picks the DP master ports free (vllm/config/parallel.py,
``get_open_ports_list``). Read in vLLM's source, not run here.
"""

from __future__ import annotations

from math import ceil

from optkit.errors import RequestError
from optkit.resolve.layout import layout_of, layout_problem
from optkit.value import valueclass

ROLES = ("prefill", "decode")


@valueclass(frozen=True)
class Instance:
    """One ``vllm serve`` of a PD plan."""

    role: str  # prefill or decode
    index: int  # its number within its role (serve.sh --instance)
    rank: int  # its number over the whole plan, prefill first
    node: int  # the node it runs on (its first, which serves the API, when it spans several)
    devices: tuple[int, ...]  # device ids on that node (ASCEND_RT_VISIBLE_DEVICES; on each of its nodes)
    nodes: tuple[int, ...] = ()  # every node it runs on, its leader first (one node: (node,))


@valueclass(frozen=True)
class PDLayout:
    """The instances of a PD plan and the nodes they take."""

    prefill: int
    decode: int
    nodes: int
    instances: tuple[Instance, ...]
    shapes: tuple  # (role, tp, dp, devices, nodes spanned, pp) per role, prefill first

    def of(self, role: str) -> list[Instance]:
        return [i for i in self.instances if i.role == role]

    def shape(self, role: str) -> tuple[int, int]:
        """(TP, DP) of the role's instances."""
        return next((tp, dp) for name, tp, dp, _, _, _ in self.shapes if name == role)

    def pipeline(self, role: str) -> int:
        """The pipeline-parallel size of the role's instances (1 but for a prefiller of ``--prefill-pp``)."""
        return next(pp for name, _, _, _, _, pp in self.shapes if name == role)

    def width(self, role: str) -> int:
        """The devices of one instance of the role."""
        return next(devices for name, _, _, devices, _, _ in self.shapes if name == role)

    def span(self, role: str) -> int:
        """The nodes one instance of the role spans (1: it fits one node)."""
        return next(span for name, _, _, _, span, _ in self.shapes if name == role)

    @property
    def instance_devices(self) -> int:
        """TP × DP of a decode instance (of every instance, without --prefill-tp / --prefill-dp)."""
        return self.width("decode")

    @property
    def instance_nodes(self) -> int:
        """The nodes one decode instance spans (1: it fits one node)."""
        return self.span("decode")

    @property
    def asymmetric(self) -> bool:
        return len({(tp, dp, pp) for _, tp, dp, _, _, pp in self.shapes}) > 1

    @property
    def summary(self) -> str:
        where = "one node" if self.nodes == 1 else f"{self.nodes} nodes"
        if self.asymmetric:
            parts = [f"{count}{role[0].upper()} of TP{tp}" + (f" PP{pp}" if pp > 1 else "") + f" DP{dp}"
                     + (f" ({span} nodes each)" if span > 1 else "")
                     for (role, tp, dp, _, span, pp), count in zip(self.shapes, (self.prefill, self.decode))]
            return f"{self.prefill}P{self.decode}D: {', '.join(parts)} on {where}"
        spans = f" ({self.instance_nodes} nodes each)" if self.instance_nodes > 1 else ""
        return (f"{self.prefill}P{self.decode}D: {self.prefill + self.decode} instances of {self.instance_devices} "
                f"devices{spans} on {where}")


def pd_layout(request, target) -> PDLayout | None:
    """The PD layout of ``request`` on ``target`` (None without ``--pd``), or a RequestError naming
    the flag and what would fix it."""
    counts = request.pd_instances
    if counts is None:
        given = [n for n in ("tp", "dp", "pp", "dcp") if getattr(request, f"prefill_{n}") is not None]
        if given:
            flag = f"--prefill-{given[0]}"
            raise RequestError(f"{flag} without --pd: it sizes the prefill instances of a prefill/decode-disaggregated "
                               "plan; give --pd P:D, or use --tp / --dp for one server")
        return None
    prefill, decode = counts
    per_node = target.devices_per_node
    if request.nodes is not None:
        raise RequestError(f"--nodes {request.nodes} with --pd {request.pd}: --nodes places the ranks of one server; "
                           "a PD plan's nodes follow from its instances (packed onto nodes in order; an instance larger "
                           "than a node takes whole nodes of its own): drop --nodes")
    shapes = []
    pipelines = {"prefill": request.prefill_pp or 1, "decode": 1}  # decoders run PP 1 (optkit.resolve.pipeline)
    for role, (tp, dp) in (("prefill", request.prefill_shape), ("decode", (request.tp, request.dp))):
        pp = pipelines[role]
        shapes.append((role, tp, dp, tp * dp * pp, _span(request, target, role, tp, dp, pp), pp))
    instances, node, used = [], 0, 0
    for rank in range(prefill + decode):
        role, index = ("prefill", rank) if rank < prefill else ("decode", rank - prefill)
        _, _, _, width, span, _ = shapes[0 if role == "prefill" else 1]
        if span > 1:  # whole nodes of its own
            node, used = node + (used > 0), 0
            nodes = tuple(range(node, node + span))
            instances.append(Instance(role, index, rank, node, tuple(range(per_node)), nodes))
            node += span
            continue
        if used + width > per_node:
            node, used = node + 1, 0
        instances.append(Instance(role, index, rank, node, tuple(range(used, used + width)), (node,)))
        used += width
    return PDLayout(prefill, decode, node + (used > 0), tuple(instances), tuple(shapes))


def _span(request, target, role: str, tp: int, dp: int, pp: int = 1) -> int:
    """The nodes one instance of ``role`` (TP × PP × DP) spans, or a RequestError: DP ranks across whole nodes, or a
    prefiller's pipeline stages across them (the ``pp-across-nodes`` layout: GLM5.md's PD prefiller, one TP 16 stage
    per A3 node), only."""
    per_node, width = target.devices_per_node, tp * dp * pp
    if width <= per_node:
        return 1
    span = ceil(width / per_node)
    problem = layout_problem(tp, dp, span, per_node, pp=pp)
    if problem or layout_of(tp, dp, span, pp=pp).kind not in ("dp-across-nodes", "pp-across-nodes"):
        own = role == "prefill" and request.asymmetric_pd
        shown = (f"--prefill-tp {tp} × --prefill-dp {dp}" + (f" × --prefill-pp {pp}" if pp > 1 else "")
                 if own else f"--tp {tp} × --dp {dp}")
        raise RequestError(
            f"--pd {request.pd} with {shown}: one {role + ' ' if request.asymmetric_pd else ''}instance needs "
            f"{width} devices, more than a {target.id} node's {per_node}, and it cannot span {span} nodes: "
            f"{problem or 'its TP group would span nodes'} (an instance spans nodes with its DP ranks across "
            f"them, TP {tp} within each node); lower --tp or --dp so that TP × DP ≤ {per_node}, or give a "
            f"DP that splits evenly over whole nodes")
    return span


__all__ = ["Instance", "PDLayout", "pd_layout", "ROLES"]
