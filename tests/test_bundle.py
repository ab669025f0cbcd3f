"""Launch bundles: deterministic, self-contained, injection-safe, and checked against the real
vLLM 0.23.0 parser and the real vllm-ascend 0.23.0 tree.

Tests marked ``vllm`` share one probe subprocess (``vllm_results``, session scope) that imports
vLLM once for every argv; tests marked ``tree`` read the cached pristine vllm-ascend tree.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml
from click.testing import CliRunner

import optkit.bundle
from optkit.bundle import BundleWriteError
from k8s_support import validate_file
from optkit.bundle.k8s import K8sOptions
from optkit.bundle.lock import request_from_lock
from optkit.bundle.render import ShellVar, environment, yaml_scalar
from optkit.bundle.writer import write_bundle
from optkit.bundle.probe import probe_request
from optkit.bundle.check import (
    check_bundle,
    check_config_keys,
    check_env,
    check_scripts,
    check_vllm,
    tree_knobs,
    read_lock,
    run_probe,
)
from optkit.bundle.launch_check import serve_sh_argv
from optkit.catalog.paths import project_root
from optkit.cli.main import cli
from optkit.errors import BundleError, InternalError
from optkit.tree.patchset import from_bundle
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request

ROOT = project_root()
FLAGSHIP = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
SCRIPTS = ["serve.sh", "env.sh", "preflight.sh", "apply.sh", "bench.sh", "build-kernels.sh"]
EDITED = "cudagraph-capture-sizes-spec-aware"  # a config recipe the flagship plan always selects
CI = os.environ.get("CI") == "true"


# --------------------------------------------------------------------------- helpers


def write(dest: Path, root: Path | None = None, k8s=False, **fields) -> Path:
    workspace = load_workspace(root)
    write_bundle(plan(parse_request({**FLAGSHIP, **fields}), workspace), workspace, dest, k8s=k8s)
    return dest


def contents(bundle: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(bundle).as_posix(): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
            for p in sorted(bundle.rglob("*")) if p.is_file()}


def catalog_copy(dest: Path) -> Path:
    for name in ("recipes", "models", "targets", "kernels"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name)
    return dest


def edit_recipe(root: Path, rid: str, change) -> None:
    path = root / "recipes" / rid / "recipe.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


def pristine_tree() -> Path:
    from optkit.tree.fetch import fetch

    return fetch("0.23.0").path


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        message = f"{tool} is not installed (apt-get install {tool})"
        pytest.fail(message) if CI else pytest.skip(message)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def flagship(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("flagship") / "bundle", k8s=True)


def _add_config_key(lock):
    """A key the plan would refuse (knob-missing), written into the lock by hand: bundle check still finds it."""
    lock["launch"]["additional_config"]["multistream_overlap_shared_expret"] = True
    lock["launch"]["sources"]["additional_config.multistream_overlap_shared_expret"] = EDITED


def _add_env(lock):
    lock["launch"]["env"].append({"name": "VLLM_ASCEND_NO_SUCH_SWITCH", "value": "1", "recipe": EDITED, "external": False})


def _small_capture_sizes(recipe):
    recipe["compilation_config"]["cudagraph_capture_sizes"] = [1, 2, 4, 8]


def _bad_serve_arg(recipe):
    recipe["serve_args"] = ["--no-such-flag"]


EDITS = {"capture-sizes": _small_capture_sizes, "serve-arg": _bad_serve_arg}
LOCK_EDITS = {"config-key": _add_config_key, "env": _add_env}


@pytest.fixture(scope="session")
def edited(tmp_path_factory) -> dict[str, Path]:
    """One bundle per negative case, each from a catalog copy with one recipe edited."""
    bundles = {}
    for name, change in EDITS.items():
        base = tmp_path_factory.mktemp(name)
        root = catalog_copy(base / "catalog")
        edit_recipe(root, EDITED, change)
        bundles[name] = write(base / "bundle", root)
    for name, change in LOCK_EDITS.items():
        bundle = write(tmp_path_factory.mktemp(name) / "bundle")
        lock = read_lock(bundle)
        change(lock)
        (bundle / "optkit.lock.json").write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
        bundles[name] = bundle
    return bundles


def _rounding_request(sizes: list[int]) -> dict:
    config = json.dumps({"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": sizes})
    argv = ["model", "--tensor-parallel-size", "2", "--compilation-config", config,
            "--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 4})]
    return {"argv": argv, "labels": ["optkit", "request", "request", "sizes", "sizes", "request", "request"]}


@pytest.fixture(scope="session")
def vllm_results(flagship, edited) -> dict[str, dict]:
    """vLLM's verdict on every argv these tests need, from ONE probe subprocess."""
    requests = {"flagship": probe_request(read_lock(flagship))}
    requests.update({name: probe_request(read_lock(bundle)) for name, bundle in edited.items()})
    requests["round-default"] = _rounding_request([1, 2, 4, 5, 8])
    requests["round-article"] = _rounding_request([5, 20, 40])
    results = dict(zip(requests, run_probe({"batch": list(requests.values())})["results"]))
    if results["flagship"]["status"] == "skipped":
        reason = results["flagship"]["reason"] + " (pip install -r tests/requirements-vllm-0.23.txt; " \
                                                 "pip install --no-deps vllm==0.23.0)"
        pytest.fail(reason) if CI else pytest.skip(reason)
    return results


# --------------------------------------------------------------------------- determinism


def test_flagship_is_byte_identical_when_written_twice(flagship, tmp_path):
    again = write(tmp_path / "again", k8s=True)
    assert contents(again) == contents(flagship)


def test_rewriting_a_bundle_in_place_gives_the_same_bytes(flagship, tmp_path):
    target = tmp_path / "b"
    shutil.copytree(flagship, target)
    write(target, k8s=True)
    assert contents(target) == contents(flagship)
    assert [p.name for p in tmp_path.iterdir()] == ["b"]  # no temporary directory left behind


