"""Prefill/decode-disaggregated plans (``--pd P:D``): where the instances run (optkit.resolve.pd), the
per-release Mooncake launch proved on the real trees (optkit.versions.pd), the bundle of roles (lock,
serve.sh per role with its instance tables, proxy.sh, k8s manifests validated against Kubernetes 1.33),
``plan --from-lock``, and ``bundle check`` with the paired vLLM's parser on every instance's argv."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from packaging.version import Version

from k8s_support import validate_file
from optkit.bundle.check import _string_calls, check_bundle, check_launch, check_pd, check_vllm, read_lock
from optkit.bundle.probe import probe_requests, run_probe
from optkit.bundle.writer import bundle_files, write_bundle
from optkit.cli.main import cli
from optkit.errors import RequestError
from optkit.resolve.pd import pd_layout
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.versions.pd import CONNECTOR, MULTI, NO_PD, PD_RELEASES, QWEN35, REGISTRY, SINGLE, pd_release
from optkit.versions.releases import MOVES_FILE, versions_dir
from vllm_support import paired_python

WORKSPACE = load_workspace()
DONE = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [64], "pd": "1:1"}
"""The issue's done-means request: qwen3.5-35b on 910C at concurrency 64, one prefiller and one decoder."""
RELEASES = sorted(PD_RELEASES)


def write(dest: Path, k8s=True, **fields) -> Path:
    write_bundle(plan(Request(**{**DONE, **fields}), WORKSPACE), WORKSPACE, dest, k8s=k8s)
    return dest


@pytest.fixture(scope="module", params=RELEASES)
def bundle(request, tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("pd") / "b", vllm_ascend_version=request.param)


# --------------------------------------------------------------------------- where the instances run


class _Target:
    id, devices_per_node = "910c", 16


@pytest.mark.parametrize("fields, nodes, placed", [
    (dict(pd="1:1"), 1, [("prefill", 0, 0, (0, 1)), ("decode", 0, 0, (2, 3))]),
    (dict(pd="2:1", tp=4), 1, [("prefill", 0, 0, (0, 1, 2, 3)), ("prefill", 1, 0, (4, 5, 6, 7)),
                               ("decode", 0, 0, (8, 9, 10, 11))]),
    (dict(pd="1:2", tp=8), 2, [("prefill", 0, 0, tuple(range(8))), ("decode", 0, 0, tuple(range(8, 16))),
                               ("decode", 1, 1, tuple(range(8)))]),
    (dict(pd="1:1", tp=2, dp=4), 1, [("prefill", 0, 0, tuple(range(8))), ("decode", 0, 0, tuple(range(8, 16)))]),
    # an instance larger than a node: its DP ranks across whole nodes of its own (Qwen3-235B-A22B.md's TP 4 × DP 8)
    (dict(pd="1:2", tp=4, dp=8), 6, [("prefill", 0, 0, tuple(range(16))), ("decode", 0, 2, tuple(range(16))),
                                     ("decode", 1, 4, tuple(range(16)))]),
], ids=["1p1d-tp2", "2p1d-tp4", "1p2d-tp8-two-nodes", "1p1d-local-dp4", "1p2d-tp4-dp8-across-nodes"])
def test_instances_are_packed_onto_nodes_prefill_first(fields, nodes, placed):
    layout = pd_layout(Request(**{**DONE, **fields}), _Target)
    assert layout.nodes == nodes
    assert [(i.role, i.index, i.node, i.devices) for i in layout.instances] == placed
    span = layout.instance_nodes
    assert [i.nodes for i in layout.instances] == [tuple(range(i.node, i.node + span)) for i in layout.instances]


@pytest.mark.parametrize("fields, message", [
    (dict(tp=32), "--pd 1:1 with --tp 32 × --dp 1: one instance needs 32 devices, more than a 910c node's 16, and it "
     "cannot span 2 nodes: its TP group would span nodes (an instance spans nodes with its DP ranks across them, TP 32 "
     "within each node); lower --tp or --dp so that TP × DP ≤ 16, or give a DP that splits evenly over whole nodes"),
    (dict(tp=8, dp=3), "--pd 1:1 with --tp 8 × --dp 3: one instance needs 24 devices, more than a 910c node's 16, and "
     "it cannot span 2 nodes: DP 3 does not split evenly over 2 nodes, so a TP group would span nodes although TP 8 "
     "fits one (an instance spans nodes with its DP ranks across them, TP 8 within each node); lower --tp or --dp so "
     "that TP × DP ≤ 16, or give a DP that splits evenly over whole nodes"),
    (dict(nodes=2), "--nodes 2 with --pd 1:1: --nodes places the ranks of one server; a PD plan's nodes follow from its "
     "instances (packed onto nodes in order; an instance larger than a node takes whole nodes of its own): drop --nodes"),
    (dict(vllm_ascend_version="0.18.0"), f"--pd on vllm-ascend 0.18.0: {NO_PD['0.18.0']}; optkit writes PD bundles for "
     f"{', '.join(PD_RELEASES)}: plan for one of them (--vllm-ascend-version)"),
], ids=["tp-larger-than-a-node", "dp-not-over-whole-nodes", "nodes-given", "release-without-pd"])
def test_impossible_shapes_are_refused_naming_the_flag(fields, message):
    with pytest.raises(RequestError) as exc:
        plan(Request(**{**DONE, **fields}), WORKSPACE)
    assert str(exc.value) == message


