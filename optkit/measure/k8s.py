"""k8s/ladder-job.yaml (with ``optkit ladder --k8s``): the ladder as a Kubernetes Indexed Job.

One completion index per step, all in parallel, each pod on its own NPU node (required pod
anti-affinity on the node's host name, so no two steps share a node or disturb each other's
numbers); a pod runs ``run-ladder.sh --only INDEX`` (every repeat of that step) against the
vllm-ascend tree of its own container and writes results to the shared volume, where
``optkit report`` reads them. Per-index retries are off (``backoffLimitPerIndex: 0``): a failed
step fails alone and a second Job run resumes it. The manifest's shape is
``templates/ladder/ladder-job.yaml.j2``; every value passes through the ``yaml`` filter.
"""

from __future__ import annotations

from typing import Any

from optkit import __version__
from optkit.bundle.k8s import K8sOptions, device_resource
from optkit.bundle.launch import served_checkpoint

TREE = "/vllm-workspace/vllm-ascend"
"""Where vllm-ascend's images keep the (editable) source tree."""
SHARED = "/shared"
"""The shared volume: the ladder in ladder/, results in results/."""


def ladder_job_data(plan, data: dict) -> dict[str, Any]:
    """What ``templates/ladder/ladder-job.yaml.j2`` is given."""
    name = "optkit-ladder-" + plan.model.id.replace(".", "-").replace("_", "-")
    return {
        "version": __version__, "name": name, "steps": len(data["steps"]),
        "image": "vllm-ascend:v{}".format(data["versions"]["vllm_ascend"]),
        "model": served_checkpoint(plan) or "MODEL", "tree": TREE, "shared": SHARED,
        "resource": device_resource(K8sOptions().device_plugin, plan.target.device_generation), "devices": plan.layout.nodes * plan.layout.node_devices,
    }


__all__ = ["ladder_job_data"]
