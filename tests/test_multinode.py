"""Bundles of plans on several nodes: the argv and lock, serve.sh on each node (a recording `vllm` on
PATH), vLLM's parser on every node's argv, bundle check of the node parts, and the LeaderWorkerSet
manifests validated against the LWS CRD schema (tests/fixtures/k8s/) and Kubernetes 1.33. The layouts
themselves: tests/test_layout.py.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from argv_support import flag_value
from k8s_support import TRIMMED, lws_schema, trimmed_paths, validate_file, validate_manifest
from optkit.bundle.check import check_launch, check_vllm, probe_requests, read_lock, run_probe
from optkit.bundle.k8s import K8sOptions
from optkit.bundle.writer import write_bundle
from optkit.cli.main import cli
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WORKSPACE = load_workspace()
FLAGSHIP = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
TWO_NODES = {"tp": 2, "dp": 16}  # 8 DP ranks of TP2 on each of two 910C nodes
TP_ACROSS = {"tp": 16, "target": "910b"}  # one TP group over two 910B nodes (TP 32 on 910C: no model splits so)


def write(dest: Path, k8s=False, **fields) -> Path:
    write_bundle(plan(Request(**{**FLAGSHIP, **fields}), WORKSPACE), WORKSPACE, dest, k8s=k8s)
    return dest


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("two-nodes") / "bundle", k8s=True, **TWO_NODES)


@pytest.fixture(scope="module")
def tp_across(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("tp-across") / "bundle", k8s=True, **TP_ACROSS)


# --------------------------------------------------------------------------- the bundle: argv and lock


def test_every_node_runs_the_same_argv_with_its_own_values(two_nodes, tp_across):
    dp = read_lock(two_nodes)["launch"]
    assert dp["nodes"] == {"count": 2, "layout": "dp-across-nodes", "node_devices": 16, "dp_local": 8,
                           "worker_args": ["--headless", "--data-parallel-start-rank", "$DP_START_RANK"], "env": {"HCCL_IF_IP": "LOCAL_IP", "GLOO_SOCKET_IFNAME": "NIC_NAME",
                                                                  "TP_SOCKET_IFNAME": "NIC_NAME", "HCCL_SOCKET_IFNAME": "NIC_NAME"}}
    start = dp["argv"].index("--data-parallel-size-local")
    assert dp["argv"][start - 2:start + 6] == [
        "--data-parallel-size", "16", "--data-parallel-size-local", "8",
        "--data-parallel-address", "$LEADER_IP", "--data-parallel-rpc-port", "$RPC_PORT"]
    assert dp["parameters"]["RPC_PORT"] == "13389"
    tp = read_lock(tp_across)["launch"]
    start = tp["argv"].index("--distributed-executor-backend")
    assert tp["argv"][start:start + 10] == ["--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank",
                                            "$NODE_RANK", "--master-addr", "$LEADER_IP", "--master-port", "$RPC_PORT"]
    assert tp["parameters"]["RPC_PORT"] == "29501" and tp["nodes"]["layout"] == "tp-across-nodes"
    assert tp["nodes"]["worker_args"] == ["--headless"]


def test_a_single_node_lock_has_no_nodes(tmp_path):
    assert "nodes" not in read_lock(write(tmp_path / "b"))["launch"]


def test_probe_requests_give_each_node_its_values(two_nodes):
    leader, worker = probe_requests(read_lock(two_nodes))
    assert "--data-parallel-start-rank" not in leader["argv"] and "--headless" not in leader["argv"]
    assert worker["argv"][-3:] == ["--headless", "--data-parallel-start-rank", "8"]
    assert flag_value(worker["argv"], "--data-parallel-address") == "192.0.2.1"
    assert len(worker["labels"]) == len(worker["argv"])


def test_preflight_counts_the_devices_of_one_node(two_nodes):
    text = (two_nodes / "preflight.sh").read_text()
    assert "NEED_DEVICES=16\n" in text and "LAYOUT='TP2 DP16 on 2 nodes (8 DP ranks of TP2 per node)'" in text


def test_from_lock_reproduces_a_multi_node_bundle(two_nodes, tmp_path):
    result = CliRunner().invoke(cli, ["plan", "--from-lock", str(two_nodes / "optkit.lock.json"), "-o", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    for path in sorted(p for p in two_nodes.rglob("*") if p.is_file()):
        assert (tmp_path / "b" / path.relative_to(two_nodes)).read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize("args", [
    pytest.param(["plan", "qwen3.5-35b", "--tp", "2", "--dp", "16", "--k8s"], id="plan"),
    pytest.param(["plan", "qwen3.5-35b", "--k8s", "--replicas", "2"], id="plan-replicas"),
    pytest.param(["plan", "--from-lock", "{lock}", "--k8s"], id="from-lock"),
])
def test_k8s_without_an_output_is_a_usage_error(two_nodes, args):
    """--k8s writes into the bundle: without -o there is none, and the flag must not be dropped silently."""
    args = [str(two_nodes / "optkit.lock.json") if a == "{lock}" else a for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--k8s writes k8s/ into a bundle: give -o DIR too" in result.output, result.output


def test_the_plan_header_says_where_the_ranks_run():
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--mtp", "--tp", "2", "--dp", "16"])
    assert result.exit_code == 0, result.output
    assert "(TP2 DP16 on 2 nodes (8 DP ranks of TP2 per node), bfloat16" in result.output


# --------------------------------------------------------------------------- serve.sh on each node


RECORDER = """#!{python}
import json, os, sys
names = ["HCCL_IF_IP", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"]
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "env": {{n: os.environ.get(n) for n in names}}}}) + "\\n")
"""
NODE_ENV = ["HCCL_IF_IP", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"]


def serve(bundle: Path, tmp_path: Path, args: list[str], env: dict) -> tuple[int, list[dict], str]:
    """Run serve.sh with a `vllm` on PATH that records its argv and the network variables."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "vllm").write_text(RECORDER.format(python=sys.executable))
    (bin_dir / "vllm").chmod(0o755)
    record = tmp_path / "record.jsonl"
    proc = subprocess.run(["bash", str(bundle / "serve.sh"), *args], cwd=tmp_path,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(record), **env},
                          capture_output=True, text=True, timeout=60)
    records = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return proc.returncode, records, proc.stderr


