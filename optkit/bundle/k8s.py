"""k8s/ (with ``--k8s``): a Deployment running the bundle's serve command, and a Service in front;
for a plan on several nodes a LeaderWorkerSet instead, whose pods run the bundle's own serve.sh.

The manifests' shape is ``templates/k8s/*.yaml.j2``; every value in them passes through the
``yaml`` filter (``optkit.bundle.render``), so each is one YAML scalar of its own. The tests
validate every manifest against the Kubernetes schema of ``KUBERNETES_VERSION``, and the
LeaderWorkerSet against the CRD schema of ``LWS_API_VERSION`` (``tests/k8s_support.py``).

A multi-node plan (``optkit.resolve.layout``) becomes one LeaderWorkerSet group per replica: size =
the plan's nodes, the leader (worker index 0) serves the API, the workers join it headless. Each
pod runs serve.sh and env.sh from the ConfigMap ``<name>-launch`` (the bundle's files, byte for
byte), which read the node's role from the variables LeaderWorkerSet sets in every pod
(``LWS_WORKER_INDEX``, ``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE``: lws.sigs.k8s.io, reference
"Labels, Annotations and Environment Variables") and the pod's IP from the downward API
(``LOCAL_IP`` ← ``status.podIP``). The Service ``<name>-leader`` selects the leaders only; the
headless Service named after the LeaderWorkerSet is LWS's own (it gives the pods their DNS names).

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
from optkit.errors import BundleError

KUBERNETES_VERSION = "1.33"
"""The Kubernetes API version the manifests are written for and validated against."""
LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
"""The LeaderWorkerSet API the multi-node manifest is written for (its CRD schema: tests/fixtures/k8s/)."""
LAUNCH_MOUNT = "/opt/optkit"
"""Where a LeaderWorkerSet pod mounts the bundle's serve.sh and env.sh (the ConfigMap)."""
RESTART_POLICY = "RecreateGroupOnPodRestart"
"""A pod that restarts takes its whole group with it: the vLLM ranks of a group cannot rejoin one by one."""
STARTUP_POLICY = "LeaderCreated"
"""Workers start once the leader pod exists, not once it is ready: the leader only answers /health after
the workers have joined (LeaderReady would wait forever)."""
DEVICE_RESOURCES = {
    "mindcluster": {"A3": "huawei.com/Ascend910", "A2": "huawei.com/Ascend910", "310P": "huawei.com/Ascend310P"},
    "cce": {"A3": "huawei.com/ascend-1980", "A2": "huawei.com/ascend-1980", "310P": "huawei.com/ascend-310",
            "A5": "huawei.com/npu"},
}
"""Extended-resource name of the NPUs per device plugin and generation. vllm-ascend 0.23.0
docs/source/user_guide/deployment_guide/using_volcano_kthena.md:36-40: Huawei's Ascend Device Plugin
(MindCluster) registers ``huawei.com/Ascend910`` for the 910 series, A3 included, and
``huawei.com/Ascend310P`` for the 310P (Atlas 300I DUO; MindCluster 7.0.RC1's resource-name table,
https://www.hiascend.com/doc_center/source/zh/mindcluster/70rc1/clustersched/dlug/mxdlug_appendices_014.html,
agrees); the CCE AI Suite
plugin on Huawei Cloud registers ``huawei.com/ascend-1980``, which vllm-ascend's own A3 multi-node
CI requests (docs/source/developer_guide/contribution/multi_node_test.md:171), and ``huawei.com/ascend-310``
for the 310 series. A5 (950): the same CI asks for ``huawei.com/npu`` on its A5 runners in place of
ascend-1980 (0.30.0rc2 .github/workflows/_e2e_nightly_multi_node.yaml:272-274 and
tests/e2e/common/multi_node/lws.yaml.jinja2:97); no public source names MindCluster's A5 resource,
so that pair is absent and ``device_resource`` says so."""
DEVICE_PLUGINS = tuple(DEVICE_RESOURCES)