@pytest.mark.parametrize("value", ["0:1", "1", "1:1:1", "a:b", "65:1", " 1:1"])
def test_a_bad_pd_value_names_the_flag(value):
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--pd", value])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--pd'" in result.output and "expected P:D" in result.output


@pytest.mark.parametrize("line, message", [
    ("pd: '2:1'", None),
    ("pd: 1:1", "request.yaml:2: pd: expected P:D, prefill and decode instances from 1 to 64 each (e.g. 1:1 or 2:1), "
     "got 61 (a YAML file reads an unquoted P:D as a base-60 number: quote it, pd: '1:1')"),
], ids=["quoted", "unquoted-base-60"])
def test_a_request_file_takes_pd(tmp_path, line, message):
    path = tmp_path / "request.yaml"
    path.write_text(f"model: qwen3.5-35b\n{line}\n")
    result = CliRunner().invoke(cli, ["plan", "--request", str(path)])
    if message is None:
        assert result.exit_code == 0, result.output
        assert "per instance, 2P1D: 3 instances of 2 devices on one node" in result.output
    else:
        assert result.exit_code == 1 and message in result.output, result.output


def test_a_ladder_of_a_pd_plan_is_refused(tmp_path):
    result = CliRunner().invoke(cli, ["ladder", "qwen3.5-35b", "--pd", "1:1", "-o", str(tmp_path / "l")])
    assert result.exit_code == 1
    assert "--pd 1:1: a ladder step is one server" in result.output


def test_pd_is_canonical_in_the_request():
    assert Request(pd="01:2").pd == "1:2"


# --------------------------------------------------------------------------- the release data, on the real trees

CITE = r"([\w./-]+\.(?:md|py):\d+(?:-\d+)?)"


def test_every_release_has_pd_data_or_a_reason_it_has_none():
    known = sorted(p.stem for p in versions_dir().glob("*.yaml") if p.name != MOVES_FILE)
    assert sorted([*PD_RELEASES, *NO_PD]) == known and not set(PD_RELEASES) & set(NO_PD)  # each in one, once
    assert list(PD_RELEASES) == sorted(PD_RELEASES, key=Version)  # oldest first, as the refusal lists them


def test_every_model_optkit_ships_is_hybrid_or_named_apart():
    """The reason NO_PD gives (a connector without hybrid KV cache support) holds for the Gated DeltaNet models;
    for the others (MLA, DeepSeek-V4, Kimi: no Gated DeltaNet layers) it says optkit has not read the release's PD launch."""
    assert any(m.gdn_layers > 0 for m in WORKSPACE.models.values())
    assert all("which a model with Gated DeltaNet layers needs" in why
               and "for models without Gated DeltaNet layers (MLA, DeepSeek-V4, Kimi) optkit has not read" in why
               for why in NO_PD.values())


def _lines(root: Path, cited: str) -> list[str]:
    """The lines ``file:12`` or ``file:12-14`` cites."""
    path, _, span = cited.rpartition(":")
    first, _, last = span.partition("-")
    text = (root / path).read_text(encoding="utf-8").splitlines()
    assert int(last or first) <= len(text), f"{cited}: the file has {len(text)} lines"
    return text[int(first) - 1:int(last or first)]


@pytest.mark.tree
@pytest.mark.parametrize("version", RELEASES)
def test_every_cited_line_says_what_the_data_says(version):
    from optkit.tree.fetch import fetch

    root, release = fetch(version).path, pd_release(version)
    cites = {what: re.findall(CITE, text) for what, text in release.sources.items()}
    for what, cited in cites.items():
        assert cited, what
        for one in cited:
            assert _lines(root, one), one
    single = [c for c in cites["connector"] if "single_node" in c][0]
    assert f'"kv_connector": "{release.connector}"' in _lines(root, single)[0]
    roles = [_lines(root, c)[0] for c in cites["kv_roles"]]
    assert [f'"kv_role": "{release.kv_roles[r]}"' in line for r, line in zip(("prefill", "decode"), roles)] == [True, True]
    ports = [_lines(root, c)[0] for c in cites["kv_port"][:2]]
    assert f'"{release.kv_port}"' in ports[0] and f'"{release.kv_port + release.kv_port_step}"' in ports[1]
    api = [_lines(root, c)[0] for c in cites["api_port"]]
    assert f"--port {release.api_port}" in api[0] and f"--port {release.api_port + 1}" in api[1]
    env = "\n".join(_lines(root, cites["env"][0]))
    assert all(f"export {name}={value}" in env for name, value in release.env)
    proxy = "\n".join(_lines(root, cites["proxy"][0]))
    assert f"python {Path(release.proxy_script).name}" in proxy and f"--port {release.proxy_port}" in proxy
    assert '"max_tokens"] = 1' in _lines(root, f"{release.proxy_script}:{release.max_tokens_line}")[0]
    assert len(cites["speculative"]) == len(release.speculative_words)
    for cited, words in zip(cites["speculative"], release.speculative_words):
        assert words in "\n".join(_lines(root, cited)), (cited, words)
    assert f"from {release.mooncake_module} import TransferEngine" in _lines(root, cites["mooncake"][0])[0]
    (hybrid,) = cites["hybrid_kv_cache"]
    assert _lines(root, hybrid)[0].startswith("class MooncakeConnector(") and "SupportsHMA" in _lines(root, hybrid)[0]
    assert '"engine_id"' not in (root / SINGLE).read_text(encoding="utf-8")  # left to vLLM, as the tutorial does
    if "qos_priority" in cites:
        assert "The default P/D QoS is **1**" in "\n".join(_lines(root, cites["qos_priority"][0]))
    else:
        assert "qos_priority" not in (root / MULTI).read_text(encoding="utf-8")


