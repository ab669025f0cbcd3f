"""Where the instances of a prefill/decode-disaggregated plan (``--pd P:D``) run.

A PD plan is P prefill and D decode instances of the same server: each instance is the request's
TP × DP (its own DP group, as vllm-ascend's PD tutorials run one ``vllm serve`` per instance), and
the instances are joined by the release's Mooncake connector (``optkit.bundle.pd``). How P:D maps
onto nodes and NPUs:

- every instance runs on one node, on TP × DP devices of its own; an instance larger than a node
  is refused (vllm-ascend's multi-node PD tutorial spreads one decode DP group over two nodes with
  its external-DP launcher, one ``vllm serve`` per DP rank: a different shape, not planned here);
- the instances are packed onto nodes in order, prefill first, each on the next free devices
  (the single-node tutorial runs 1P1D on one server: the prefiller on device 0, the decoder on
  device 1, pd_disaggregation_mooncake_single_node.md); a node holds ``devices // (TP × DP)``
  instances, and the node count follows (``--nodes`` counts the nodes of one server and is refused).

Several instances with DP > 1 on one node do not share DP ports: with every DP engine local, vLLM
0.23.0 hands its engines off over an IPC path, not the DP RPC port (vllm/v1/engine/utils.py,
``handshake_local_only``), and picks the DP master ports free (vllm/config/parallel.py,
``get_open_ports_list``). Read in vLLM's source, not run here.
"""

from __future__ import annotations

from math import ceil

from optkit.errors import RequestError
from optkit.value import valueclass

ROLES = ("prefill", "decode")


@valueclass(frozen=True)
class Instance:
    """One ``vllm serve`` of a PD plan."""

    role: str  # prefill or decode
    index: int  # its number within its role (serve.sh --instance)
    rank: int  # its number over the whole plan, prefill first
    node: int  # the node it runs on
    devices: tuple[int, ...]  # device ids on that node (ASCEND_RT_VISIBLE_DEVICES)


@valueclass(frozen=True)
class PDLayout:
    """The instances of a PD plan and the nodes they take."""

    prefill: int
    decode: int
    instance_devices: int  # TP × DP
    nodes: int
    instances: tuple[Instance, ...]

    def of(self, role: str) -> list[Instance]:
        return [i for i in self.instances if i.role == role]

    @property
    def summary(self) -> str:
        where = "one node" if self.nodes == 1 else f"{self.nodes} nodes"
        return f"{self.prefill}P{self.decode}D: {self.prefill + self.decode} instances of {self.instance_devices} devices on {where}"


def pd_layout(request, target) -> PDLayout | None:
    """The PD layout of ``request`` on ``target`` (None without ``--pd``), or a RequestError naming
    the flag and what would fix it."""
    counts = request.pd_instances
    if counts is None:
        return None
    prefill, decode = counts
    per_node, width = target.devices_per_node, request.tp * request.dp
    if request.nodes is not None:
        raise RequestError(f"--nodes {request.nodes} with --pd {request.pd}: --nodes places the ranks of one server; a PD "
                           "plan's nodes follow from its instances (each on one node, packed in order): drop --nodes")
    if width > per_node:
        raise RequestError(
            f"--pd {request.pd} with --tp {request.tp} × --dp {request.dp}: one instance needs {width} devices, but a "
            f"{target.id} node has {per_node}, and a PD instance runs on one node (instances spanning nodes are not "
            f"planned); lower --tp or --dp so that TP × DP ≤ {per_node}")
    slots = per_node // width
    instances = []
    for rank in range(prefill + decode):
        role, index = ("prefill", rank) if rank < prefill else ("decode", rank - prefill)
        first = (rank % slots) * width
        instances.append(Instance(role, index, rank, rank // slots, tuple(range(first, first + width))))
    return PDLayout(prefill, decode, width, ceil((prefill + decode) / slots), tuple(instances))


__all__ = ["Instance", "PDLayout", "pd_layout", "ROLES"]
