"""k8s/ (with ``--k8s``): a Deployment running the bundle's serve command, and a Service in front.

The manifests' shape is ``templates/k8s/*.yaml.j2``; every value in them passes through the
``yaml`` filter (``optkit.bundle.render``), so each is one YAML scalar of its own. The tests
validate both against the Kubernetes schema of ``KUBERNETES_VERSION`` (``tests/k8s_support.py``).

What a 910C pod needs to start, and where each choice comes from:

- the NPUs, as the device plugin names them (``DEVICE_RESOURCES``);
- the weights: a PersistentVolumeClaim mounted as the Hugging Face cache (``HF_HOME``; vllm-ascend's
  own A3 Kubernetes example mounts the cache the same way), so ``vllm serve <repo id>`` finds them;
- ``/dev/shm`` in memory, sized for the TP group (``SHM_GIB_PER_DEVICE`` per device; vllm-ascend's
  A3 example gives a 16-device pod 15Gi, ~1 GiB each, which we double for headroom);
- a startup probe long enough for graph capture, and for static-kernel compilation when the plan
  compiles static kernels ("several minutes to tens of minutes", vllm-ascend 0.23.0
  docs/source/user_guide/feature_guide/graph_mode.md:183).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optkit import __version__
from optkit.bundle.launch import Launch

KUBERNETES_VERSION = "1.33"
"""The Kubernetes API version the manifests are written for and validated against."""
DEVICE_RESOURCES = {
    "mindcluster": {"A3": "huawei.com/Ascend910", "A2": "huawei.com/Ascend910"},
    "cce": {"A3": "huawei.com/ascend-1980", "A2": "huawei.com/ascend-1980"},
}
"""Extended-resource name of the NPUs per device plugin and generation. vllm-ascend 0.23.0
docs/source/user_guide/deployment_guide/using_volcano_kthena.md:36-40: Huawei's Ascend Device Plugin
(MindCluster) registers ``huawei.com/Ascend910`` for the 910 series, A3 included; the CCE AI Suite
plugin on Huawei Cloud registers ``huawei.com/ascend-1980``, which vllm-ascend's own A3 multi-node
CI requests (docs/source/developer_guide/contribution/multi_node_test.md:171)."""
DEVICE_PLUGINS = tuple(DEVICE_RESOURCES)
SHM_GIB_PER_DEVICE = 2
WEIGHTS_MOUNT = "/var/cache/huggingface"
"""Where the weights volume is mounted; HF_HOME points there."""
STARTUP_MINUTES = {"graph-capture": 20, "static-kernel": 60}
"""How long the startup probe waits: weight loading and graph capture, or those plus
static-kernel compilation (a plan that selects waterfall-static-kernel)."""
PROBE_PERIOD_SECONDS = 10


@dataclass(frozen=True)
class K8sOptions:
    """What ``--k8s`` writes: how many replicas, and which device plugin names the NPUs."""

    replicas: int = 1
    device_plugin: str = "mindcluster"

    def data(self) -> dict[str, Any]:
        return {"replicas": self.replicas, "device_plugin": self.device_plugin}


def _options(lock: dict) -> K8sOptions:
    return K8sOptions(**lock["bundle"].get("k8s_options", {}))


def _name(launch: Launch) -> str:
    return "vllm-" + launch.plan.model.id.replace(".", "-").replace("_", "-")


def deployment_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/k8s/deployment.yaml.j2`` is given: the serve argv with serve.sh's defaults
    filled in (the container runs ``vllm serve`` itself), the env, the devices, volumes and probes."""
    plan, params, options = launch.plan, launch.parameters, _options(lock)
    args = [params["MODEL"] or "MODEL"] + launch.argv[3:]
    args = [{"$SERVED_NAME": params["SERVED_NAME"], "$PORT": params["PORT"]}.get(t, t) for t in args]
    phase = "static-kernel" if "waterfall-static-kernel" in plan.selected else "graph-capture"
    return {
        "version": __version__, "name": _name(launch), "replicas": options.replicas, "kubernetes": "v" + KUBERNETES_VERSION,
        "args": args, "env": [{"name": e["name"], "value": e["value"]} for e in launch.env] + [
            {"name": "HF_HOME", "value": WEIGHTS_MOUNT}],  # where vllm serve <repo id> looks for the weights
        "image": "vllm-ascend:v{}".format(plan.facts["versions.vllm_ascend"]), "port": int(params["PORT"]),
        "resource": DEVICE_RESOURCES[options.device_plugin][plan.target.device_generation], "devices": launch.devices,
        "shm": f"{SHM_GIB_PER_DEVICE * launch.devices}Gi", "weights_claim": _name(launch) + "-weights",
        "period": PROBE_PERIOD_SECONDS, "startup_failures": STARTUP_MINUTES[phase] * 60 // PROBE_PERIOD_SECONDS,
        "startup_minutes": STARTUP_MINUTES[phase], "startup_phase": phase,
    }


def service_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/k8s/service.yaml.j2`` is given: one Service over every replica's pod."""
    return {"version": __version__, "name": _name(launch), "port": int(launch.parameters["PORT"])}