def test_from_lock_reproduces_the_bundle_byte_for_byte(flagship, tmp_path):
    result = CliRunner().invoke(cli, ["plan", "--from-lock", str(flagship / "optkit.lock.json"), "-o", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert contents(tmp_path / "b") == contents(flagship)


def test_from_lock_refuses_a_changed_catalog(flagship, tmp_path):
    root = catalog_copy(tmp_path / "catalog")
    edit_recipe(root, EDITED, lambda r: r.update(title=r["title"] + " (edited)"))
    with pytest.raises(BundleWriteError, match="recipe catalog .* changed since the lock was written"):
        request_from_lock(flagship / "optkit.lock.json", load_workspace(root))


def test_from_lock_takes_no_request_flags(flagship):
    result = CliRunner().invoke(cli, ["plan", "--from-lock", str(flagship / "optkit.lock.json"), "--tp", "4"])
    assert result.exit_code == 2
    assert "--from-lock takes the request and the --catalog folders from the lock" in result.output.replace("\n", " ")


def test_no_machine_paths_or_host_name_in_any_file(flagship):
    forbidden = [str(flagship), str(flagship.parent), "/root", "/tmp", "/home", str(Path.home())]
    host = socket.gethostname()
    if len(host) >= 4:  # a very short host name ('vm') is a substring of ordinary words
        forbidden.append(host)
    for rel, (data, _) in contents(flagship).items():
        text = data.decode("utf-8")
        for word in forbidden:
            assert word not in text, f"{rel} contains {word!r}"


@pytest.mark.parametrize("occupant, message", [
    ("file.txt", "is not empty and is not an optkit bundle"),
    ("results", "also holds results, which rewriting it would delete"),
], ids=["foreign-directory", "bundle-with-results"])
def test_write_refuses_a_directory_it_would_clobber(flagship, tmp_path, occupant, message):
    target = tmp_path / "b"
    if occupant == "results":
        shutil.copytree(flagship, target)
    (target / occupant).mkdir(parents=True)
    with pytest.raises(BundleWriteError, match=message):
        write(target)


# --------------------------------------------------------------------------- lock contract


def test_lock_follows_the_bundle_contract(flagship):
    lock = read_lock(flagship)
    assert lock["lock_version"] == 1
    assert set(lock) >= {"optkit", "request", "facts", "selected", "recipes", "decisions", "patches", "launch", "versions"}
    assert len(lock["optkit"]["catalog_sha256"]) == 64
    assert list(lock["recipes"]) == sorted(lock["selected"]) and set(lock["recipes"]) == set(lock["selected"])
    assert lock["versions"] == {"vllm_ascend": "0.23.0", "vllm": "0.23.0"}
    text = (flagship / "optkit.lock.json").read_text(encoding="utf-8")
    assert text == json.dumps(lock, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    series = (flagship / "patches" / "series").read_text().split()
    assert series == [p["name"] for p in lock["patches"]]
    pending = {(p["recipe"], p["file"]) for p in lock["pending_patches"]}
    catalog = load_workspace().catalog
    declared = {(rid, p.file) for rid in lock["selected"] for p in catalog[rid].patches if p.status == "pending"}
    assert pending == declared


def test_launch_argv_in_the_lock_is_what_serve_sh_runs(flagship):
    lock = read_lock(flagship)
    assert serve_sh_argv((flagship / "serve.sh").read_text()) == lock["launch"]["argv"]
    assert lock["launch"]["argv"][:3] == ["vllm", "serve", "$MODEL"]
    assert len(lock["launch"]["argv_sources"]) == len(lock["launch"]["argv"])


def test_env_sh_names_the_recipe_of_every_variable(flagship):
    lock = read_lock(flagship)
    lines = [line for line in (flagship / "env.sh").read_text().splitlines() if line.startswith("export ")]
    assert len(lines) == len(lock["launch"]["env"])
    for line, entry in zip(lines, lock["launch"]["env"]):
        assert line.startswith(f"export {entry['name']}=")
        assert f"# {entry['recipe']}" in line


# --------------------------------------------------------------------------- scripts


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_passes_bash_n_and_shellcheck(flagship, script):
    subprocess.run(["bash", "-n", script], cwd=flagship, check=True)
    need("shellcheck")
    proc = subprocess.run(["shellcheck", "-x", script], cwd=flagship, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


RECORDER = """#!{python}
import json, os, sys
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "hccl": os.environ.get("HCCL_OP_EXPANSION_MODE")}}) + "\\n")
"""


def record_serve(bundle: Path, tmp_path: Path, args: list[str], env: dict | None = None) -> tuple[int, list[dict], str]:
    """Run serve.sh with a `vllm` on PATH that records its argv; returns (exit code, records, stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "vllm").write_text(RECORDER.format(python=sys.executable))
    (bin_dir / "vllm").chmod(0o755)
    record = tmp_path / "record.jsonl"
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    full_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(record), **(env or {})}
    proc = subprocess.run(["bash", str(bundle / "serve.sh"), *args], cwd=work, env=full_env,
                          capture_output=True, text=True, timeout=60)
    records = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return proc.returncode, records, proc.stderr


HOSTILE_MODEL = "$(touch pwned-model) ; touch pwned-model2"
HOSTILE_NAME = "x'; touch pwned-name; echo '\"`touch pwned-tick`\""
HOSTILE_EXTRA = ["--max-model-len", "4096", "a b; rm -rf /", "$(touch pwned-extra)", "'\"", "*"]


@pytest.mark.parametrize("how", ["options", "environment"])
def test_serve_passes_hostile_values_as_plain_arguments(flagship, tmp_path, how):
    lock = read_lock(flagship)
    if how == "options":
        args = ["--model", HOSTILE_MODEL, "--served-model-name", HOSTILE_NAME, "--port", "8123", "--", *HOSTILE_EXTRA]
        code, records, stderr = record_serve(flagship, tmp_path, args)
    else:
        env = {"MODEL": HOSTILE_MODEL, "SERVED_NAME": HOSTILE_NAME, "PORT": "8123"}
        code, records, stderr = record_serve(flagship, tmp_path, ["--", *HOSTILE_EXTRA], env)
    assert code == 0, stderr
    expected = ["serve", HOSTILE_MODEL, "--served-model-name", HOSTILE_NAME, "--port", "8123",
                *lock["launch"]["argv"][7:], *HOSTILE_EXTRA]
    assert records == [{"argv": expected, "hccl": "AIV"}]
    created = [p.name for d in (tmp_path, tmp_path / "work", flagship) for p in d.iterdir() if "pwned" in p.name]
    assert created == []


def test_serve_defaults_come_from_the_model_profile(flagship, tmp_path):
    code, records, stderr = record_serve(flagship, tmp_path, [])
    assert code == 0, stderr
    assert records[0]["argv"][:6] == ["serve", "Qwen/Qwen3.5-35B-A3B", "--served-model-name", "qwen3.5-35b-a3b",
                                      "--port", "8000"]


@pytest.mark.parametrize("args, message", [
    (["--port", "80; rm -rf /"], "--port must be a number"),
    (["--model", "--no-such-flag"], "the model must not start with '-'"),
    (["--model"], "--model needs a value"),
    (["--tensor-parallel-size", "4"], "unknown option: --tensor-parallel-size"),
], ids=["port-not-a-number", "model-looks-like-an-option", "missing-value", "unknown-option"])
def test_serve_refuses_bad_parameters(flagship, tmp_path, args, message):
    code, records, stderr = record_serve(flagship, tmp_path, args)
    assert code == 2 and records == []
    assert message in stderr


@pytest.mark.parametrize("soc, code, message", [
    ("ascend910_93", 2, "'ascend910_93' is only the family name"),
    ("ascend910b1", 2, "is not a full SoC name of this target"),
], ids=["family-name", "other-target"])
def test_build_kernels_refuses_soc_names_that_setup_py_rejects(flagship, soc, code, message):
    proc = subprocess.run(["bash", "build-kernels.sh", "/nonexistent"], cwd=flagship, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "SOC_VERSION": soc})
    assert proc.returncode == code and message in proc.stderr


def test_build_kernels_names_the_kernel_specs_and_default_soc(flagship):
    lock = read_lock(flagship)
    text = (flagship / "build-kernels.sh").read_text()
    assert 'SOC_VERSION="${SOC_VERSION:-ascend910_9391}"' in text
    assert "COMPILE_CUSTOM_KERNELS=1" in text and "python3 setup.py build_ext --inplace" in text
    assert "~41 ops" in text
    for kernel in lock["kernels"]:
        assert f"kernels/{kernel['spec']}/kernel.yaml  (recipe {kernel['recipe']})" in text


def test_no_build_script_without_kernel_recipes(tmp_path):
    lock_dir = write(tmp_path / "b", mtp=False, without=["op-matmul-allreduce-add-rmsnorm-910c", "static-kernel-compile-fixes",
                                                         "compile-super-kernel"])
    if read_lock(lock_dir)["kernels"]:
        pytest.skip("another selected recipe still has kernels")
    assert not (lock_dir / "build-kernels.sh").exists()


def test_bench_runs_each_requested_concurrency(flagship):
    text = (flagship / "bench.sh").read_text()
    assert [line for line in text.splitlines() if line.startswith("run ")] == ["run 1 20", "run 4 40", "run 8 80"]
    for flag in ("--dataset-name random", "--random-input-len 1024", "--random-output-len 512", "--ignore-eos",
                 "--save-result", "--result-dir \"$RESULT_DIR\"", "--result-filename \"c$1.json\""):
        assert flag in text


@pytest.fixture(scope="module")
def no_hf_id(tmp_path_factory) -> Path:
    """A bundle for a model profile without a Hugging Face id (so MODEL has no default)."""
    base = tmp_path_factory.mktemp("no-hf-id")
    root = catalog_copy(base / "catalog")
    profile = root / "models" / "qwen3.5-35b-a3b.yaml"
    data = yaml.safe_load(profile.read_text(encoding="utf-8"))
    data.pop("hf_id")
    profile.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return write(base / "bundle", root)


@pytest.mark.parametrize("script, message", [
    ("serve.sh", "serve.sh: no model: pass --model PATH_OR_HF_ID"),
    ("bench.sh", "bench.sh: set MODEL"),
])
def test_without_a_hf_id_the_scripts_ask_for_a_model(no_hf_id, script, message):
    proc = subprocess.run(["bash", str(no_hf_id / script)], cwd=no_hf_id, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- templates: the quoting rule

TEMPLATES = Path(optkit.bundle.__file__).parent / "templates"
SHELL_TEMPLATES = sorted(TEMPLATES.rglob("*.sh.j2"))  # the ladder's run-ladder.sh too (templates/ladder/)
YAML_TEMPLATES = sorted(TEMPLATES.rglob("*.yaml.j2"))
MARK = "\0"


def printed_expressions(template: Path) -> list[jinja2.nodes.Expr]:
    """Every expression a template prints (``{{ … }}``), in order, from Jinja's own parse of it."""
    tree = environment().parse(template.read_text(encoding="utf-8"))
    return [node for output in tree.find_all(jinja2.nodes.Output) for node in output.nodes
            if not isinstance(node, jinja2.nodes.TemplateData)]


def sh_form(node: jinja2.nodes.Expr) -> str | None:
    """'word' for ``… | sh``, 'bare' for ``… | sh(bare=True)``, None for anything else."""
    if not isinstance(node, jinja2.nodes.Filter) or node.name != "sh" or node.args or node.dyn_args or node.dyn_kwargs:
        return None
    if not node.kwargs:
        return "word"
    (bare,) = node.kwargs
    return "bare" if bare.key == "bare" and isinstance(bare.value, jinja2.nodes.Const) and bare.value.value is True else None


def shell_contexts(text: str) -> list[str]:
    """Where each MARK in shell text sits: 'word', 'quoted' (inside '…' or "…") or 'comment'.

    A small lexer for the shell these templates use: quotes, backslashes, comments, ``$( )``
    (nested in double quotes too), here-strings (``<<<``) and heredocs with a quoted delimiter
    (``<<'END'``: the body is literal, like '…'). Other heredocs and backquotes are refused, so a
    template that starts using them fails this check until the lexer understands them."""
    frames, found, i, heredocs = [["word", 0]], [], 0, []
    while i < len(text):
        c, (kind, depth) = text[i], frames[-1]
        heredoc = re.match(r"<<'(\w+)'", text[i:]) if kind == "word" else None
        if c == "\n" and heredocs and kind in ("word", "comment"):  # the bodies start on the next line
            if kind == "comment":
                frames.pop()
            for tag in heredocs:
                end = text.index(f"\n{tag}\n", i) + 1
                found += ["quoted"] * text.count(MARK, i, end)
                i = end + len(tag)
            heredocs = []
            continue
        if c == MARK:
            found.append({"word": "word", "squote": "quoted", "dquote": "quoted", "comment": "comment"}[kind])
        elif kind == "comment":
            if c == "\n":
                frames.pop()
        elif kind == "squote":
            if c == "'":
                frames.pop()
        elif heredoc:
            heredocs.append(heredoc.group(1))
            i += len(heredoc.group(0))
            continue
        elif kind == "word" and text.startswith("<<<", i):
            i += 2
        elif c == "`" or (kind == "word" and text.startswith("<<", i)):
            raise AssertionError(f"the quoting check does not understand {text[i:i + 2]!r} at offset {i}")
        elif c == "\\":
            i += 1
        elif text.startswith("$(", i):
            frames.append(["word", 0])
            i += 1
        elif kind == "dquote":
            if c == '"':
                frames.pop()
        elif c in "'\"":
            frames.append(["squote" if c == "'" else "dquote", 0])
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;&|("):
            frames.append(["comment", 0])
        elif c == "(":
            frames[-1][1] += 1
        elif c == ")" and len(frames) > 1:
            if depth == 0:
                frames.pop()
            else:
                frames[-1][1] -= 1
        i += 1
    return found


def marked_text(template: Path) -> str:
    """The template's text with every ``{{ … }}`` replaced by MARK and every tag and comment dropped."""
    text = re.sub(r"\{\{.*?\}\}", MARK, template.read_text(encoding="utf-8"))
    return re.sub(r"\{##.*?##\}\n?|\{%.*?%\}\n?", "", text, flags=re.S)


def test_every_script_has_a_shell_template():
    assert {t.name for t in SHELL_TEMPLATES} == {f"{s}.j2" for s in SCRIPTS} | {
        "_header.sh.j2", "_network.sh.j2", "run-ladder.sh.j2", "run-tune.sh.j2", "proxy.sh.j2"}  # pd/serve.sh.j2 is a serve.sh.j2


@pytest.mark.parametrize("template", SHELL_TEMPLATES, ids=lambda t: t.name)
def test_shell_templates_print_values_only_through_sh(template):
    """The rule of optkit.bundle.render: every {{ … }} of a shell template is `… | sh` where the
    value stands as a shell word and `… | sh(bare=True)` inside "…", '…' or a comment, with no
    exception (constants are template text)."""
    forms = [sh_form(node) for node in printed_expressions(template)]
    assert None not in forms, f"{template.name}: value {forms.index(None)} is printed without the sh filter"
    contexts = shell_contexts(marked_text(template))
    assert len(contexts) == len(forms)
    wrong = [i for i, (form, where) in enumerate(zip(forms, contexts)) if form == "word" and where != "word"]
    assert wrong == [], f"{template.name}: values {wrong} are quoted as words but sit inside quotes or a comment"


@pytest.mark.parametrize("template", YAML_TEMPLATES, ids=lambda t: t.name)
def test_the_k8s_templates_print_values_only_through_yaml(template):
    """Each value of a manifest is one YAML scalar of its own (optkit.bundle.render.yaml_scalar)."""
    assert {t.name for t in YAML_TEMPLATES} == {"deployment.yaml.j2", "service.yaml.j2", "ladder-job.yaml.j2",
                                                "leaderworkerset.yaml.j2", "_pod.yaml.j2", "configmap.yaml.j2",
                                                "pd-role.yaml.j2", "pd-proxy.yaml.j2", "pd-configmap.yaml.j2",
                                                "tune-job.yaml.j2"}
    nodes = printed_expressions(template)
    assert nodes and all(isinstance(n, jinja2.nodes.Filter) and n.name == "yaml" and not n.args for n in nodes)


@pytest.mark.parametrize("text, contexts", [
    ('a \0 "x \0" \'\0\' # \0\n\0', ["word", "quoted", "quoted", "comment", "word"]),
    ('A="$(cd "$(dirname "\0")" && pwd)" \0', ["quoted", "word"]),
    ('echo ${#A[@]} \0 "\\"\0" (\0)', ["word", "quoted", "word"]),
    ("X='it''\0' \"'\0'\"", ["quoted", "quoted"]),
    ("A=\"$(python3 - \"\0\" <<'PY' \0\nprint('\0 \"x\"')\nPY\n)\" \0", ["quoted", "word", "quoted", "word"]),
    ("read -r A <<<\"$B\" \0", ["word"]),
], ids=["quotes-and-comment", "nested-substitution", "not-a-comment", "quotes-inside-quotes", "quoted-heredoc",
        "here-string"])
def test_the_quoting_check_knows_shell_contexts(text, contexts):
    assert shell_contexts(text) == contexts


@pytest.mark.parametrize("value, bare, expected", [
    ("Qwen/Qwen3.5-35B-A3B", False, "Qwen/Qwen3.5-35B-A3B"),
    ("a b", False, "'a b'"),
    ("it's $(x)", False, "'it'\"'\"'s $(x)'"),
    ("", False, "''"),
    (["--temperature", "0", '{"a": 1}'], False, "--temperature 0 '{\"a\": 1}'"),
    (ShellVar("PORT"), False, '"$PORT"'),
    (8, False, "8"),
    ("9.0.1", True, "9.0.1"),
    ("", True, ""),
    (["ascend910_9391", "ascend910_9381"], True, "ascend910_9391 ascend910_9381"),
], ids=["plain", "space", "quote-and-substitution", "empty", "list", "variable", "int", "bare", "bare-empty",
        "bare-list"])
def test_sh_filter(value, bare, expected):
    template = environment().from_string("{{ value | sh(bare=True) }}" if bare else "{{ value | sh }}")
    assert template.render(value=value) == expected


@pytest.mark.parametrize("value, bare, error", [
    ("a b", True, BundleWriteError),
    ("x\nrm -rf /", True, BundleWriteError),
    ("$(touch pwned)", True, BundleWriteError),
    (True, False, InternalError),
    (None, False, InternalError),
    (ShellVar("PORT"), True, InternalError),
], ids=["bare-space", "bare-newline", "bare-substitution", "bool", "none", "bare-variable"])
def test_sh_filter_refuses(value, bare, error):
    template = environment().from_string("{{ value | sh(bare=True) }}" if bare else "{{ value | sh }}")
    with pytest.raises(error):
        template.render(value=value)


@pytest.mark.parametrize("value", ["x", "1", "", "a'b", "a\nb", "yes", "null", "~", "#x", "a: b", "- x", "*x", "&x",
                                   "!x", "%x", "@x", "`x", "--- x", "... x", " lead", "trail ", "é", '{"a":1}', 8])
def test_yaml_filter_writes_one_scalar_on_one_line(value):
    text = yaml_scalar(value)
    assert "\n" not in text
    assert yaml.safe_load(f"k:\n- {text}\nm:\n  n: {text}\n") == {"k": [value], "m": {"n": value}}


HOSTILE_ENV = "AIV'; touch pwned-env; echo '\n$(touch pwned-env2) \"`touch pwned-env3`\""


@pytest.fixture(scope="module")
def hostile_env(tmp_path_factory) -> Path:
    """A bundle whose HCCL_OP_EXPANSION_MODE value (recipe waterfall-hccl-aiv) is hostile."""
    base = tmp_path_factory.mktemp("hostile-env")
    root = catalog_copy(base / "catalog")
    edit_recipe(root, "waterfall-hccl-aiv", lambda r: r["env"][0].update(value=HOSTILE_ENV))
    return write(base / "bundle", root, k8s=True)


def test_env_sh_exports_a_hostile_value_unchanged(hostile_env):
    proc = subprocess.run(["bash", "-c", '. ./env.sh && printf %s "$HCCL_OP_EXPANSION_MODE"'], cwd=hostile_env,
                          capture_output=True, text=True, check=True)
    assert proc.stdout == HOSTILE_ENV
    assert [p.name for p in hostile_env.iterdir() if "pwned" in p.name] == []


def test_k8s_deployment_carries_a_hostile_value_unchanged(hostile_env):
    deployment = yaml.safe_load((hostile_env / "k8s" / "deployment.yaml").read_text())
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HCCL_OP_EXPANSION_MODE", "value": HOSTILE_ENV} in env


def test_a_value_that_cannot_be_written_bare_refuses_the_bundle(tmp_path):
    root = catalog_copy(tmp_path / "catalog")
    target = root / "targets" / "910c.yaml"
    data = yaml.safe_load(target.read_text(encoding="utf-8"))
    data["soc_family"] = "ascend910_93'; touch pwned; '"
    target.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    with pytest.raises(BundleWriteError) as failure:
        write(tmp_path / "b", root)
    assert str(failure.value) == (
        "build-kernels.sh: \"ascend910_93'; touch pwned; '\" cannot be written into the script: it goes inside "
        "quotes or a comment there, where only letters, digits and _@%+=:,./- are safe; rename it in its profile "
        "or recipe")
    assert not (tmp_path / "b").exists()


def test_jinja2_is_imported_only_to_write_a_bundle(tmp_path):
    code = ("import sys; from optkit.cli.main import cli\n"
            "cli(sys.argv[1:], standalone_mode=False)\n"
            "print('JINJA2', 'jinja2' in sys.modules)")
    imported = {}
    for case, output in (("plan", []), ("plan -o", ["-o", str(tmp_path / "b")])):
        proc = subprocess.run([sys.executable, "-c", code, "plan", "qwen3.5-35b", "--mtp", *output],
                              capture_output=True, text=True, check=True, cwd=tmp_path)
        imported[case] = "JINJA2 True" in proc.stdout
    assert imported == {"plan": False, "plan -o": True}


# --------------------------------------------------------------------------- preflight


FAKE_NPU_SMI = """#!/bin/sh
echo "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
echo "| 0     {chip}            | OK            | 176.5       39                0    / 0             |"
"""


def run_preflight(bundle: Path, tmp_path: Path, chip: str, applied: bool = True, cann: str = "9.1.0",
                  versions: tuple[str, str] = ("0.23.0", "0.23.0")) -> subprocess.CompletedProcess:
    bin_dir, site, toolkit, tree = (tmp_path / d for d in ("bin", "site", "toolkit", "tree"))
    bin_dir.mkdir()
    (bin_dir / "npu-smi").write_text(FAKE_NPU_SMI.format(chip=chip))
    (bin_dir / "npu-smi").chmod(0o755)
    for dist, version in (("vllm", versions[0]), ("vllm_ascend", versions[1]), ("torch_npu", "2.10.0.post4")):
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (toolkit / "x86_64-linux").mkdir(parents=True)
    (toolkit / "x86_64-linux" / "ascend_toolkit_install.info").write_text(f"package_name=Ascend-cann-toolkit\nversion={cann}\n")
    (tree / "vllm_ascend").mkdir(parents=True)
    if applied:  # what `optkit apply` records in the tree
        (tree / ".optkit").mkdir()
        names = [{"name": p["name"]} for p in read_lock(bundle)["patches"]]
        (tree / ".optkit" / "state.json").write_text(json.dumps({"patches": names}))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": sys.executable, "PYTHONPATH": str(site),
           "ASCEND_TOOLKIT_HOME": str(toolkit), "ASCEND_RT_VISIBLE_DEVICES": "0,1", "VLLM_ASCEND_TREE": str(tree)}
    return subprocess.run(["bash", str(bundle / "preflight.sh")], env=env, capture_output=True, text=True, timeout=120)


def test_preflight_passes_on_a_matching_host(flagship, tmp_path):
    proc = run_preflight(flagship, tmp_path, "Ascend910")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in ("PASS  chip:", "PASS  devices: 2 visible, TP2 DP1 needs 2", "PASS  CANN: 9.1.0 (>= 9.1.0)",
                 "PASS  vllm_ascend: 0.23.0", "PASS  vllm: 0.23.0", "PASS  torch_npu: 2.10.0.post4"):
        assert line in proc.stdout
    assert "FAIL" not in proc.stdout


@pytest.mark.parametrize("version, vllm, host_cann, line", [
    pytest.param("0.23.0", "0.23.0", "9.0.1", "FAIL  CANN: 9.0.1 is older than 9.1.0, which vllm-ascend 0.23.0 needs",
                 id="0.23.0-needs-9.1.0-as-its-op-package"),
    pytest.param("0.23.0.post1", "0.23.0", "9.1.0", "PASS  CANN: 9.1.0 (>= 9.1.0)", id="0.23.0.post1-has-a-minimum"),
    pytest.param("0.30.0rc2", "0.30.0", "9.1.0", "FAIL  CANN: 9.1.0 is older than 9.2.0, which vllm-ascend 0.30.0rc2 needs",
                 id="0.30.0rc2-needs-its-image-cann"),
    pytest.param("0.18.0", "0.18.0", "8.5.1", "PASS  CANN: 8.5.1 (>= 8.5.1)", id="0.18.0"),
])
def test_preflight_checks_the_release_cann_minimum(tmp_path, version, vllm, host_cann, line):
    """preflight.sh's CANN floor is the release's own (versions/<version>.yaml), for every release."""
    bundle = write(tmp_path / "bundle", vllm_ascend_version=version)
    (tmp_path / "host").mkdir()
    proc = run_preflight(bundle, tmp_path / "host", "Ascend910", cann=host_cann, versions=(vllm, version))
    assert line in proc.stdout, proc.stdout


def test_preflight_fails_when_patches_are_not_applied(flagship, tmp_path):
    proc = run_preflight(flagship, tmp_path, "Ascend910", applied=False)
    assert proc.returncode == 1
    first = read_lock(flagship)["patches"][0]["name"]
    assert f"FAIL  patch {first} is not applied to" in proc.stdout


def test_preflight_fails_on_another_chip(flagship, tmp_path):
    proc = run_preflight(flagship, tmp_path, "910B3")
    assert proc.returncode == 1
    assert "FAIL  chip: npu-smi info does not show a Ascend 910C" in proc.stdout


HOST_SETTINGS = {"host-cpu-governor-performance": "cpu governor", "host-numa-balancing-off": "kernel.numa_balancing",
                 "host-sched-migration-cost": "kernel.sched_migration_cost_ns", "host-swappiness-zero": "vm.swappiness"}


def _host_line(stdout: str, name: str) -> str:
    return next(line for line in stdout.splitlines() if line[6:].startswith(name + ":"))


def test_preflight_advises_the_host_recipes_a_plan_left_out(flagship, tmp_path):
    """Host recipes are opt-in: a plan without them still has preflight.sh check their settings, as WARNs
    that name the recipe (or PASS where this host already has the setting)."""
    stdout = run_preflight(flagship, tmp_path, "Ascend910").stdout
    for rid, name in HOST_SETTINGS.items():
        line = _host_line(stdout, name)
        assert line.startswith("PASS") or (line.startswith("WARN") and f"recipe {rid}: plan --with {rid}" in line), line
    assert "jemalloc library" not in stdout  # an env recipe's check runs only when it is selected


def test_preflight_requires_the_host_settings_of_selected_recipes(tmp_path):
    bundle = write(tmp_path / "bundle", with_recipes=["host-jemalloc-preload", "host-swappiness-zero"])
    (tmp_path / "host").mkdir()
    stdout = run_preflight(bundle, tmp_path / "host", "Ascend910").stdout
    library = Path("/usr/lib/aarch64-linux-gnu/libjemalloc.so.2")
    line = _host_line(stdout, "jemalloc library")
    if library.exists():
        assert line == f"PASS  jemalloc library: {library} present"
    else:
        assert line == (f"FAIL  jemalloc library: missing (recipe host-jemalloc-preload, selected, wants {library}; "
                        "as root: sudo apt install libjemalloc2)")
    swappiness = Path("/proc/sys/vm/swappiness").read_text().strip()
    line = _host_line(stdout, "vm.swappiness")
    assert line == ("PASS  vm.swappiness: 0" if swappiness == "0" else
                    f"FAIL  vm.swappiness: {swappiness} (recipe host-swappiness-zero, selected, wants 0; "
                    "as root: sysctl -w vm.swappiness=0)")
    env = (bundle / "env.sh").read_text()
    assert "export LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2  # host-jemalloc-preload" in env


# --------------------------------------------------------------------------- README, expected.json, k8s


def test_readme_explains_recipes_verification_and_exclusions(flagship):
    text = (flagship / "README.md").read_text()
    lock = read_lock(flagship)
    for rid, entry in lock["recipes"].items():
        assert f"### {rid} — " in text
        if entry["verification"] != "hardware-verified":
            assert f"**Verification: {entry['verification']} — NOT hardware-verified.**" in text
    for rid, decision in lock["decisions"].items():
        if decision["status"] != "selected":
            assert f"- **{rid}** ({decision['status']}): " in text
    assert "optkit revert --tree TREE" in text and "git apply -R" in text


def test_expected_json_quotes_the_article_and_labels_estimates(flagship):
    data = json.loads((flagship / "expected.json").read_text())
    assert "ESTIMATES" in data["label"] and "ESTIMATE" in data["estimate"]["label"]
    gains = data["recipes"][EDITED]["gains"]
    assert {(g["concurrency"], g["before"], g["after"]) for g in gains} >= {(4, 42.2, 10.4), (8, 42.9, 13.5)}
    assert all(g["quote"] for g in gains)


@pytest.mark.parametrize("target, plugin, resource", [
    ("910c", None, "huawei.com/Ascend910"), ("910c", "cce", "huawei.com/ascend-1980"),
    ("910b", "mindcluster", "huawei.com/Ascend910"), ("910b", "cce", "huawei.com/ascend-1980"),
    ("300i-duo", None, "huawei.com/Ascend310P"), ("300i-duo", "cce", "huawei.com/ascend-310"),
    ("950", "cce", "huawei.com/npu"),
], ids=["910c-default", "910c-cce", "910b-mindcluster", "910b-cce", "300i-duo-default", "300i-duo-cce", "950-cce"])
def test_k8s_deployment_requests_ascend_devices(tmp_path, target, plugin, resource):
    options = K8sOptions(device_plugin=plugin) if plugin else True
    bundle = write(tmp_path / "b", target=target, k8s=options, mtp=target != "300i-duo")  # see docs/targets.md
    deployment = yaml.safe_load((bundle / "k8s" / "deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {resource: 2}
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["command"] == ["vllm", "serve"]
    assert [e["name"] for e in container["env"]] == [e["name"] for e in read_lock(bundle)["launch"]["env"]] + ["HF_HOME"]


def test_k8s_on_a5_with_mindcluster_is_refused(tmp_path):
    with pytest.raises(BundleError, match="--k8s-device-plugin mindcluster: no public source names its resource "
                                          "for A5 NPUs; use --k8s-device-plugin cce"):
        write(tmp_path / "b", target="950", k8s=True)


K8S_PLANS = [
    pytest.param(dict(), True, id="flagship"),
    pytest.param(dict(model="qwen3.6-27b"), K8sOptions(replicas=4), id="qwen3.6-4-replicas"),
    pytest.param(dict(target="910b", mtp=False), K8sOptions(device_plugin="cce"), id="910b-cce"),
    pytest.param(dict(tp=8, dp=2), True, id="tp8-dp2"),
    pytest.param(dict(enforce_eager=True), True, id="eager"),
]


@pytest.mark.parametrize("fields, options", K8S_PLANS)
def test_every_manifest_is_valid_for_kubernetes(tmp_path, fields, options):
    """Each generated manifest passes the real Kubernetes schema (strict: an unknown field fails)."""
    bundle = write(tmp_path / "b", k8s=options, **fields)
    assert [kind for name in ("deployment", "service") for kind in validate_file(bundle / "k8s" / f"{name}.yaml")] == [
        "Deployment", "Service"]


@pytest.mark.parametrize("fields, options", K8S_PLANS)
def test_the_pod_has_what_a_910c_pod_needs(tmp_path, fields, options):
    bundle = write(tmp_path / "b", k8s=options, **fields)
    options = K8sOptions() if options is True else options
    deployment = yaml.safe_load((bundle / "k8s" / "deployment.yaml").read_text())
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    devices = fields.get("tp", 2) * fields.get("dp", 1)
    assert deployment["spec"]["replicas"] == options.replicas
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{2 * devices}Gi"}
    assert "persistentVolumeClaim" in volumes["model-weights"]
    assert {m["mountPath"]: m["name"] for m in container["volumeMounts"]} == {
        "/var/cache/huggingface": "model-weights", "/dev/shm": "dshm"}
    assert {"name": "HF_HOME", "value": "/var/cache/huggingface"} in container["env"]
    static = "waterfall-static-kernel" in read_lock(bundle)["selected"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] == (3600 if static else 1200)
    service = yaml.safe_load((bundle / "k8s" / "service.yaml").read_text())
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_k8s_options_survive_from_lock(tmp_path):
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--mtp", "-o", str(tmp_path / "a"), "--k8s",
                                      "--replicas", "3", "--k8s-device-plugin", "cce"])
    assert result.exit_code == 0, result.output
    again = CliRunner().invoke(cli, ["plan", "--from-lock", str(tmp_path / "a" / "optkit.lock.json"),
                                     "-o", str(tmp_path / "b")])
    assert again.exit_code == 0, again.output
    for name in ("deployment.yaml", "service.yaml"):
        assert (tmp_path / "a" / "k8s" / name).read_bytes() == (tmp_path / "b" / "k8s" / name).read_bytes()
    assert "replicas: 3" in (tmp_path / "b" / "k8s" / "deployment.yaml").read_text()
    alone = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--replicas", "2", "-o", str(tmp_path / "c")])
    assert alone.exit_code == 2 and "--replicas and --k8s-device-plugin go with --k8s" in alone.output


# --------------------------------------------------------------------------- bundle check: vLLM


@pytest.mark.vllm
def test_vllm_accepts_the_flagship_argv(flagship, vllm_results):
    check = check_vllm(read_lock(flagship), vllm_results["flagship"])
    assert check.status == "pass", check.problems
    assert vllm_results["flagship"]["capture_sizes"] == {"given": [5, 20, 40], "effective": [5, 20, 40]}


@pytest.mark.vllm
@pytest.mark.parametrize("case, effective", [("round-default", [5]), ("round-article", [5, 20, 40])])
def test_vllm_rounds_capture_sizes_to_multiples_of_1_plus_k(vllm_results, case, effective):
    """The seed map's A.5 simulation, now by vLLM 0.23.0's own method: [1,2,4,5,8] → [5]."""
    assert vllm_results[case]["capture_sizes"]["effective"] == effective


@pytest.mark.vllm
@pytest.mark.parametrize("case, message", [
    ("capture-sizes", f"recipe {EDITED}: vLLM 0.23.0 turns cudagraph_capture_sizes [1, 2, 4, 8] into [5] with 4 "
                      "speculative token(s)"),
    ("serve-arg", f"recipe {EDITED}: unrecognized arguments: --no-such-flag"),
], ids=["capture-sizes-rounded-away", "argument-vllm-rejects"])
def test_vllm_problems_name_the_recipe(edited, vllm_results, case, message):
    check = check_vllm(read_lock(edited[case]), vllm_results[case])
    assert check.status == "fail"
    assert [p for p in check.problems if p.startswith(message)], check.problems


@pytest.mark.vllm
def test_vllm_rounding_is_vllms_own_code():
    """The probe calls CompilationConfig.adjust_cudagraph_sizes_for_spec_decode; pin that the
    installed vLLM still applies it under a FULL decode mode with spec tokens (read, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None:
        pytest.fail("vLLM not installed") if CI else pytest.skip("vLLM 0.23.0 not installed")
    source = (Path(spec.submodule_search_locations[0]) / "config" / "compilation.py").read_text()
    assert "def adjust_cudagraph_sizes_for_spec_decode(" in source
    assert ("cudagraph_mode.decode_mode() == CUDAGraphMode.FULL\n            and uniform_decode_query_len > 1\n"
            "        ):\n            self.adjust_cudagraph_sizes_for_spec_decode(") in source
    assert "round_up(size, multiple_of) <= self.max_cudagraph_capture_size" in source


# --------------------------------------------------------------------------- bundle check: tree


@pytest.mark.tree
def test_config_keys_are_read_statically_from_the_tree():
    keys = tree_knobs(pristine_tree()).additional_config.keys
    assert {"multistream_overlap_shared_expert", "enable_fused_mc2", "ascend_compilation_config",
            "weight_prefetch_config", "enable_reduce_sample"} <= set(keys)
    assert set(keys["ascend_compilation_config"].keys) == {
        "enable_npugraph_ex", "enable_static_kernel", "fuse_norm_quant", "fuse_qknorm_rope", "fuse_allreduce_rms",
        "fuse_muls_add"}
    assert "enabled" in keys["weight_prefetch_config"].keys


@pytest.mark.tree
def test_unpatched_tree_does_not_know_enable_super_kernel(flagship):
    lock = read_lock(flagship)
    if "compile-super-kernel" not in lock["selected"]:
        pytest.skip("the flagship plan no longer selects compile-super-kernel")
    check = check_config_keys(lock, tree_knobs(pristine_tree()), [])
    assert any(p.startswith("recipe compile-super-kernel: --additional-config key "
                            "ascend_compilation_config.enable_super_kernel is not read by vllm-ascend 0.23.0")
               for p in check.problems), check.problems


@pytest.mark.tree
@pytest.mark.parametrize("case, check, message", [
    ("config-key", check_config_keys,
     f"recipe {EDITED}: --additional-config key 'multistream_overlap_shared_expret' is not read by vllm-ascend 0.23.0; "
     "did you mean 'multistream_overlap_shared_expert'?"),
    ("env", check_env,
     f"recipe {EDITED}: env var VLLM_ASCEND_NO_SUCH_SWITCH is not defined in vllm-ascend 0.23.0's vllm_ascend/envs.py "
     "and the recipe does not mark it external"),
], ids=["unknown-additional-config-key", "env-var-the-tree-does-not-define"])
def test_tree_problems_name_the_recipe(edited, case, check, message):
    lock = read_lock(edited[case])
    knobs = tree_knobs(pristine_tree())
    result = check(lock, knobs, []) if check is check_config_keys else check(lock, knobs)
    assert [p for p in result.problems if p.startswith(message)], result.problems


def test_external_env_vars_need_no_definition(flagship, tmp_path):
    tree = tmp_path / "tree" / "vllm_ascend"
    tree.mkdir(parents=True)
    (tree / "envs.py").write_text("env_variables = {'VLLM_ASCEND_ATTN_WEIGHT_PREFETCH': None,\n"
                                  "                 'VLLM_ASCEND_FUSED_O_PROJ_AR': None}\n")
    lock = read_lock(flagship)
    assert check_env(lock, tree_knobs(tmp_path / "tree")).problems == []


def test_shell_check_reports_a_syntax_error(flagship, tmp_path):
    bundle = tmp_path / "b"
    shutil.copytree(flagship, bundle)
    (bundle / "bench.sh").write_text("#!/usr/bin/env bash\nif then fi\n")
    check = check_scripts(bundle)
    assert check.status == "fail" and any(p.startswith("optkit: bench.sh: bash -n:") for p in check.problems)


# --------------------------------------------------------------------------- patches: lock, apply.sh, patched tree



@pytest.fixture
def pending_catalog(tmp_path) -> Path:
    """A catalog copy where compile-super-kernel's patch is declared but not written yet."""
    root = catalog_copy(tmp_path / "catalog")
    for patch in (root / "recipes" / "compile-super-kernel").glob("*.patch"):
        patch.unlink()

    def pending(recipe):
        recipe["patches"] = [{**p, "status": "pending"} for p in recipe["patches"]]
        recipe["verification"]["level"] = "declared"

    edit_recipe(root, "compile-super-kernel", pending)
    return root


@pytest.mark.tree
def test_real_patches_make_their_keys_and_variables_known(flagship):
    lock = read_lock(flagship)
    names = [p["name"] for p in lock["patches"]]
    assert names and (flagship / "patches" / "series").read_text().split() == names
    assert lock["pending_patches"] == []
    for entry in lock["patches"]:
        assert entry["sha256"] == hashlib.sha256((flagship / "patches" / entry["name"]).read_bytes()).hexdigest()
    assert [p.name for p in from_bundle(flagship)] == names  # optkit apply's loader accepts it
    report = check_bundle(flagship, use_vllm=False)
    for name in ("config-keys", "env", "launch", "scripts"):
        check = next(c for c in report.checks if c.name == name)
        assert check.problems == [], (name, check.problems)


@pytest.mark.tree
def test_apply_sh_applies_checks_versions_and_reverts(flagship, tmp_path):
    need("git")
    from compat_support import scratch_tree
    from optkit.tree.inspect import tree_checksum

    tree = scratch_tree(tmp_path)
    before = tree_checksum(tree)

    def apply_sh(*args):
        return subprocess.run(["bash", str(flagship / "apply.sh"), *args], capture_output=True, text=True, timeout=120)

    done = apply_sh(str(tree))
    assert done.returncode == 0, done.stderr
    assert "enable_super_kernel: bool = False" in (tree / "vllm_ascend" / "ascend_config.py").read_text()
    assert (tree / ".optkit" / "apply-sh.done").read_text().split() == [p["name"] for p in read_lock(flagship)["patches"]]
    assert apply_sh(str(tree)).returncode == 1  # already applied
    assert apply_sh("--revert", str(tree)).returncode == 0
    assert tree_checksum(tree) == before


def test_apply_sh_refuses_pending_patches(pending_catalog, tmp_path):
    bundle = write(tmp_path / "b", pending_catalog)
    assert {"recipe": "compile-super-kernel", "file": "0001-compile-super-kernel.patch"} in read_lock(bundle)["pending_patches"]
    tree = tmp_path / "tree" / "vllm_ascend"
    tree.mkdir(parents=True)
    (tree / "_version.py").write_text("__version__ = version = '0.23.0'\n")
    proc = subprocess.run(["bash", str(bundle / "apply.sh"), str(tree.parent)], capture_output=True, text=True)
    assert proc.returncode == 1 and "patches that are not written yet" in proc.stderr


def test_apply_sh_refuses_another_version(flagship, tmp_path):
    tree = tmp_path / "tree" / "vllm_ascend"
    tree.mkdir(parents=True)
    (tree / "_version.py").write_text("__version__ = version = '0.18.0'\n")
    proc = subprocess.run(["bash", str(flagship / "apply.sh"), "--allow-pending", str(tree.parent)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "is vllm-ascend 0.18.0, this bundle is for 0.23.0" in proc.stderr


def _new_file_patch(n: int) -> str:
    return f"--- /dev/null\n+++ b/vllm_ascend/injected{n}.py\n@@ -0,0 +1 @@\n+INJECTED = True\n"


def _replace_patches(bundle: Path) -> None:  # each replaced by a patch that applies to any tree
    for n, name in enumerate((bundle / "patches" / "series").read_text().split()):
        (bundle / "patches" / name).write_text(_new_file_patch(n))


def _drop_from_series(bundle: Path) -> None:
    series = bundle / "patches" / "series"
    first = series.read_text().split()[0]
    series.write_text(f"{first}\n")
    (bundle / "patches" / first).write_text(_new_file_patch(0))


def _remove_patch(bundle: Path) -> None:
    (bundle / "patches" / (bundle / "patches" / "series").read_text().split()[-1]).unlink()


@pytest.mark.parametrize("damage, words", [
    pytest.param(_replace_patches, "but the lock records", id="patch-bytes-changed"),
    pytest.param(_drop_from_series, "patches/series does not list the lock's patches", id="series-edited"),
    pytest.param(_remove_patch, "has sha256 missing, but the lock records", id="patch-missing"),
])
def test_apply_sh_checks_the_locks_hashes_before_applying(flagship, tmp_path, damage, words):
    need("git")
    from optkit.tree.inspect import tree_checksum

    bundle = tmp_path / "bundle"
    shutil.copytree(flagship, bundle)
    damage(bundle)
    tree = tmp_path / "tree"
    (tree / "vllm_ascend").mkdir(parents=True)
    (tree / "vllm_ascend" / "__init__.py").write_text("")
    (tree / "vllm_ascend" / "_version.py").write_text("__version__ = version = '0.23.0'\n")
    before = tree_checksum(tree)
    for args in ([str(tree)], ["--revert", str(tree)]):
        proc = subprocess.run(["bash", str(bundle / "apply.sh"), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and words in proc.stderr, proc.stdout + proc.stderr
        assert "nothing changed" in proc.stderr and tree_checksum(tree) == before


def _unclosed_quote(bundle: Path, tree: Path) -> None:
    serve = bundle / "serve.sh"
    serve.write_text(serve.read_text().replace("exec vllm serve ", "exec vllm serve '", 1))


@pytest.mark.parametrize("damage, words", [
    pytest.param(lambda b, t: (b / "serve.sh").unlink(), "serve.sh: cannot read: No such file or directory",
                 id="serve-sh-missing"),
    pytest.param(lambda b, t: (b / "env.sh").write_bytes(b"export A=1\n\0"), "env.sh:2: holds binary data",
                 id="env-sh-binary"),
    pytest.param(_unclosed_quote, "serve.sh: No closing quotation", id="serve-sh-unclosed-quote"),
    pytest.param(lambda b, t: (t / "vllm_ascend" / "envs.py").unlink(), "envs.py: no such file; is this a vllm-ascend tree?",
                 id="tree-without-envs-py"),
    pytest.param(lambda b, t: (t / "vllm_ascend" / "envs.py").write_text("def (\n"), "a patch or an edit broke the tree's Python",
                 id="envs-py-not-python"),
])
def test_bundle_check_refuses_damaged_files(flagship, tmp_path, damage, words):
    """Each was an internal error (FileNotFoundError, ValueError from shlex, SyntaxError from ast)."""
    bundle = tmp_path / "bundle"
    shutil.copytree(flagship, bundle)
    tree = tmp_path / "tree"
    (tree / "vllm_ascend").mkdir(parents=True)
    (tree / "vllm_ascend" / "__init__.py").write_text("")
    (tree / "vllm_ascend" / "_version.py").write_text("__version__ = version = '0.23.0'\n")
    (tree / "vllm_ascend" / "envs.py").write_text("env_variables = {}\n")
    damage(bundle, tree)
    result = CliRunner().invoke(cli, ["bundle", "check", str(bundle), "--no-vllm", "--tree", str(tree)])
    assert result.exit_code == 1 and words in result.output, result.output


# --------------------------------------------------------------------------- CLI wiring


@pytest.mark.tree
def test_bundle_check_cli_fails_when_vllm_is_missing(flagship, monkeypatch):
    import optkit.bundle.check as bundle_check

    monkeypatch.setattr(bundle_check, "find_vllm_python", lambda version, given=None: (None, "vLLM 0.23.0 not installed (test)"))
    monkeypatch.setattr(bundle_check, "check_config_keys", lambda *a: bundle_check.Check("config-keys", "pass"))
    monkeypatch.setattr(bundle_check, "check_env", lambda *a: bundle_check.Check("env", "pass"))
    result = CliRunner().invoke(cli, ["bundle", "check", str(flagship)])
    assert result.exit_code == 1
    assert "SKIP  vllm  (skipped: vLLM 0.23.0 not installed (test))" in result.output
    assert result.output.count("not installed (test)") == 1  # the error refers to the SKIP line, not repeating it
    no_vllm = CliRunner().invoke(cli, ["bundle", "check", str(flagship), "--no-vllm"])
    assert no_vllm.exit_code == 0 and "SKIP  vllm  (skipped: --no-vllm)" in no_vllm.output
