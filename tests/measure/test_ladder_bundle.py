"""The ladder bundle (optkit.measure.ladder, `optkit ladder`): deterministic files, complete step
bundles, a run-ladder.sh that shellcheck accepts and that refuses bad use, the Indexed Job against the
real Kubernetes schema, and a failing step that leaves the tree clean."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support and k8s_support

from k8s_support import KUBERNETES_VERSION, schema_problems  # noqa: E402
from optkit.cli.main import cli  # noqa: E402
from optkit.measure import MeasureError  # noqa: E402
from optkit.measure.ladder import _recipe_data, ladder_files, write_ladder  # noqa: E402
from optkit.measure.steps import ladder_steps  # noqa: E402
from optkit.resolve.plan import load_workspace, plan  # noqa: E402
from optkit.resolve.request import Request  # noqa: E402
from optkit.tree.patchset import from_bundle  # noqa: E402

WS = load_workspace()
REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [1, 4], "input_len": 32, "output_len": 8,
           "min_tokens": False}  # no min_tokens: with it the sampler fast path has no effect
ONLY = ["sampler-greedy-bf16-fastpath", "waterfall-hccl-aiv"]


def files(request=REQUEST, **options) -> dict[str, bytes]:
    full = plan(Request(**request), WS)
    return ladder_files(full, WS, ladder_steps(full, WS.catalog, only=options.pop("only", ONLY)), **options)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ladder") / "ladder"
    full = plan(Request(**REQUEST), WS)
    write_ladder(full, WS, ladder_steps(full, WS.catalog, only=ONLY), out, repeat=2, k8s=True)
    return out


def test_the_same_request_gives_the_same_bytes():
    assert files() == files()


def test_no_machine_paths_or_host_name_in_any_file():
    host = socket.gethostname()
    for name, data in files(k8s=True).items():
        text = data.decode("utf-8", "replace")
        assert str(Path.home()) not in text and "/tmp/" not in text, name
        assert host not in text or len(host) < 4, name


def test_each_step_is_a_complete_bundle(written):
    data = json.loads((written / "ladder.json").read_text())
    assert [s["id"] for s in data["steps"]] == ["00-baseline", "01-sampler-greedy-bf16-fastpath", "02-waterfall-hccl-aiv"]
    for step in data["steps"]:
        folder = written / "steps" / step["id"]
        lock = json.loads((folder / "optkit.lock.json").read_text())
        assert lock["selected"] == step["recipes"]
        assert [p.name for p in from_bundle(folder)] == step["patches"]
        for name in ("serve.sh", "env.sh", "bench.sh", "preflight.sh", "apply.sh", "README.md"):
            assert (folder / name).is_file(), (step["id"], name)
    hccl = (written / "steps" / "02-waterfall-hccl-aiv" / "env.sh").read_text()
    assert "HCCL_OP_EXPANSION_MODE=AIV" in hccl
    assert "HCCL_OP_EXPANSION_MODE" not in (written / "steps" / "01-sampler-greedy-bf16-fastpath" / "env.sh").read_text()
    readme = (written / "steps" / "00-baseline" / "README.md").read_text()
    assert ("**A ladder step.** Only the recipes below are applied; the plan's other selected recipes are left out "
            "(not in ladder step 00-baseline: the single-variable ladder measures it in another step)") in readme


def test_a_step_bundle_is_reproduced_from_its_lock(written, tmp_path):
    step = written / "steps" / "01-sampler-greedy-bf16-fastpath"
    result = CliRunner().invoke(cli, ["plan", "--from-lock", str(step / "optkit.lock.json"), "-o", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    again = {p.relative_to(tmp_path / "again").as_posix(): p.read_bytes() for p in (tmp_path / "again").rglob("*") if p.is_file()}
    assert again == {p.relative_to(step).as_posix(): p.read_bytes() for p in step.rglob("*") if p.is_file()}


def test_the_ladder_states_what_it_costs(written):
    data = json.loads((written / "ladder.json").read_text())
    assert data["cost"] == {"steps": 3, "server_starts": 6, "tree_applies": 1, "tree_reverts": 1, "kernel_rebuilds": 0}
    script = (written / "run-ladder.sh").read_text()
    assert "# This ladder: 3 steps x 2 repeat(s) = 6 server starts, 1 tree applies, 0 kernel rebuilds." in script
    assert data["recipes"]["sampler-greedy-bf16-fastpath"]["accuracy"]["check"] == "greedy-identical"
    assert data["recipes"]["waterfall-hccl-aiv"]["article"][0]["quote"] == "HCCL AIV-6.6%"


def test_run_ladder_passes_bash_n_and_shellcheck(written):
    subprocess.run(["bash", "-n", str(written / "run-ladder.sh")], check=True)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    proc = subprocess.run(["shellcheck", "-x", str(written / "run-ladder.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("args, code, words", [
    pytest.param([], 2, "--tree TREE is required", id="no-tree"),
    pytest.param(["--tree", "t", "--port", "80x"], 2, "--port must be a number", id="bad-port"),
    pytest.param(["--tree", "t", "--bogus"], 2, "unknown option: --bogus", id="unknown-option"),
    pytest.param(["--tree", "t", "--only", "9"], 2, "--only 9 is neither a step index (0-2) nor a step id", id="bad-only"),
])
def test_run_ladder_refuses_bad_use(written, tmp_path, args, code, words):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("optkit", "curl"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "MODEL": "m"}
    proc = subprocess.run(["bash", str(written / "run-ladder.sh"), *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert proc.returncode == code and words in proc.stderr, proc.stderr


def test_the_indexed_job_is_valid_kubernetes(written):
    text = (written / "k8s" / "ladder-job.yaml").read_text()
    assert schema_problems(text) == [], f"against Kubernetes {KUBERNETES_VERSION}"
    import yaml

    job = yaml.safe_load(text)
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 3
    spec = job["spec"]["template"]["spec"]
    assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == \
        "kubernetes.io/hostname"
    assert spec["containers"][0]["resources"]["limits"] == {"huawei.com/Ascend910": 2}  # the default device plugin (optkit.bundle.k8s)


def test_the_schema_check_catches_a_misspelt_field(written):
    text = (written / "k8s" / "ladder-job.yaml").read_text().replace("completionMode", "completionMod")
    assert schema_problems(text) == ["document 0 (Job): spec: Additional properties are not allowed "
                                     "('completionMod' was unexpected)"]


@pytest.mark.parametrize("occupant, words", [
    pytest.param("results/00-baseline/r1/c1.json", "holds the results of a ladder run", id="results"),
    pytest.param("notes.txt", "also holds notes.txt", id="foreign-file"),
])
def test_write_refuses_a_directory_it_would_clobber(written, tmp_path, occupant, words):
    out = tmp_path / "ladder"
    shutil.copytree(written, out)
    (out / occupant).parent.mkdir(parents=True, exist_ok=True)
    (out / occupant).write_text("{}")
    full = plan(Request(**REQUEST), WS)
    with pytest.raises(MeasureError, match=words):
        write_ladder(full, WS, ladder_steps(full, WS.catalog, only=ONLY), out)


def test_the_cli_writes_and_summarises_a_ladder(tmp_path):
    result = CliRunner().invoke(cli, ["ladder", "qwen3.5-35b", "--mtp", "--order", "article", "--leave-one-out",
                                      "-o", str(tmp_path / "l")])
    assert result.exit_code == 0, result.output
    assert "01-full" in result.output and "not a step: waterfall-version-upgrade" in result.output
    assert "server starts" in result.output and (tmp_path / "l" / "run-ladder.sh").is_file()


def _host_inputs(tmp_path: Path) -> dict[str, Path]:
    """What a good NPU host has: a vllm-ascend tree, a checkpoint directory, npu-smi; optkit and curl fakes
    that log their calls (none may come before the inputs are checked)."""
    tree, model, bin_dir = tmp_path / "tree", tmp_path / "model", tmp_path / "bin"
    (tree / "vllm_ascend").mkdir(parents=True)
    (tree / "setup.py").write_text("")
    model.mkdir()
    (model / "config.json").write_text("{}")
    bin_dir.mkdir()
    for tool in ("optkit", "curl", "npu-smi"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path / "calls.log"}\nexit 0\n')
        (bin_dir / tool).chmod(0o755)
    return {"tree": tree, "model": model, "bin": bin_dir}


def _tool(name: str, text: str):
    def change(host: dict, env: dict) -> None:
        path = host["bin"] / name
        path.write_text(text)
        path.chmod(0o755)
    return change


def _no_npu_smi(host, env):
    (host["bin"] / "npu-smi").unlink()


def _model(value):
    def change(host, env):
        env["MODEL"] = value(host) if callable(value) else value
    return change


def _tree_without_package(host, env):
    shutil.rmtree(host["tree"] / "vllm_ascend")


@pytest.mark.parametrize("change, words", [
    pytest.param(_no_npu_smi, "run-ladder.sh: no Ascend NPU is visible (npu-smi info fails or is not on PATH, and there "
                 "is no /dev/davinci*); run it on the NPU host", id="no-npu-smi"),
    pytest.param(_tool("npu-smi", "#!/bin/sh\necho 'dcmi module initialize failed' >&2\nexit 1\n"),
                 "run-ladder.sh: no Ascend NPU is visible", id="npu-smi-fails"),
    pytest.param(_model(lambda host: str(host["tree"])), "is a directory without config.json; pass the checkpoint's "
                 "directory (the one holding config.json) or a Hugging Face repo id (org/name)", id="model-dir-without-config"),
    pytest.param(_model("/models/Qwen3.5-35B-A3B"), "run-ladder.sh: --model /models/Qwen3.5-35B-A3B is neither a "
                 "directory nor a Hugging Face repo id (org/name)", id="model-path-missing"),
    pytest.param(_model("qwen3.5"), "--model qwen3.5 is neither a directory nor a Hugging Face repo id", id="model-bare-name"),
    pytest.param(_tree_without_package, "is not a vllm-ascend source tree (it needs setup.py and vllm_ascend/); pass the "
                 "vllm-ascend checkout the server imports", id="tree-not-vllm-ascend"),
    pytest.param(_tool("df", "#!/bin/sh\necho 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n"
                       "echo '/dev/sda1 100000 99000 1000 99% /'\n"),
                 "MB are free in", id="disk-full"),
    pytest.param(_tool("df", "#!/bin/sh\nexit 1\n"), "cannot tell the free disk space of", id="df-fails"),
])
def test_run_ladder_checks_its_inputs_before_touching_the_tree(written, tmp_path, change, words):
    host = _host_inputs(tmp_path)
    env = {"PATH": f"{host['bin']}:/usr/bin:/bin", "MODEL": str(host["model"])}
    change(host, env)
    proc = subprocess.run(["bash", str(written / "run-ladder.sh"), "--tree", str(host["tree"]), "--results",
                           str(tmp_path / "results")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 1 and words in proc.stderr, proc.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines() if (tmp_path / "calls.log").is_file() else []
    assert [c for c in calls if not c.startswith("npu-smi")] == []  # no optkit apply/revert, no server, no curl


@pytest.mark.parametrize("model", [
    pytest.param("Qwen/Qwen3.5-35B-A3B", id="repo-id"),
    pytest.param(None, id="checkpoint-directory"),
])
def test_run_ladder_starts_with_good_inputs(written, tmp_path, model):
    host = _host_inputs(tmp_path)
    env = {"PATH": f"{host['bin']}:/usr/bin:/bin", "MODEL": model or str(host["model"])}
    proc = subprocess.run(["bash", str(written / "run-ladder.sh"), "--tree", str(host["tree"]), "--results",
                           str(tmp_path / "results")], capture_output=True, text=True, env=env, cwd=tmp_path)
    # past the checks: the first run begins (and stops, as the fake curl says the port is taken)
    assert "run-ladder: [1/6] 00-baseline repeat 1/2" in proc.stdout, proc.stderr
    assert "optkit revert --tree" in (tmp_path / "calls.log").read_text()


GAINS = [  # issue 25, item 1: a ladder step showed the decision's benefit, which a recipe left out also carries
    pytest.param(dict(model="qwen3.5-35b", target="910c", mtp=True), "gdn-l2norm-fused-recurrent-kernel", "regresses",
                 id="regresses"),
    pytest.param(dict(model="qwen3.6-35b", target="910c", concurrency=[64]), "gdn-rearrange-qkv-view", "no-effect",
                 id="no-effect"),
    pytest.param(dict(model="qwen3.5-35b", target="910c", mtp=True), "moe-skip-dispatch-combine-events", "selected",
                 id="selected"),
]


@pytest.mark.parametrize("request_fields, rid, status", GAINS)
def test_a_ladder_recipe_shows_the_gain_the_plan_counts(request_fields, rid, status):
    full = plan(Request(**request_fields), WS)
    decision = full.resolution.decisions[rid]
    assert decision.status.value == status and decision.benefit is not None and decision.benefit.per_concurrency
    gain = full.gain(rid)
    data = _recipe_data(full, WS, rid)
    assert data["estimate_saving_ms"] == {str(c): None if v is None else round(v, 4)
                                          for c, v in sorted((gain.per_concurrency if gain else {}).items())}
    assert bool(data["estimate_saving_ms"]) == (status == "selected")


def test_the_ladder_json_gains_are_the_plans(written):
    full = plan(Request(**REQUEST), WS)
    recipes = json.loads((written / "ladder.json").read_text())["recipes"]
    assert recipes and set(recipes) <= set(full.selected)
    for rid, data in recipes.items():
        assert data["estimate_saving_ms"] == {str(c): None if v is None else round(v, 4)
                                              for c, v in sorted(full.gain(rid).per_concurrency.items())}, rid