def served_argv(bundle: Path, **values: str) -> list[str]:
    """The lock's argv as serve.sh should run it with these values for its variables."""
    lock = read_lock(bundle)["launch"]
    params = {f"${k}": v for k, v in {**lock["parameters"], **values}.items()}
    return ["serve"] + [params.get(t, t) for t in lock["argv"][2:]]


PINNED = {"LOCAL_IP": "10.1.0.7", "NIC_NAME": "enp1"}


@pytest.mark.parametrize("bundle, args, env, values, worker", [
    ("two_nodes", ["--node-rank", "0"], PINNED, dict(DP_START_RANK="0", LEADER_IP="10.1.0.7"), False),
    ("two_nodes", ["--node-rank", "1", "--leader-address", "10.1.0.5"], PINNED,
     dict(DP_START_RANK="8", LEADER_IP="10.1.0.5"), True),
    ("two_nodes", [], {**PINNED, "LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": "127.0.0.1", "LWS_GROUP_SIZE": "2"},
     dict(DP_START_RANK="8", LEADER_IP="127.0.0.1"), True),
    ("two_nodes", ["--rpc-port", "14000"], {**PINNED, "NODE_RANK": "0"},
     dict(DP_START_RANK="0", LEADER_IP="10.1.0.7", RPC_PORT="14000"), False),
    ("tp_across", [], {**PINNED, "LWS_WORKER_INDEX": "0", "LWS_GROUP_SIZE": "2"},
     dict(NODE_RANK="0", LEADER_IP="10.1.0.7"), False),
    ("tp_across", ["--node-rank=1", "--leader-address=127.0.0.1"], PINNED, dict(NODE_RANK="1", LEADER_IP="127.0.0.1"), True),
], ids=["dp-leader", "dp-worker-flags", "dp-worker-lws", "dp-rpc-port", "tp-leader-lws", "tp-worker"])
def test_serve_takes_the_node_role(request, tmp_path, bundle, args, env, values, worker):
    bundle = request.getfixturevalue(bundle)
    code, records, stderr = serve(bundle, tmp_path, args, env)
    assert code == 0, stderr
    added = read_lock(bundle)["launch"]["nodes"]["worker_args"] if worker else []
    expected = served_argv(bundle, **values) + [values.get(t[1:], t) for t in added]
    assert records == [{"argv": expected, "env": {"HCCL_IF_IP": "10.1.0.7", **{n: "enp1" for n in NODE_ENV[1:]}}}]
    assert "this node 10.1.0.7 on enp1" in stderr