@pytest.mark.tree
@pytest.mark.parametrize("version", RELEASES)
def test_the_connector_and_the_proxy_options_exist_in_the_tree(version):
    from optkit.tree.fetch import fetch

    root, release = fetch(version).path, pd_release(version)
    assert release.connector in _string_calls(root / REGISTRY, "register_connector")
    assert set(release.proxy_options) <= _string_calls(root / release.proxy_script, "add_argument")
    assert "MooncakeConnectorV0" not in _string_calls(root / REGISTRY, "register_connector")  # the probe can say no
    assert _registered_module(root, release.connector) == CONNECTOR  # the module the connector lines cite
    assert "SupportsHMA" in _bases(root / CONNECTOR, "MooncakeConnector")


@pytest.mark.tree
@pytest.mark.parametrize("version", sorted(NO_PD))
def test_a_release_without_pd_lacks_what_its_reason_says(version):
    """Each NO_PD reason's citations, read on the release's tree: the registered MooncakeConnectorV1's class
    without SupportsHMA, and the release's Qwen3.5 tutorial on MooncakeLayerwiseConnector."""
    from optkit.tree.fetch import fetch

    root = fetch(version).path
    cited = re.findall(CITE, NO_PD[version])
    assert sorted(c.rpartition(":")[0] for c in cited) == sorted([CONNECTOR, QWEN35])
    for one in cited:
        (line,) = _lines(root, one)
        if one.startswith(CONNECTOR):
            assert line.startswith("class MooncakeConnector(KVConnectorBase_V1)"), line
        else:
            assert '"kv_connector": "MooncakeLayerwiseConnector"' in line, line
    assert _registered_module(root, "MooncakeConnectorV1") == CONNECTOR
    assert "SupportsHMA" not in _bases(root / CONNECTOR, "MooncakeConnector")
    assert "MooncakeLayerwiseConnector" in _string_calls(root / REGISTRY, "register_connector")
    assert '"engine_id": "0"' in (root / SINGLE).read_text(encoding="utf-8")  # an id per instance, unlike later ones


def _registered_module(root: Path, name: str) -> str:
    """The file of the module ``register_connector(name, module, class)`` names in the tree's registry."""
    import ast

    for node in ast.walk(ast.parse((root / REGISTRY).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "register_connector" and \
                [getattr(a, "value", None) for a in node.args[:1]] == [name]:
            return node.args[1].value.replace(".", "/") + ".py"
    raise AssertionError(f"{name} is not registered in {REGISTRY}")


def _bases(path: Path, name: str) -> list[str]:
    """The base class names of class ``name`` in the Python file ``path``."""
    import ast

    (found,) = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(n, ast.ClassDef) and n.name == name]
    return [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in found.bases]


# --------------------------------------------------------------------------- the bundle


def test_a_role_per_directory_with_the_shared_tree_files_once(bundle):
    files = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file() and "patches" not in p.parts)
    kernels = ["build-kernels.sh"] if read_lock(bundle)["kernels"] else []  # the release's plan builds kernels
    assert files == ["README.md", "apply.sh", "bench.sh", *kernels, "decode/README.md", "decode/env.sh",
                     "decode/preflight.sh", "decode/serve.sh", "expected.json", "k8s/configmap.yaml", "k8s/decode.yaml",
                     "k8s/prefill.yaml", "k8s/proxy.yaml", "optkit.lock.json", "prefill/README.md", "prefill/env.sh",
                     "prefill/preflight.sh", "prefill/serve.sh", "proxy.sh"]


