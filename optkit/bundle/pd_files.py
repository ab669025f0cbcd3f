"""The files of a PD bundle (``optkit.bundle.pd``): which ones, and what each template is given.
``pd_bundle_texts`` is the PD branch of ``optkit.bundle.writer.bundle_files``."""

from __future__ import annotations

from optkit import __version__
from optkit.bundle import BundleWriteError, scripts
from optkit.bundle.k8s import K8sOptions, LAUNCH_MOUNT, _name, _pod_data
from optkit.bundle.lock import lock_data
from optkit.bundle.pd import lock_view, proxy_data, role_launches, role_preflight_data, role_readme_data, role_serve_data
from optkit.bundle.readme import expected_data, readme_data
from optkit.bundle.render import render
from optkit.resolve.pd import ROLES
from optkit.resolve.plan import Plan, Workspace
from optkit.resolve.report import dump_json
from optkit.tree.patchset import LOCK_NAME

IMAGE_TREE = "/vllm-workspace/vllm-ascend"
"""Where the vllm-ascend images install the tree from source (Dockerfile: ``COPY . /vllm-workspace/vllm-ascend/``,
0.23.0 line 63, 0.30.0rc2 line 100): the proxy pod runs the tutorial's proxy from there."""
ROLE_FILES = {"serve.sh": ("pd/serve.sh.j2", role_serve_data), "env.sh": ("env.sh.j2", scripts.env_data),
              "preflight.sh": ("preflight.sh.j2", role_preflight_data), "README.md": ("pd/README.md.j2", role_readme_data)}
"""Each role directory's files: the template and the function ``(role launch, role's lock view) -> data``."""


def pd_bundle_texts(plan: Plan, workspace: Workspace, options: K8sOptions | None) -> tuple[dict[str, str], dict]:
    """Every text file of the PD bundle of ``plan`` by relative path, and its lock."""
    roles = role_launches(plan, workspace)
    decode = roles["decode"]
    lock = lock_data(plan, workspace, decode, k8s=options)
    texts = {LOCK_NAME: dump_json(lock), "expected.json": dump_json(expected_data(plan, workspace)),
             "patches/series": "".join(p["name"] + "\n" for p in lock["patches"]),
             "apply.sh": render("apply.sh.j2", **scripts.apply_data(decode, lock)),
             "bench.sh": render("bench.sh.j2", **{**scripts.bench_data(decode, lock), "port": lock["launch"]["pd"]["proxy"]["port"],
                                                  "target": "./proxy.sh"}),
             "README.md": render("README.md.j2", **readme_data(decode, lock)),
             "proxy.sh": render("pd/proxy.sh.j2", **proxy_data(roles, lock))}
    if decode.kernels:
        texts["build-kernels.sh"] = render("build-kernels.sh.j2", **scripts.build_kernels_data(decode, lock))
    for role, launch in roles.items():
        view = lock_view(lock, role)
        texts.update({f"{role}/{name}": render(template, **data(launch, view)) for name, (template, data) in ROLE_FILES.items()})
    if options:
        texts.update(k8s_texts(roles, lock, texts))
    return texts, lock


def k8s_texts(roles, lock: dict, texts: dict[str, str]) -> dict[str, str]:
    """k8s/: a StatefulSet and headless Service per role, the proxy, the ConfigMap of their scripts."""
    decode = roles["decode"]
    pd = decode.plan.pd
    spanning = [role for role in ROLES if pd.span(role) > 1]
    if spanning:
        tp, dp = pd.shape(spanning[0])
        raise BundleWriteError(
            f"--k8s with --pd {decode.plan.request.pd}: each {spanning[0]} instance (TP {tp} × DP {dp}) spans "
            f"{pd.span(spanning[0])} nodes, and the PD manifests run one pod per instance (a StatefulSet per role); "
            "write the bundle without --k8s and start each instance's nodes with its serve.sh --instance I "
            "--node-rank R, or give each instance at most one node's devices")
    name = _name(decode)
    launched = [f"{role}/{f}" for role in ROLES for f in ("serve.sh", "env.sh")] + ["proxy.sh"]
    files = [(path.replace("/", "-"), path) for path in launched]
    configmap = name + "-launch"
    out = {"k8s/configmap.yaml": render("k8s/pd-configmap.yaml.j2", version=__version__,
                                        name=configmap, app=name, files={key: texts[path] for key, path in files})}
    hosts = {}
    for role, launch in roles.items():
        pod = _pod_data(launch, lock)
        service = f"{name}-{role}"
        hosts[role] = ",".join(f"{service}-{i.index}.{service}" for i in launch.instances)
        out[f"k8s/{role}.yaml"] = render("k8s/pd-role.yaml.j2", **{
            **pod, "name": service, "app": name, "role": role, "shape": decode.plan.pd.summary,
            "replicas": len(launch.instances), "port": launch.port(launch.instances[0]), "launch_configmap": configmap,
            "launch_mount": LAUNCH_MOUNT, "command": ["bash", f"{LAUNCH_MOUNT}/{role}/serve.sh"],
            "files": [(key, path) for key, path in files if path.startswith(role + "/")]})
    release = decode.release
    out["k8s/proxy.yaml"] = render("k8s/pd-proxy.yaml.j2", **{
        **_pod_data(decode, lock), "name": f"{name}-proxy", "app": name, "shape": decode.plan.pd.summary,
        "script": release.proxy_script, "tree": IMAGE_TREE, "port": release.proxy_port, "launch_configmap": configmap,
        "launch_mount": LAUNCH_MOUNT, "prefill_port": roles["prefill"].port(roles["prefill"].instances[0]),
        "decode_port": decode.port(decode.instances[0]),
        "command": ["bash", f"{LAUNCH_MOUNT}/proxy.sh", "--tree", IMAGE_TREE, "--port", str(release.proxy_port),
                    "--prefill-hosts", hosts["prefill"], "--decode-hosts", hosts["decode"]]})
    return out


__all__ = ["pd_bundle_texts"]