def test_serve_keeps_network_variables_already_set(two_nodes, tmp_path):
    code, records, stderr = serve(two_nodes, tmp_path, ["--node-rank", "0"],
                                  {**PINNED, "HCCL_IF_IP": "10.9.9.9", "GLOO_SOCKET_IFNAME": "ib0"})
    assert code == 0, stderr
    assert records[0]["env"] == {"HCCL_IF_IP": "10.9.9.9", "GLOO_SOCKET_IFNAME": "ib0", "TP_SOCKET_IFNAME": "enp1",
                                 "HCCL_SOCKET_IFNAME": "enp1"}


def _an_interface() -> tuple[str, str] | None:
    """(name, IPv4) of a non-loopback interface of this machine, found as serve.sh finds them."""
    import fcntl
    import socket
    import struct

    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                address = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))[20:24])
            except OSError:
                continue
        if not address.startswith("127."):
            return name, address
    return None


def test_serve_finds_the_address_and_interface_on_the_route_to_the_leader(two_nodes, tmp_path):
    found = _an_interface()
    if found is None:
        pytest.skip("this machine has no non-loopback IPv4 interface")
    name, address = found
    code, records, stderr = serve(two_nodes, tmp_path, ["--node-rank", "1", "--leader-address", address], {})
    assert code == 0, stderr
    assert records[0]["env"] == {"HCCL_IF_IP": address, **{n: name for n in NODE_ENV[1:]}}


@pytest.mark.parametrize("args, env, message", [
    ([], PINNED, "the plan runs on 2 nodes: give this one --node-rank 0-1 (or NODE_RANK; a LeaderWorkerSet sets "
     "LWS_WORKER_INDEX), got: ''"),
    (["--node-rank", "x"], PINNED, "give this one --node-rank 0-1"),
    (["--node-rank", "2"], PINNED, "--node-rank 2: the plan runs on 2 nodes (ranks 0-1)"),
    (["--node-rank", "1"], PINNED, "node 1 joins the leader: give --leader-address HOST (or LEADER_ADDRESS; a "
     "LeaderWorkerSet sets LWS_LEADER_ADDRESS)"),
    ([], {**PINNED, "LWS_WORKER_INDEX": "0", "LWS_GROUP_SIZE": "3"}, "the LeaderWorkerSet group has 3 pods "
     "(LWS_GROUP_SIZE) but the plan runs on 2 nodes; set its leaderWorkerTemplate.size to 2"),
    (["--node-rank", "0", "--rpc-port", "1e4"], PINNED, "--rpc-port must be a number, got: 1e4"),
    (["--node-rank", "1", "--leader-address", "127.0.0.1"], {}, "this node's address came out as 127.0.0.1 "
     "(loopback); set LOCAL_IP to the address the other nodes reach"),
    (["--node-rank", "0"], {"LOCAL_IP": "10.1.0.7"}, "no network interface holds this node's address 10.1.0.7; "
     "set NIC_NAME (and LOCAL_IP)"),
], ids=["no-rank", "rank-not-a-number", "rank-too-big", "worker-without-leader", "group-size-differs",
        "rpc-port-not-a-number", "loopback", "no-interface"])
def test_serve_refuses_a_node_it_cannot_place(two_nodes, tmp_path, args, env, message):
    code, records, stderr = serve(two_nodes, tmp_path, args, env)
    assert code != 0 and records == []
    assert message in stderr


def test_a_single_node_serve_sh_has_no_node_options(tmp_path):
    text = (write(tmp_path / "b") / "serve.sh").read_text()
    assert "--node-rank" not in text and "ROLE_ARGS" not in text and "python3" not in text