def test_each_instance_has_its_devices_ports_and_kv_transfer_config(bundle):
    roles = read_lock(bundle)["launch"]["roles"]
    extra = {"decode": {"dp_size": 1, "tp_size": 2}, "prefill": {"dp_size": 1, "tp_size": 2}}
    for role, kv_role, rank in (("prefill", "kv_producer", 0), ("decode", "kv_consumer", 1)):
        (instance,) = roles[role]["instances"]
        assert {k: instance[k] for k in ("node", "devices", "port", "kv_port")} == {
            "node": 0, "devices": "0,1" if rank == 0 else "2,3", "port": 13700 + rank, "kv_port": 36000 + 100 * rank}
        assert json.loads(instance["kv_transfer_config"]) == {
            "kv_connector": "MooncakeConnectorV1", "kv_role": kv_role, "kv_port": str(36000 + 100 * rank),
            "kv_connector_extra_config": extra}
        argv = roles[role]["argv"]
        assert argv[argv.index("--kv-transfer-config") + 1] == "$KV_TRANSFER_CONFIG"
        assert [e["name"] for e in roles[role]["env"][:2]] == ["OMP_PROC_BIND", "OMP_NUM_THREADS"]


@pytest.mark.parametrize("version", RELEASES)
def test_a_hybrid_model_keeps_its_speculative_tokens_on_the_prefiller(tmp_path, version):
    bundle = write(tmp_path / "b", k8s=False, mtp=True, vllm_ascend_version=version)
    roles = read_lock(bundle)["launch"]["roles"]
    assert [roles[r]["effective_speculative_config"]["num_speculative_tokens"] for r in ("prefill", "decode")] == [4, 4]
    readme = (bundle / "prefill" / "README.md").read_text()  # the rule, and the release's lines it comes from
    assert "1 on the prefiller otherwise: the `speculative` source above" in readme
    assert f"- speculative: {PD_RELEASES[version].sources['speculative']}" in readme


def test_a_model_without_linear_attention_drafts_one_token_on_the_prefiller(tmp_path):
    from optkit.value import replace

    from optkit.bundle.pd import RoleLaunch

    full = plan(Request(**DONE, mtp=True), WORKSPACE)
    dense = replace(full, facts=type(full.facts)({**full.facts.values, "model.gdn_layers": 0}))
    assert RoleLaunch(dense, WORKSPACE, "prefill").speculative["num_speculative_tokens"] == 1
    assert RoleLaunch(dense, WORKSPACE, "decode").speculative["num_speculative_tokens"] == 4


def test_from_lock_reproduces_a_pd_bundle_byte_for_byte(bundle, tmp_path):
    again = tmp_path / "again"
    result = CliRunner().invoke(cli, ["plan", "--from-lock", str(bundle / "optkit.lock.json"), "-o", str(again)])
    assert result.exit_code == 0, result.output
    assert {p.relative_to(again): p.read_bytes() for p in again.rglob("*") if p.is_file()} == \
        {p.relative_to(bundle): p.read_bytes() for p in bundle.rglob("*") if p.is_file()}


PLAN = ["plan", "qwen3.6-35b", "--target", "910c", "--concurrency", "64", "--goal", "throughput", "--pd", "1:1"]