def device_resource(device_plugin: str, generation: str) -> str:
    """The extended-resource name ``device_plugin`` gives ``generation``'s NPUs; ``BundleError`` when optkit
    knows none (MindCluster on A5)."""
    names = DEVICE_RESOURCES[device_plugin]
    if generation not in names:
        known = [plugin for plugin, by_generation in DEVICE_RESOURCES.items() if generation in by_generation]
        raise BundleError([f"--k8s-device-plugin {device_plugin}: no public source names its resource for "
                           f"{generation} NPUs; use --k8s-device-plugin {' or '.join(known)}"])
    return names[generation]


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


def _pod_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What a 910C pod needs, in the Deployment and in both LeaderWorkerSet templates: the devices of
    one node, the weights volume, /dev/shm, the image and the probes."""
    plan, options = launch.plan, _options(lock)
    phase = "static-kernel" if "waterfall-static-kernel" in plan.selected else "graph-capture"
    return {
        "version": __version__, "name": _name(launch), "replicas": options.replicas, "kubernetes": "v" + KUBERNETES_VERSION,
        "image": "vllm-ascend:v{}".format(plan.facts["versions.vllm_ascend"]), "port": int(launch.parameters["PORT"]),
        "resource": device_resource(options.device_plugin, plan.target.device_generation), "devices": launch.devices,
        "shm": f"{SHM_GIB_PER_DEVICE * launch.devices}Gi", "weights_claim": _name(launch) + "-weights",
        "weights_mount": WEIGHTS_MOUNT,
        "period": PROBE_PERIOD_SECONDS, "startup_failures": STARTUP_MINUTES[phase] * 60 // PROBE_PERIOD_SECONDS,
        "startup_minutes": STARTUP_MINUTES[phase], "startup_phase": phase,
    }


def deployment_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/k8s/deployment.yaml.j2`` is given: the serve argv with serve.sh's defaults
    filled in (the container runs ``vllm serve`` itself), the env, and what every 910C pod needs."""
    params = launch.parameters
    args = [params["MODEL"] or "MODEL"] + launch.argv[3:]
    args = [{"$SERVED_NAME": params["SERVED_NAME"], "$PORT": params["PORT"]}.get(t, t) for t in args]
    return {**_pod_data(launch, lock), "args": args,
            "env": [{"name": e["name"], "value": e["value"]} for e in launch.env] + [
                {"name": "HF_HOME", "value": WEIGHTS_MOUNT}]}  # where vllm serve <repo id> looks for the weights


def leaderworkerset_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/k8s/leaderworkerset.yaml.j2`` is given: one group of ``nodes`` pods per replica,
    each running the ConfigMap's serve.sh, and what every 910C pod needs."""
    name = _name(launch)
    return {**_pod_data(launch, lock), "api_version": LWS_API_VERSION, "size": launch.plan.layout.nodes,
            "layout": launch.plan.layout.summary, "restart_policy": RESTART_POLICY, "startup_policy": STARTUP_POLICY,
            "launch_configmap": name + "-launch", "launch_mount": LAUNCH_MOUNT,
            "command": ["bash", f"{LAUNCH_MOUNT}/serve.sh"]}


def configmap_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/k8s/configmap.yaml.j2`` is given: the bundle's serve.sh and env.sh, rendered
    as the bundle writes them (``optkit bundle check`` compares the two)."""
    from optkit.bundle.render import render
    from optkit.bundle.scripts import env_data, serve_data

    return {"version": __version__, "name": _name(launch) + "-launch", "app": _name(launch),
            "files": {"env.sh": render("env.sh.j2", **env_data(launch, lock)),
                      "serve.sh": render("serve.sh.j2", **serve_data(launch, lock))}}


def service_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/k8s/service.yaml.j2`` is given: one Service over every replica's pod, or over
    every group's leader (the pods that serve the API) on a multi-node plan."""
    name = _name(launch)
    if launch.plan.layout.nodes > 1:
        return {"version": __version__, "name": name + "-leader", "app": name, "port": int(launch.parameters["PORT"]),
                "what": "the leader of every LeaderWorkerSet group (its workers serve no API)",
                "selector": {"leaderworkerset.sigs.k8s.io/name": name, "role": "leader"}}
    return {"version": __version__, "name": name, "app": name, "port": int(launch.parameters["PORT"]),
            "what": "any ready replica", "selector": {"app": name}}
