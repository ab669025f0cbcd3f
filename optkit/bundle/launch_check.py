"""The ``launch`` check of ``optkit bundle check``: serve.sh runs exactly the lock's ``launch.argv``
(and, on a multi-node plan, its worker nodes add the lock's ``launch.nodes.worker_args``), env.sh
exports the lock's env, and a multi-node bundle's ``k8s/configmap.yaml`` carries these very serve.sh
and env.sh. The scripts are read with ``shlex``; nothing is executed.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from optkit.bundle.launch import EXTRA_ARGS, ROLE_ARGS
from optkit.catalog.textfile import read_text
from optkit.errors import BundleError, ValidationFailed


def serve_sh_argv(text: str, nodes: bool = False) -> list[str]:
    """The ``vllm serve`` argv in serve.sh (without ``exec``, the trailing EXTRA_ARGS and, with
    ``nodes``, the ROLE_ARGS before them), read with ``shlex`` from the one ``exec vllm serve``
    command; nothing is executed."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("exec vllm serve ")), None)
    if start is None:
        raise BundleError(["serve.sh has no `exec vllm serve` command; write the bundle again"])
    command = []
    for line in lines[start:]:
        command.append(line[:-1] if line.endswith("\\") else line)
        if not line.endswith("\\"):
            break
    words = _words(" ".join(command), "serve.sh")
    tail = [shlex.split(ROLE_ARGS)[0]] * nodes + shlex.split(EXTRA_ARGS)
    if len(words) <= len(tail) or words[-len(tail):] != tail:
        what = "the worker arguments and the extra arguments" if nodes else "the extra arguments"
        raise BundleError([f"serve.sh's vllm serve command does not end with {what}; write the bundle again"])
    return words[1:-len(tail)]


def serve_sh_worker_args(text: str) -> list[str] | None:
    """The ``WORKER_ARGS=(…)`` of a multi-node serve.sh, read with ``shlex`` (None when absent)."""
    return serve_sh_array(text, "WORKER_ARGS")


def serve_sh_array(text: str, name: str) -> list[str] | None:
    """The words of serve.sh's one-line array ``NAME=(…)``, read with ``shlex`` (None when absent)."""
    line = next((line for line in text.splitlines() if line.startswith(f"{name}=(") and line.endswith(")")), None)
    return None if line is None else _words(line[len(name) + 2:-1], "serve.sh")


def _words(text: str, script: str, comments: bool = False) -> list[str]:
    try:
        return shlex.split(text, comments=comments)
    except ValueError as exc:  # an unclosed quote
        raise BundleError([f"{script}: {exc} in {text[:80]!r}; the bundle was edited: write it again"]) from None


def env_sh_exports(text: str) -> list[tuple[str, str]]:
    """``(name, value)`` of every ``export NAME=value`` line of env.sh."""
    out = []
    for line in text.splitlines():
        if line.startswith("export "):
            words = _words(line, "env.sh", comments=True)
            name, _, value = (words[1] if len(words) > 1 else "").partition("=")
            out.append((name, value))
    return out


def script_text(path: Path) -> str:
    try:
        return read_text(path)
    except ValidationFailed as exc:
        raise BundleError([f"{p}; write the bundle again" for p in exc.problems]) from None


def launch_problems(bundle: Path, lock: dict) -> list[str]:
    """What differs between the bundle's serve.sh, env.sh and k8s ConfigMap and its lock (on a PD
    bundle, each role's, and the tables of its instances)."""
    roles = lock["launch"].get("roles")
    if not roles:
        return _server_problems(bundle, lock)
    problems = []
    for role, launch in roles.items():
        view = {**lock, "launch": launch}
        problems += [p.replace("optkit: ", f"optkit: {role}/", 1) for p in
                     _server_problems(bundle / role, view) + _instance_problems(bundle / role, launch)]
    return problems + _configmap_problems(bundle, [f"{role}/{name}" for role in roles for name in ("serve.sh", "env.sh")]
                                          + ["proxy.sh"])


INSTANCE_TABLES = {"PORTS": "port", "DEVICE_LISTS": "devices", "KV_TRANSFER_CONFIGS": "kv_transfer_config"}
"""A PD role's serve.sh arrays (one entry per instance) and the lock's instance field each must equal."""


def _instance_problems(role_dir: Path, launch: dict) -> list[str]:
    text = script_text(role_dir / "serve.sh")
    problems = []
    for array, key in INSTANCE_TABLES.items():
        wanted = [str(i[key]) for i in launch["instances"]]
        found = serve_sh_array(text, array)
        if found != wanted:
            problems.append(f"optkit: serve.sh's {array} is {found}, but the lock's instances have {wanted}; write the bundle again")
    return problems


def _server_problems(bundle: Path, lock: dict) -> list[str]:
    launch = lock["launch"]
    problems = []
    serve_sh = script_text(bundle / "serve.sh")
    nodes = launch.get("nodes")
    argv = serve_sh_argv(serve_sh, nodes=bool(nodes))
    if argv != launch["argv"]:
        problems.append(f"optkit: serve.sh runs {shlex.join(argv)!r}, but the lock's launch.argv is "
                        f"{shlex.join(launch['argv'])!r}; the bundle was edited: write it again")
    if nodes and serve_sh_worker_args(serve_sh) != nodes["worker_args"]:
        problems.append(f"optkit: serve.sh's worker nodes add {serve_sh_worker_args(serve_sh)}, but the lock's "
                        f"launch.nodes.worker_args is {nodes['worker_args']}; write the bundle again")
    problems += _configmap_problems(bundle)
    exports = env_sh_exports(script_text(bundle / "env.sh"))
    wanted = [(e["name"], e["value"]) for e in launch["env"]]
    if exports != wanted:
        problems.append(f"optkit: env.sh exports {exports}, but the lock's launch.env is {wanted}; write the bundle again")
    return problems


def _configmap_problems(bundle: Path, names: list[str] = ("serve.sh", "env.sh")) -> list[str]:
    """k8s/configmap.yaml (a multi-node or PD bundle's, with --k8s) must carry the bundle's own scripts
    ``names`` (a PD bundle's under their path with / as -): its pods run them."""
    path = bundle / "k8s" / "configmap.yaml"
    if not path.is_file():
        return []
    from optkit.catalog.yamlio import load_yaml

    try:
        data, _ = load_yaml(path)
    except ValidationFailed as exc:
        return [f"optkit: {p}; write the bundle again" for p in exc.problems]
    scripts = data.get("data") if isinstance(data, dict) else None
    scripts = scripts if isinstance(scripts, dict) else {}
    return [f"optkit: k8s/configmap.yaml's {name.replace('/', '-')} differs from the bundle's {name}; the bundle was "
            "edited: write it again" for name in names if scripts.get(name.replace("/", "-")) != script_text(bundle / name)]


__all__ = ["launch_problems", "serve_sh_argv", "serve_sh_worker_args", "env_sh_exports", "script_text"]