# --------------------------------------------------------------------------- vLLM's parser on every node


@pytest.mark.vllm
def test_vllm_accepts_every_nodes_argv(two_nodes, tp_across):
    locks = [read_lock(two_nodes), read_lock(tp_across)]
    requests = [r for lock in locks for r in probe_requests(lock)]
    results = run_probe({"batch": requests})["results"]
    if results[0]["status"] == "skipped":
        pytest.skip(results[0]["reason"])
    for lock, found in zip(locks, [results[:2], results[2:]]):
        check = check_vllm(lock, found)
        assert check.status == "pass", check.problems
        assert "the argv of all 2 nodes (leader and 1 headless)" in check.note


def test_a_worker_the_parser_rejects_is_named(two_nodes):
    lock = read_lock(two_nodes)
    rejected = {"status": "failed", "vllm_version": "0.23.0", "capture_sizes": None, "problems": [
        {"check": "vllm-parser", "message": "unrecognized arguments: --headless", "blame": ["optkit"]}]}
    ok = {"status": "ok", "vllm_version": "0.23.0", "capture_sizes": None, "problems": []}
    check = check_vllm(lock, [ok, rejected])
    assert check.problems == ["node 1 (worker): optkit's own serve arguments: unrecognized arguments: --headless"]


# --------------------------------------------------------------------------- bundle check on the node parts


@pytest.mark.parametrize("edit, message", [
    (lambda b: _replace(b / "serve.sh", 'WORKER_ARGS=(--headless --data-parallel-start-rank "$DP_START_RANK")',
                        "WORKER_ARGS=(--headless)"),
     "serve.sh's worker nodes add ['--headless'], but the lock's launch.nodes.worker_args is ['--headless', "
     "'--data-parallel-start-rank', '$DP_START_RANK']"),
    (lambda b: _replace(b / "serve.sh", '  ${ROLE_ARGS[@]+"${ROLE_ARGS[@]}"} \\\n', ""),
     "serve.sh's vllm serve command does not end with the worker arguments and the extra arguments"),
    (lambda b: _replace(b / "k8s" / "configmap.yaml", "--headless", "--headles"),
     "k8s/configmap.yaml's serve.sh differs from the bundle's serve.sh"),
], ids=["worker-args", "role-args-line", "configmap-script"])
def test_bundle_check_finds_an_edited_node_launch(two_nodes, tmp_path, edit, message):
    from optkit.errors import BundleError

    bundle = tmp_path / "b"
    shutil.copytree(two_nodes, bundle)
    edit(bundle)
    try:
        problems = check_launch(bundle, read_lock(bundle)).problems
    except BundleError as exc:
        problems = [str(exc)]
    assert any(message in p for p in problems), problems


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_bundle_check_passes_the_node_launch(two_nodes, tp_across):
    for bundle in (two_nodes, tp_across):
        check = check_launch(bundle, read_lock(bundle))
        assert check.status == "pass", check.problems


# --------------------------------------------------------------------------- the LeaderWorkerSet


K8S_LAYOUTS = [
    pytest.param(TWO_NODES, K8sOptions(), id="2-nodes-1-replica-mindcluster"),
    pytest.param(TWO_NODES, K8sOptions(replicas=3, device_plugin="cce"), id="2-nodes-3-replicas-cce"),
    pytest.param(dict(tp=2, dp=32), K8sOptions(replicas=3), id="4-nodes-3-replicas-mindcluster"),
    pytest.param(dict(tp=2, dp=32), K8sOptions(device_plugin="cce"), id="4-nodes-1-replica-cce"),
    pytest.param(TP_ACROSS, K8sOptions(replicas=3), id="tp-across-2-nodes-3-replicas"),
    pytest.param(dict(tp=4, dp=8, nodes=4, target="910b", mtp=False), K8sOptions(device_plugin="cce"),
                 id="910b-4-nodes-cce"),
]
RESOURCES = {"mindcluster": "huawei.com/Ascend910", "cce": "huawei.com/ascend-1980"}


