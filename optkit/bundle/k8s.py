"""k8s/deployment.yaml (with ``--k8s``): one Deployment running the bundle's serve command.

The manifest's shape is ``templates/k8s/deployment.yaml.j2``; every value in it passes through
the ``yaml`` filter (``optkit.bundle.render``), so each is one YAML scalar of its own.
"""

from __future__ import annotations

from typing import Any

from optkit import __version__
from optkit.bundle.launch import Launch

DEVICE_RESOURCE = {"A3": "huawei.com/ascend-1980", "A2": "huawei.com/Ascend910"}
"""Ascend device-plugin resource name per device generation."""


def deployment_data(launch: Launch, lock: dict) -> dict[str, Any]:
    """What ``templates/k8s/deployment.yaml.j2`` is given: the serve argv with serve.sh's defaults
    filled in (the container runs ``vllm serve`` itself), the env, the devices to request."""
    plan, params = launch.plan, launch.parameters
    args = [params["MODEL"] or "MODEL"] + launch.argv[3:]
    args = [{"$SERVED_NAME": params["SERVED_NAME"], "$PORT": params["PORT"]}.get(t, t) for t in args]
    return {
        "version": __version__, "name": "vllm-" + plan.model.id.replace(".", "-").replace("_", "-"),
        "args": args, "env": [{"name": e["name"], "value": e["value"]} for e in launch.env],
        "image": "vllm-ascend:v{}".format(plan.facts["versions.vllm_ascend"]), "port": int(params["PORT"]),
        "resource": DEVICE_RESOURCE[plan.target.device_generation], "devices": launch.devices,
    }