@pytest.mark.parametrize("version", RELEASES)
def test_plan_writes_each_releases_own_pd_launch(tmp_path, version):
    result = CliRunner().invoke(cli, [*PLAN, "--vllm-ascend-version", version, "-o", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    lock, release = read_lock(tmp_path / "b"), PD_RELEASES[version]
    assert lock["versions"]["vllm_ascend"] == version
    assert (lock["launch"]["pd"]["prefill"], lock["launch"]["pd"]["decode"]) == (1, 1)
    assert {k: lock["launch"]["pd"][k] for k in ("connector", "proxy", "sources")} == {
        "connector": release.connector, "proxy": {"script": release.proxy_script, "port": release.proxy_port},
        "sources": dict(sorted(release.sources.items()))}
    for role in ("prefill", "decode"):
        (instance,) = lock["launch"]["roles"][role]["instances"]
        config = json.loads(instance["kv_transfer_config"])
        assert (config["kv_connector"], config["kv_role"]) == (release.connector, release.kv_roles[role])
        readme = (tmp_path / "b" / role / "README.md").read_text()
        assert all(f"- {what}: {where}" in readme for what, where in release.sources.items())
    proxy = (tmp_path / "b" / "proxy.sh").read_text()
    assert release.proxy_script in proxy and release.sources["proxy"].split(";")[0] in proxy


@pytest.mark.parametrize("version", sorted(NO_PD))
def test_plan_refuses_a_release_without_pd_with_its_reason(tmp_path, version):
    result = CliRunner().invoke(cli, [*PLAN, "--vllm-ascend-version", version, "-o", str(tmp_path / "b")])
    assert result.exit_code == 1 and not (tmp_path / "b").exists()
    assert f"--pd on vllm-ascend {version}: {NO_PD[version]}; optkit writes PD bundles for 0.21.0rc1, " in result.output
    assert "(--vllm-ascend-version)" in result.output


def test_the_same_request_writes_the_same_bytes():
    request = plan(Request(**DONE), WORKSPACE)
    assert bundle_files(request, WORKSPACE, k8s=True) == bundle_files(plan(Request(**DONE), WORKSPACE), WORKSPACE, k8s=True)


def test_every_pd_manifest_is_valid(bundle):
    k8s = bundle / "k8s"
    assert validate_file(k8s / "prefill.yaml") == ["Service", "StatefulSet"]
    assert validate_file(k8s / "decode.yaml") == ["Service", "StatefulSet"]
    assert validate_file(k8s / "proxy.yaml") == ["Deployment", "Service"]
    assert validate_file(k8s / "configmap.yaml") == ["ConfigMap"]


def test_the_proxy_pod_names_every_instance_pod(bundle):
    import yaml

    proxy = next(yaml.safe_load_all((bundle / "k8s" / "proxy.yaml").read_text()))
    command = proxy["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--prefill-hosts") + 1] == "vllm-qwen3-5-35b-a3b-prefill-0.vllm-qwen3-5-35b-a3b-prefill"
    assert command[command.index("--decode-hosts") + 1] == "vllm-qwen3-5-35b-a3b-decode-0.vllm-qwen3-5-35b-a3b-decode"


# --------------------------------------------------------------------------- the scripts, run


RECORDER = """#!{python}
import json, os, sys
names = ["ASCEND_RT_VISIBLE_DEVICES", "OMP_NUM_THREADS", "HCCL_IF_IP", "HCCL_SOCKET_IFNAME"]
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "env": {{n: os.environ.get(n) for n in names}}}}) + "\\n")
"""


def _run(script: Path, tmp_path: Path, args: list[str], env: dict, program: str = "vllm") -> tuple[int, list[dict], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / program).write_text(RECORDER.format(python=sys.executable))
    (bin_dir / program).chmod(0o755)
    record = tmp_path / "record.jsonl"
    proc = subprocess.run(["bash", str(script), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(record), **env})
    return proc.returncode, [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else [], proc.stderr


PINNED = {"LOCAL_IP": "10.1.0.7", "NIC_NAME": "enp1"}


@pytest.mark.parametrize("role, env, devices", [
    ("prefill", PINNED, "0,1"), ("decode", PINNED, "2,3"), ("decode", {**PINNED, "DEVICES": ""}, None),
], ids=["prefill", "decode", "devices-left-to-the-pod"])
def test_serve_runs_the_instance_with_its_values(bundle, tmp_path, role, env, devices):
    code, records, stderr = _run(bundle / role / "serve.sh", tmp_path, ["--instance", "0"], env)
    assert code == 0, stderr
    launch = read_lock(bundle)["launch"]["roles"][role]
    (instance,) = launch["instances"]
    values = {"$MODEL": launch["parameters"]["MODEL"], "$SERVED_NAME": launch["parameters"]["SERVED_NAME"],
              "$PORT": str(instance["port"]), "$KV_TRANSFER_CONFIG": instance["kv_transfer_config"]}
    assert records == [{"argv": ["serve"] + [values.get(t, t) for t in launch["argv"][2:]],
                        "env": {"ASCEND_RT_VISIBLE_DEVICES": devices, "OMP_NUM_THREADS": "10",
                                "HCCL_IF_IP": "10.1.0.7", "HCCL_SOCKET_IFNAME": "enp1"}}]


@pytest.mark.parametrize("fields, code, said", [
    pytest.param({}, 0, "this node 127.0.0.1 on lo", id="one-node-meets-proxy-sh-on-loopback"),
    pytest.param(dict(pd="1:2", tp=8), 1, "serve.sh: this node's address came out as 127.0.1.1 (loopback); set "
                 "LOCAL_IP to the address the other nodes reach", id="two-nodes-refuse-loopback"),
])
def test_serve_on_a_host_whose_name_is_loopback(tmp_path, fields, code, said):
    """A host whose name resolves to loopback (Debian's 127.0.1.1): a one-node PD plan keeps loopback, where
    proxy.sh looks for its instances by default (127.0.0.1); a plan over several nodes needs an address the
    others reach."""
    bundle = write(tmp_path / "b", k8s=False, **fields)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text('import socket\nsocket.gethostbyname = lambda name: "127.0.1.1"\n')
    args = ["--instance", "0"] if fields else []
    found, records, stderr = _run(bundle / "prefill" / "serve.sh", tmp_path, args, {"PYTHONPATH": str(site)})
    assert found == code and said in stderr, stderr
    if code == 0:
        assert records[0]["env"]["HCCL_IF_IP"] == "127.0.0.1" and records[0]["env"]["HCCL_SOCKET_IFNAME"] == "lo"
        proxy = (bundle / "proxy.sh").read_text()
        assert 'NODE_HOSTS=127.0.0.1' in proxy


def test_serve_refuses_an_instance_the_plan_does_not_have(bundle, tmp_path):
    code, records, stderr = _run(bundle / "prefill" / "serve.sh", tmp_path, ["--instance", "1"], PINNED)
    assert (code, records) == (2, [])
    assert "serve.sh: --instance 1: the plan has 1 prefill instances (0-0)" in stderr


def test_proxy_runs_the_trees_proxy_with_every_instance(bundle, tmp_path):
    tree = tmp_path / "tree"
    script = tree / "examples" / "disaggregated_prefill_v1" / "load_balance_proxy_server_example.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    code, records, stderr = _run(bundle / "proxy.sh", tmp_path, ["--tree", str(tree)], {"PYTHON": "python3"},
                                 program="python3")
    assert code == 0, stderr
    assert records[0]["argv"] == [str(script), "--host", "0.0.0.0", "--port", "8080", "--prefiller-hosts", "127.0.0.1",
                                  "--prefiller-ports", "13700", "--decoder-hosts", "127.0.0.1", "--decoder-ports", "13701"]


# --------------------------------------------------------------------------- bundle check


def test_bundle_check_passes_every_roles_launch(bundle):
    check = check_launch(bundle, read_lock(bundle))
    assert check.status == "pass", check.problems


@pytest.mark.parametrize("edit, message", [
    (lambda b: _replace(b / "decode" / "serve.sh", "PORTS=(13701)", "PORTS=(13702)"),
     "optkit: decode/serve.sh's PORTS is ['13702'], but the lock's instances have ['13701']"),
    (lambda b: _replace(b / "prefill" / "serve.sh", '"kv_role":"kv_producer"', '"kv_role":"kv_consumer"'),
     "optkit: prefill/serve.sh's KV_TRANSFER_CONFIGS is"),
    (lambda b: _replace(b / "prefill" / "env.sh", "OMP_NUM_THREADS=10", "OMP_NUM_THREADS=12"),
     "optkit: prefill/env.sh exports"),
    (lambda b: _replace(b / "k8s" / "configmap.yaml", "kv_producer", "kv_both"),
     "optkit: k8s/configmap.yaml's prefill-serve.sh differs from the bundle's prefill/serve.sh"),
], ids=["port", "kv-config", "env", "configmap"])
def test_bundle_check_finds_an_edited_role(bundle, tmp_path, edit, message):
    copy = tmp_path / "b"
    shutil.copytree(bundle, copy)
    edit(copy)
    problems = check_launch(copy, read_lock(copy)).problems
    assert any(p.startswith(message) for p in problems), problems


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.tree
def test_the_pd_check_names_a_connector_the_tree_does_not_register(bundle):
    from optkit.tree.fetch import fetch

    lock = read_lock(bundle)
    assert check_pd(lock, fetch(lock["versions"]["vllm_ascend"]).path).status == "pass"
    lock["launch"]["pd"]["connector"] = "MooncakeConnectorV3"
    problems = check_pd(lock, fetch(lock["versions"]["vllm_ascend"]).path).problems
    assert problems[0].startswith("the request (--pd): kv_connector 'MooncakeConnectorV3' is not registered by vllm-ascend")


@pytest.mark.vllm
@pytest.mark.tree
def test_bundle_check_passes_every_instance_with_the_paired_vllm(bundle):
    """The issue's done-means: every role's argv, --kv-transfer-config included, through the paired vLLM's parser."""
    lock = read_lock(bundle)
    paired_python(lock["versions"]["vllm"])
    report = check_bundle(bundle)
    assert [(c.name, c.status) for c in report.checks if c.status == "fail"] == [], report.problems
    vllm = next(c for c in report.checks if c.name == "vllm")
    assert vllm.status == "pass" and "prefill instance 0, decode instance 0), --kv-transfer-config included" in vllm.note


@pytest.mark.vllm
def test_the_parser_rejects_a_kv_role_vllm_does_not_know(bundle):
    lock = read_lock(bundle)
    python = paired_python(lock["versions"]["vllm"])
    requests = probe_requests(lock)
    argv = requests[0]["argv"]
    at = argv.index("--kv-transfer-config") + 1
    argv[at] = argv[at].replace("kv_producer", "kv_sender")
    check = check_vllm(lock, run_probe({"batch": requests}, python)["results"])
    assert check.status == "fail" and check.problems[0].startswith("prefill instance 0: the request (optkit plan flags): ")
    assert "kv-transfer-config" in check.problems[0]


@pytest.mark.vllm
@pytest.mark.tree
@pytest.mark.parametrize("fields, names", [
    (dict(pd="1:2", tp=8), "prefill instance 0, decode instance 0, decode instance 1"),
    (dict(pd="2:1", dp=2), "prefill instance 0, prefill instance 1, decode instance 0"),
], ids=["1p2d-tp8-two-nodes", "2p1d-local-dp2"])
def test_other_shapes_pass_the_parser_on_every_instance(tmp_path, fields, names):
    bundle = write(tmp_path / "b", k8s=False, **fields)
    lock = read_lock(bundle)
    paired_python(lock["versions"]["vllm"])
    report = check_bundle(bundle)
    assert [c.name for c in report.checks if c.status == "fail"] == [], report.problems
    assert f"({names}), --kv-transfer-config included" in next(c.note for c in report.checks if c.name == "vllm")
    engine = next(c for c in report.checks if c.name == "engine")  # each instance a server of its own: no handshake
    assert engine.status == "pass" and "DP handshake" not in engine.note, engine.note
    assert re.search(r"the KV connector \S+ \(vllm-ascend's: its class is not loaded here, the configuration is built "
                     r"without --kv-transfer-config\)", engine.note), engine.note
    extra = json.loads(lock["launch"]["roles"]["decode"]["instances"][0]["kv_transfer_config"])["kv_connector_extra_config"]
    assert extra["prefill"] == extra["decode"] == {"dp_size": fields.get("dp", 1), "tp_size": fields.get("tp", 2)}


def test_proxy_on_two_nodes_takes_each_nodes_address(tmp_path):
    bundle = write(tmp_path / "b", k8s=False, pd="1:2", tp=8)
    tree = tmp_path / "tree"
    script = tree / "examples" / "disaggregated_prefill_v1" / "load_balance_proxy_server_example.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    code, _, stderr = _run(bundle / "proxy.sh", tmp_path, ["--tree", str(tree)], {}, program="python3")
    assert code == 2 and "the plan runs on 2 nodes: give --node-hosts with one address per node" in stderr
    code, records, stderr = _run(bundle / "proxy.sh", tmp_path, ["--tree", str(tree), "--node-hosts", "10.0.0.1,10.0.0.2"],
                                 {}, program="python3")
    assert code == 0, stderr
    argv = records[-1]["argv"]
    assert argv[argv.index("--decoder-hosts") + 1:argv.index("--decoder-ports")] == ["10.0.0.1", "10.0.0.2"]
    assert argv[argv.index("--decoder-ports") + 1:] == ["13701", "13702"]


# --------------------------------------------------------------------------- an instance larger than a node


ACROSS = dict(model="qwen3-235b-a22b", target="910c", tp=4, dp=8, quantization="w8a8", vllm_ascend_version="0.30.0rc2",
              concurrency=[64])
"""Qwen3-235B-A22B.md's PD decoder shape (0.30.0rc2, :520: TP 4 × DP 8 over two A3 nodes), both roles."""


@pytest.fixture(scope="module")
def across(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("across") / "b", k8s=False, **ACROSS)


def test_an_instance_across_nodes_runs_each_nodes_dp_ranks(across, tmp_path):
    """Each node of an instance runs one vllm serve with its local DP ranks: the first serves the instance's API, the
    others join it headless from their first DP rank, as a multi-node server's nodes do."""
    launch = read_lock(across)["launch"]["roles"]["decode"]
    assert launch["nodes"]["count"] == 2 and launch["nodes"]["dp_local"] == 4
    assert launch["instances"][0]["nodes"] == [2, 3]
    argv = launch["argv"]
    assert argv[argv.index("--data-parallel-size-local") + 1] == "4"
    assert argv[argv.index("--data-parallel-address") + 1] == "$LEADER_IP"
    code, leader, stderr = _run(across / "decode" / "serve.sh", tmp_path, ["--instance", "0", "--node-rank", "0"],
                                PINNED)
    assert code == 0, stderr
    assert "--headless" not in leader[0]["argv"] and "--data-parallel-start-rank" not in leader[0]["argv"]
    assert leader[0]["argv"][leader[0]["argv"].index("--data-parallel-address") + 1] == "10.1.0.7"  # itself
    (tmp_path / "worker").mkdir()  # its own recorder
    code, worker, stderr = _run(across / "decode" / "serve.sh", tmp_path / "worker",
                                ["--instance", "0", "--node-rank", "1", "--leader-address", "10.1.0.8"], PINNED)
    assert code == 0, stderr
    args = worker[0]["argv"]
    assert args[args.index("--data-parallel-address") + 1] == "10.1.0.8"
    assert args[-3:] == ["--headless", "--data-parallel-start-rank", "4"]


def test_an_instance_across_nodes_needs_its_node_rank_and_leader(across, tmp_path):
    code, records, stderr = _run(across / "prefill" / "serve.sh", tmp_path, ["--instance", "0"], PINNED)
    assert (code, records) == (2, []) and "an instance runs on 2 nodes: give this one --node-rank 0-1" in stderr
    code, records, stderr = _run(across / "prefill" / "serve.sh", tmp_path, ["--node-rank", "1"], PINNED)
    assert (code, records) == (2, []) and "node 1 joins its instance's first node: give --leader-address" in stderr


def test_an_instance_across_nodes_has_no_k8s_manifests(tmp_path):
    from optkit.bundle import BundleWriteError

    with pytest.raises(BundleWriteError) as caught:
        write(tmp_path / "b", k8s=True, **ACROSS)
    assert "each prefill instance (TP 4 × DP 8) spans 2 nodes, and the PD manifests run one pod per instance" \
        in str(caught.value)


def test_bundle_check_probes_every_node_of_every_instance(across):
    """One probe per node of each instance, each instance's nodes one DP group of their own."""
    lock = read_lock(across)
    requests = probe_requests(lock)
    assert [(r["group"], r["node"]) for r in requests] == [("prefill-0", 0), ("prefill-0", 1), ("decode-0", 0),
                                                           ("decode-0", 1)]
    assert requests[1]["argv"][-3:] == ["--headless", "--data-parallel-start-rank", "4"]
    assert check_launch(across, lock).status == "pass"


@pytest.mark.vllm
def test_an_instance_across_nodes_passes_the_paired_vllm(across):
    lock = read_lock(across)
    paired_python(lock["versions"]["vllm"])
    report = check_bundle(across)
    assert [c.name for c in report.checks if c.status == "fail"] == [], report.problems
    note = next(c.note for c in report.checks if c.name == "vllm")
    assert "the argv of all 4 nodes of its 2 instances (prefill instance 0 node 0 (leader), prefill instance 0 node 1 " \
           "(worker), decode instance 0 node 0 (leader), decode instance 0 node 1 (worker))" in note
    engine = next(c.note for c in report.checks if c.name == "engine")
    assert "decode instance 0 node 1 (worker): DP rank 4 of 8, headless" in engine


# --------------------------------------------------------------------------- prefill instances of their own shape


ASYMMETRIC = {**DONE, **ACROSS, "prefill_tp": 8, "prefill_dp": 2}
"""Qwen3-235B-A22B.md's PD pair (0.30.0rc2): a TP 8 × DP 2 prefiller on one A3 node (:510), a TP 4 × DP 8 decoder over
two (:520)."""


def test_prefill_instances_of_their_own_shape_are_placed_and_planned_for_it(tmp_path):
    result = plan(Request(**ASYMMETRIC), WORKSPACE)
    pd = result.pd
    assert [(i.role, i.node, i.nodes, len(i.devices)) for i in pd.instances] == [("prefill", 0, (0,), 16),
                                                                                ("decode", 1, (1, 2), 16)]
    assert (pd.nodes, pd.shape("prefill"), pd.shape("decode"), pd.asymmetric) == (3, (8, 2), (4, 8), True)
    prefill = result.roles["prefill"]
    assert (prefill.request.tp, prefill.request.dp, prefill.facts["parallel.tp"]) == (8, 2, 8)
    assert prefill.pd is pd and prefill.fit.fits
    bundle = tmp_path / "b"
    write_bundle(result, WORKSPACE, bundle, k8s=False)
    lock = read_lock(bundle)
    assert lock["launch"]["pd"]["shapes"] == {"prefill": {"tp": 8, "dp": 2}, "decode": {"tp": 4, "dp": 8}}
    for role, (tp, dp) in (("prefill", (8, 2)), ("decode", (4, 8))):
        launch = lock["launch"]["roles"][role]
        argv = launch["argv"]
        assert (argv[argv.index("--tensor-parallel-size") + 1], argv[argv.index("--data-parallel-size") + 1]) == \
            (str(tp), str(dp))
        extra = json.loads(launch["instances"][0]["kv_transfer_config"])["kv_connector_extra_config"]
        assert extra == {"prefill": {"dp_size": 2, "tp_size": 8}, "decode": {"dp_size": 8, "tp_size": 4}}
    assert "nodes" not in lock["launch"]["roles"]["prefill"] and lock["launch"]["roles"]["decode"]["nodes"]["count"] == 2
    assert check_launch(bundle, lock).status == "pass"


@pytest.mark.parametrize("fields, message", [
    (dict(prefill_tp=4), "--prefill-tp without --pd: it sizes the prefill instances of a prefill/decode-disaggregated "
     "plan; give --pd P:D, or use --tp / --dp for one server"),
    (dict(pd="1:1", prefill_tp=32), "--pd 1:1 with --prefill-tp 32 × --prefill-dp 1: one prefill instance needs 32 "
     "devices, more than a 910c node's 16, and it cannot span 2 nodes: its TP group would span nodes (an instance spans "
     "nodes with its DP ranks across them, TP 32 within each node); lower --tp or --dp so that TP × DP ≤ 16, or give "
     "a DP that splits evenly over whole nodes"),
], ids=["without-pd", "prefill-tp-across-nodes"])
def test_a_prefill_shape_is_refused_naming_its_flag(fields, message):
    request = {k: v for k, v in DONE.items() if k != "pd" or "pd" in fields}
    with pytest.raises(RequestError) as exc:
        plan(Request(**{**request, **fields}), WORKSPACE)
    assert str(exc.value) == message


def test_shapes_selecting_other_source_patches_are_refused():
    """One tree serves both roles: where the prefill shape's plan selects a recipe with source patches that the
    decode shape's does not, the plan is refused, naming it (the prefill plan stands in with one more patch recipe)."""
    from optkit.resolve.role_plans import shaped_prefill_plan

    result = plan(Request(**ASYMMETRIC), WORKSPACE)
    extra = next(r.id for r in sorted(WORKSPACE.catalog, key=lambda r: r.id) if r.patches and r.id not in result.selected)
    with pytest.raises(RequestError) as exc:
        shaped_prefill_plan(result, lambda r: _Selecting(plan(r, WORKSPACE), extra),
                            lambda rid: bool(WORKSPACE.catalog[rid].patches))
    assert str(exc.value) == (f"--prefill-tp 8 × --prefill-dp 2: the prefill shape selects source patches the other "
                              f"does not ({extra}), and one vllm-ascend tree serves both roles; give both roles one "
                              "shape, or a prefill shape whose plan selects the same recipes")


class _Selecting:
    """A plan whose selection holds one more recipe."""

    def __init__(self, result, extra: str):
        self._plan, self.selected = result, [*result.selected, extra]

    def __getattr__(self, name):
        return getattr(self._plan, name)