@pytest.mark.parametrize("fields, options", K8S_LAYOUTS)
def test_every_multi_node_manifest_is_valid(tmp_path, fields, options):
    """The LeaderWorkerSet against the LWS CRD schema (strict) and its pod templates against Kubernetes
    1.33's PodTemplateSpec; the ConfigMap and the Service against Kubernetes 1.33."""
    k8s = write(tmp_path / "b", k8s=options, **fields) / "k8s"
    assert sorted(p.name for p in k8s.iterdir()) == ["configmap.yaml", "leaderworkerset.yaml", "service.yaml"]
    assert [kind for name in ("leaderworkerset", "configmap", "service") for kind in validate_file(k8s / f"{name}.yaml")] \
        == ["LeaderWorkerSet", "ConfigMap", "Service"]


@pytest.mark.parametrize("fields, options", K8S_LAYOUTS)
def test_the_group_has_what_a_910c_group_needs(tmp_path, fields, options):
    bundle = write(tmp_path / "b", k8s=options, **fields)
    lock = read_lock(bundle)
    nodes = lock["launch"]["nodes"]
    lws = yaml.safe_load((bundle / "k8s" / "leaderworkerset.yaml").read_text())
    spec, template = lws["spec"], lws["spec"]["leaderWorkerTemplate"]
    assert (spec["replicas"], template["size"]) == (options.replicas, nodes["count"])
    assert (template["restartPolicy"], spec["startupPolicy"]) == ("RecreateGroupOnPodRestart", "LeaderCreated")
    for role in ("leader", "worker"):
        pod = template[f"{role}Template"]
        assert pod["metadata"]["labels"]["role"] == role
        (container,) = pod["spec"]["containers"]
        assert container["command"] == ["bash", "/opt/optkit/serve.sh"]
        assert container["resources"]["limits"] == {RESOURCES[options.device_plugin]: nodes["node_devices"]}
        assert {"name": "LOCAL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in container["env"]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{2 * nodes['node_devices']}Gi"}
        assert volumes["launch"]["configMap"]["name"] == lws["metadata"]["name"] + "-launch"
        assert {m["mountPath"] for m in container["volumeMounts"]} == {"/var/cache/huggingface", "/dev/shm", "/opt/optkit"}
        probes = {"startupProbe", "readinessProbe", "livenessProbe"} & set(container)
        assert probes == ({"startupProbe", "readinessProbe", "livenessProbe"} if role == "leader" else set())
    service = yaml.safe_load((bundle / "k8s" / "service.yaml").read_text())
    assert service["metadata"]["name"] == lws["metadata"]["name"] + "-leader"  # the LWS's own headless Service has its name
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"], "role": "leader"}
    configmap = yaml.safe_load((bundle / "k8s" / "configmap.yaml").read_text())
    assert configmap["data"] == {name: (bundle / name).read_text() for name in ("env.sh", "serve.sh")}


def test_a_single_node_plan_keeps_the_deployment(tmp_path):
    k8s = write(tmp_path / "b", k8s=True) / "k8s"
    assert sorted(p.name for p in k8s.iterdir()) == ["deployment.yaml", "service.yaml"]


def _unknown_keys(data, schema: dict, path: tuple = ()) -> tuple[list[str], set[tuple]]:
    """(the keys of ``data`` the schema does not list, the markers reached) — walking every object whose
    schema lists properties, down to the markers, maps (additionalProperties) and the object's own
    metadata (left to the API server; validated as ObjectMeta)."""
    if TRIMMED in schema:
        return [], {path}
    unknown, markers = [], set()
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        for item in data:
            u, m = _unknown_keys(item, schema["items"], path + ("[]",))
            unknown, markers = unknown + u, markers | m
    elif isinstance(data, dict) and "properties" in schema:
        for key, value in data.items():
            if key not in schema["properties"]:
                unknown.append(".".join(map(str, path + (key,))))
                continue
            u, m = _unknown_keys(value, schema["properties"][key], path + (key,))
            unknown, markers = unknown + u, markers | m
    return unknown, markers


def test_the_trimmed_schema_still_has_what_the_generator_writes(two_nodes):
    """Every property of the generated LeaderWorkerSet is in the vendored schema, and the generated
    pod templates reach the markers, so trimming more of the CRD would fail here."""
    lws = yaml.safe_load((two_nodes / "k8s" / "leaderworkerset.yaml").read_text())
    unknown, markers = _unknown_keys(lws, lws_schema())
    assert unknown == []
    assert markers == {("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
                       ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")}
    assert set(trimmed_paths().values()) == {"PodSpec", "PersistentVolumeClaim"}
    spec = lws_schema()["properties"]["spec"]
    assert {"leaderWorkerTemplate", "replicas", "startupPolicy"} <= set(spec["properties"])
    assert {"leaderTemplate", "workerTemplate", "size", "restartPolicy"} <= set(
        spec["properties"]["leaderWorkerTemplate"]["properties"])
    for role in ("leaderTemplate", "workerTemplate"):
        assert "labels" in spec["properties"]["leaderWorkerTemplate"]["properties"][role]["properties"]["metadata"]["properties"]


def _lws(bundle: Path) -> dict:
    return yaml.safe_load((bundle / "k8s" / "leaderworkerset.yaml").read_text())


def _set(path: str, value):
    def edit(data):
        *parents, last = path.split(".")
        for key in parents:
            data = data[int(key)] if key.isdigit() else data[key]
        data[last] = value
    return edit


LWT = "spec.leaderWorkerTemplate"


@pytest.mark.parametrize("edit, message", [
    (_set(f"{LWT}.sizee", 2), "LeaderWorkerSet spec.leaderWorkerTemplate: Additional properties are not allowed "
     "('sizee' was unexpected)"),
    (_set(f"{LWT}.restartPolicy", "Always"), "LeaderWorkerSet spec.leaderWorkerTemplate.restartPolicy: 'Always' is not "
     "one of ['Default', 'RecreateGroupOnPodRestart', 'None']"),
    (_set("spec.replicas", "3"), "LeaderWorkerSet spec.replicas: '3' is not of type 'integer'"),
    (_set("spec.startupPolicy", "LeaderStarted"), "LeaderWorkerSet spec.startupPolicy: 'LeaderStarted' is not one of"),
    (_set(f"{LWT}.leaderTemplate.metadata.generateName", "x"), "LeaderWorkerSet "
     "spec.leaderWorkerTemplate.leaderTemplate.metadata: Additional properties are not allowed ('generateName'"),
    (_set(f"{LWT}.workerTemplate.spec.containers.0.bogus", 1), "LeaderWorkerSet "
     "spec.leaderWorkerTemplate.workerTemplate.spec: PodTemplate template.spec.containers.0: Additional properties are "
     "not allowed ('bogus' was unexpected)"),
    (_set(f"{LWT}.leaderTemplate.spec.containers.0.ports.0.containerPort", "http"),
     "LeaderWorkerSet spec.leaderWorkerTemplate.leaderTemplate.spec: PodTemplate template.spec.containers.0.ports.0"
     ".containerPort: 'http' is not of type 'integer'"),
    (_set(f"{LWT}.volumeClaimTemplates", [{"metadata": {"name": "w"}, "spec": {"accessModez": []}}]), "LeaderWorkerSet "
     "spec.leaderWorkerTemplate.volumeClaimTemplates.0: PersistentVolumeClaim spec: Additional properties are not allowed"),
    (_set("metadata.labelz", {}), "LeaderWorkerSet metadata: ConfigMap metadata: Additional properties are not allowed"),
    (_set("apiVersion", "leaderworkerset.x-k8s.io/v2"), "LeaderWorkerSet apiVersion: 'leaderworkerset.x-k8s.io/v2'"),
], ids=["unknown-lws-field", "bad-restart-policy", "replicas-string", "bad-startup-policy", "pod-metadata-the-crd-drops",
        "unknown-container-field", "port-not-a-number", "bad-claim", "bad-object-metadata", "other-api-version"])
def test_the_lws_validation_catches(two_nodes, edit, message):
    data = copy.deepcopy(_lws(two_nodes))
    edit(data)
    with pytest.raises(AssertionError) as info:
        validate_manifest(data)
    assert str(info.value).startswith(message), str(info.value)
