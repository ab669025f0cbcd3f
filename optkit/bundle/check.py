"""``optkit bundle check``: is a written bundle consistent, and would vLLM and vllm-ascend accept it?

Each check returns problems, and each problem names the recipe responsible (found through the
lock's ``launch.sources``, ``launch.env`` and ``launch.argv_sources``):

- ``launch``: serve.sh runs exactly the lock's ``launch.argv``; env.sh exports the lock's env.
- ``vllm``: the argv passes vLLM 0.23.0's own parser and config classes, and its capture sizes
  survive vLLM's spec-decode rounding (``optkit.bundle.vllm_probe``, one subprocess; skipped, not passed,
  when vLLM 0.23.0 is not installed).
- ``config-keys``: every ``--additional-config`` key (nested ones too) is read by the vllm-ascend
  tree, found statically (``ast``) in the tree after the bundle's patches are applied to a copy.
- ``env``: every env var is in the tree's ``vllm_ascend/envs.py`` or marked external.
- ``scripts``: ``bash -n`` and ``shellcheck`` on every script.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field

from optkit.bundle.launch import EXTRA_ARGS
from optkit.catalog.textfile import read_text
from optkit.errors import BundleError, OptkitError, ValidationFailed, did_you_mean
from optkit.tree.patchset import LOCK_NAME, checked, lock_json
from optkit.tree.schema import Lock

PROBE_TIMEOUT = 600
SCRIPT_TIMEOUT = 60


@dataclass
class Check:
    """One check's outcome."""

    name: str
    status: Literal["pass", "fail", "skipped"]
    problems: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class BundleReport:
    """Every check of one bundle."""

    bundle: Path
    checks: list[Check]

    @property
    def problems(self) -> list[str]:
        return [p for check in self.checks for p in check.problems]

    @property
    def skipped(self) -> list[Check]:
        return [c for c in self.checks if c.status == "skipped"]


def check_bundle(bundle: Path, *, tree: Path | None = None, use_vllm: bool = True) -> BundleReport:
    """Run every check on the bundle directory ``bundle``.

    ``tree`` is the vllm-ascend source tree to check config keys and env vars against (default:
    the pristine tree of the lock's version, fetched and cached by ``optkit.tree.fetch.fetch``).
    """
    bundle = Path(bundle)
    lock = read_lock(bundle)
    checks = [check_launch(bundle, lock)]
    if use_vllm:
        checks.append(check_vllm(lock))
    with prepared_tree(bundle, lock, tree) as (root, patch_problems):
        checks.append(check_config_keys(lock, root, patch_problems))
        checks.append(check_env(lock, root))
    checks.append(check_scripts(bundle))
    return BundleReport(bundle, checks)


class _Env(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    name: str = Field(description="Variable name.")
    value: str = Field(description="Value exported by env.sh.")
    recipe: str = Field(description="The recipe that sets it.")
    external: bool = Field(False, description="Defined outside vllm-ascend's envs.py.")


class _Launch(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    argv: list[str] = Field(description="The vllm serve argv, as serve.sh runs it.")
    argv_sources: list[str] = Field(description="Who put each argv word there (recipe ids, request, optkit).")
    env: list[_Env] = Field(description="The variables env.sh exports.")
    parameters: dict[str, str] = Field(description="serve.sh's parameters and their defaults.")
    sources: dict[str, str] = Field(description="The recipe that set each launch setting.")
    additional_config: dict[str, Any] = Field(description="The --additional-config fragment.")


class _Versions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    vllm_ascend: str = Field(description="The vllm-ascend version the bundle is for.")
    vllm: str = Field(description="The vLLM version the bundle is for.")


class _CheckedLock(BaseModel):
    """What bundle check reads of the lock besides what apply reads (``optkit.tree.schema.Lock``)."""

    model_config = ConfigDict(extra="allow", strict=True)
    launch: _Launch = Field(description="The launch the bundle's scripts run.")
    versions: _Versions = Field(description="The versions the bundle is for.")


def read_lock(bundle: Path) -> dict:
    path = bundle / LOCK_NAME
    if not path.is_file():
        raise BundleError([f"{bundle} is not a bundle directory: it has no {LOCK_NAME}"])
    lock, lines = lock_json(path)
    for schema in (Lock, _CheckedLock):
        checked(schema, lock, lines)
    return lock


def _who(label: str) -> str:
    """Words for an argv label: recipe ids, the request, or optkit itself (comma-joined)."""
    words = {"request": "the request (optkit plan flags)", "optkit": "optkit's own serve arguments"}
    parts = [part for part in label.split(",") if part]
    recipes = [part for part in parts if part not in words]
    named = [words[part] for part in parts if part in words]
    if recipes:
        named.append(("recipe " if len(recipes) == 1 else "recipes ") + ", ".join(recipes))
    return " and ".join(named) or words["optkit"]


def _result(name: str, problems: list[str], note: str = "") -> Check:
    return Check(name, "fail" if problems else "pass", problems, note)


# --------------------------------------------------------------------------- launch


def serve_sh_argv(text: str) -> list[str]:
    """The ``vllm serve`` argv in serve.sh (without ``exec`` and the trailing EXTRA_ARGS), read
    with ``shlex`` from the one ``exec vllm serve`` command; nothing is executed."""
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
    if not words or words[-1] != shlex.split(EXTRA_ARGS)[0]:
        raise BundleError(["serve.sh's vllm serve command does not end with the extra arguments; write the bundle again"])
    return words[1:-1]


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


def _script_text(path: Path) -> str:
    try:
        return read_text(path)
    except ValidationFailed as exc:
        raise BundleError([f"{p}; write the bundle again" for p in exc.problems]) from None


def check_launch(bundle: Path, lock: dict) -> Check:
    launch = lock["launch"]
    problems = []
    argv = serve_sh_argv(_script_text(bundle / "serve.sh"))
    if argv != launch["argv"]:
        problems.append(f"optkit: serve.sh runs {shlex.join(argv)!r}, but the lock's launch.argv is "
                        f"{shlex.join(launch['argv'])!r}; the bundle was edited: write it again")
    exports = env_sh_exports(_script_text(bundle / "env.sh"))
    wanted = [(e["name"], e["value"]) for e in launch["env"]]
    if exports != wanted:
        problems.append(f"optkit: env.sh exports {exports}, but the lock's launch.env is {wanted}; write the bundle again")
    return _result("launch", problems)


# --------------------------------------------------------------------------- vllm


def probe_request(lock: dict) -> dict:
    """What ``optkit.bundle.vllm_probe`` gets: the argv after ``vllm serve`` with serve.sh's defaults."""
    launch = lock["launch"]
    params = {f"${name}": value or name.lower() for name, value in launch["parameters"].items()}
    argv = [params.get(token, token) for token in launch["argv"][2:]]
    return {"argv": argv, "labels": launch["argv_sources"][2:], "vllm": lock["versions"]["vllm"]}


def run_probe(request: dict) -> dict:
    """Run ``python -m optkit.bundle.vllm_probe`` once (vLLM is imported there, never here)."""
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run([sys.executable, "-m", "optkit.bundle.vllm_probe", json.dumps(request)], env=env,
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise OptkitError(f"the vLLM probe did not finish in {PROBE_TIMEOUT}s") from None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise OptkitError(f"the vLLM probe failed (exit {proc.returncode}):\n{tail}") from None


def _blame(problem: dict, lock: dict) -> list[str]:
    """Who to name: the owner of the capture sizes for a rounding problem (the probe only knows
    who wrote the whole --compilation-config), else the probe's blame."""
    owner = lock["launch"]["sources"].get("compilation_config.cudagraph_capture_sizes")
    if problem["check"] == "capture-sizes" and owner:
        return [owner]
    return problem["blame"]


def check_vllm(lock: dict, result: dict | None = None) -> Check:
    """vLLM's verdict on the argv (``result``: a probe result already at hand, e.g. in tests)."""
    result = result if result is not None else run_probe(probe_request(lock))
    if result["status"] == "skipped":
        return Check("vllm", "skipped", [], f"skipped: {result['reason']}")
    problems = [f"{', '.join(_who(b) for b in _blame(p, lock))}: {p['message']}" for p in result["problems"]]
    sizes = result.get("capture_sizes")
    note = f"vLLM {result['vllm_version']}" + (f"; capture sizes {sizes['given']} → {sizes['effective']}" if sizes else "")
    return _result("vllm", problems, note)


# --------------------------------------------------------------------------- tree


@dataclass
class ConfigKeys:
    """``additional_config`` keys a tree reads: top-level ones, and nested ones where the tree
    gives the sub-dict a schema (a config class, or ``.get`` calls on it)."""

    top: set[str] = field(default_factory=set)
    nested: dict[str, set[str]] = field(default_factory=dict)


def _is_additional_config(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "additional_config") or (
        isinstance(node, ast.Attribute) and node.attr == "additional_config")


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _get_key(node: ast.AST) -> tuple[ast.AST, str] | None:
    """``(owner, key)`` of ``owner.get("key", ...)`` or ``owner["key"]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        key = _string(node.args[0])
        return (node.func.value, key) if key is not None else None
    if isinstance(node, ast.Subscript):
        key = _string(node.slice)
        return (node.value, key) if key is not None else None
    return None


def _top_key(node: ast.AST) -> str | None:
    """The top-level key ``node`` reads from additional_config, if it does."""
    got = _get_key(node)
    if got and _is_additional_config(got[0]):
        return got[1]
    if isinstance(node, ast.Call) and (_name_of(node.func) or "").endswith("_get_config_value") and len(node.args) > 1:
        if _is_additional_config(node.args[0]):
            return _string(node.args[1])
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
        if _is_additional_config(node.comparators[0]):
            return _string(node.left)
    return None


def config_keys(root: Path) -> ConfigKeys:
    """The additional_config keys the vllm-ascend tree at ``root`` reads (static, nothing imported)."""
    keys = ConfigKeys()
    for path in sorted((root / "vllm_ascend").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "additional_config" in text:
            _collect_keys(_parse_python(path, text), keys)
    return keys


def _collect_keys(module: ast.Module, keys: ConfigKeys) -> None:
    aliases: dict[str, str] = {}  # variable or attribute name -> the top-level key it holds
    for node in ast.walk(module):
        top = _top_key(node)
        if top is not None:
            keys.top.add(top)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            held = _top_key(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if held is not None and _name_of(target):
                    aliases[_name_of(target)] = held
    classes = {node.name: node for node in ast.walk(module) if isinstance(node, ast.ClassDef)}
    for node in ast.walk(module):
        got = _get_key(node)
        if got:
            owner_key = _top_key(got[0]) or aliases.get(_name_of(got[0]) or "")
            if owner_key is not None and not _is_additional_config(got[0]):
                keys.nested.setdefault(owner_key, set()).add(got[1])
        if isinstance(node, ast.Call) and _name_of(node.func) in classes:
            _class_keys(node, classes[_name_of(node.func)], aliases, keys)


def _class_keys(call: ast.Call, cls: ast.ClassDef, aliases: dict[str, str], keys: ConfigKeys) -> None:
    """Keys a config class accepts: ``Cls(**sub)`` → its __init__ parameters (and ``kwargs.get``);
    ``Cls(sub, ...)`` → ``.get``/``[...]`` on that parameter, and a class-level ``_defaults`` dict."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return
    params = [a.arg for a in init.args.args[1:]]
    for kw in call.keywords:
        held = aliases.get(_name_of(kw.value) or "") or _top_key(kw.value)
        if kw.arg is None and held is not None:
            names = set(params) | {a.arg for a in init.args.kwonlyargs}
            if init.args.kwarg is not None:
                names |= _gets_on(init, init.args.kwarg.arg)
            keys.nested.setdefault(held, set()).update(names)
    for index, arg in enumerate(call.args):
        held = aliases.get(_name_of(arg) or "") or _top_key(arg)
        if held is not None and index < len(params):
            keys.nested.setdefault(held, set()).update(_gets_on(cls, params[index]) | _defaults_keys(cls))


def _gets_on(scope: ast.AST, name: str) -> set[str]:
    found = set()
    for node in ast.walk(scope):
        got = _get_key(node)
        if got and isinstance(got[0], ast.Name) and got[0].id == name:
            found.add(got[1])
    return found


def _defaults_keys(cls: ast.ClassDef) -> set[str]:
    for node in cls.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(_name_of(t) == "_defaults" for t in targets) and isinstance(node.value, ast.Dict):
            return {k for k in (_string(key) for key in node.value.keys) if k is not None}
    return set()


def _parse_python(path: Path, text: str) -> ast.Module:
    try:
        return ast.parse(text, str(path))
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
        raise BundleError([f"{path}: not valid Python ({exc}); a patch or an edit broke it"]) from None


def env_names(root: Path) -> set[str]:
    """Keys of the ``env_variables`` dict in the tree's ``vllm_ascend/envs.py``."""
    path = root / "vllm_ascend" / "envs.py"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BundleError([f"{path}: cannot read it ({exc.strerror}); is this a vllm-ascend tree?"]) from None
    module = _parse_python(path, text)
    for node in module.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if _name_of(target) == "env_variables" and isinstance(node.value, ast.Dict):
            return {k for k in (_string(key) for key in node.value.keys) if k is not None}
    raise BundleError([f"{path}: no env_variables dict; is this a vllm-ascend tree?"])


@contextmanager
def prepared_tree(bundle: Path, lock: dict, tree: Path | None) -> Iterator[tuple[Path, list[str]]]:
    """The tree to read keys from: ``tree`` (default: the cached pristine tree of the lock's
    version) with the bundle's patches applied to a temporary copy of its ``vllm_ascend/``
    (``optkit.tree.apply``); also the problems of patches that do not apply."""
    if tree is None:
        from optkit.tree.fetch import fetch

        tree = fetch(lock["versions"]["vllm_ascend"]).path
    tree = Path(tree)
    if not (tree / "vllm_ascend").is_dir():
        raise BundleError([f"{tree} is not a vllm-ascend tree (no vllm_ascend/)"])
    if not lock["patches"]:
        yield tree, []
        return
    with tempfile.TemporaryDirectory(prefix="optkit-check-") as tmp:
        copy = Path(tmp) / "tree"
        _copy_sources(tree, copy, [t for p in lock["patches"] for t in p.get("targets", [])])
        yield copy, _apply_patches(bundle, copy)


def _copy_sources(tree: Path, copy: Path, targets: list[str]) -> None:
    """``vllm_ascend/**.py``, the version files, and every other file a patch targets (csrc, …)."""
    shutil.copytree(tree / "vllm_ascend", copy / "vllm_ascend",
                    ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or (Path(d) / n).is_dir())])
    for name in ("PKG-INFO", "setup.py", "pyproject.toml", *targets):
        source, dest = tree / name, copy / name
        if source.is_file() and not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)


def _apply_patches(bundle: Path, copy: Path) -> list[str]:
    from optkit.tree.apply import apply
    from optkit.errors import PatchError, TreeError
    from optkit.tree.patchset import from_bundle

    try:
        apply(copy, from_bundle(bundle, allow_pending=True), force=True)
    except (PatchError, TreeError) as exc:
        return [f"patches: {exc} (config keys and env vars are checked against the unpatched tree)"]
    return []


def _pending_note(lock: dict, recipe: str) -> str:
    pending = [p["file"] for p in lock.get("pending_patches", []) if p["recipe"] == recipe]
    return f"; its patch {', '.join(pending)} (still pending, not written) would have to add it" if pending else ""


def check_config_keys(lock: dict, root: Path, patch_problems: list[str]) -> Check:
    launch, version = lock["launch"], lock["versions"]["vllm_ascend"]
    keys = config_keys(root)
    problems = list(patch_problems)
    for key, value in sorted(launch["additional_config"].items()):
        recipe = launch["sources"].get(f"additional_config.{key}", "optkit")
        if key not in keys.top:
            problems.append(f"{_who(recipe)}: --additional-config key {key!r} is not read by vllm-ascend {version}"
                            f"{_hint(key, keys.top)}{_pending_note(lock, recipe)}")
        elif isinstance(value, dict) and key in keys.nested:
            for sub in sorted(set(value) - keys.nested[key]):
                owner = launch["sources"].get(f"additional_config.{key}.{sub}", recipe)
                problems.append(f"{_who(owner)}: --additional-config key {key}.{sub} is not read by vllm-ascend "
                                f"{version} (it knows {', '.join(sorted(keys.nested[key]))}){_hint(sub, keys.nested[key])}"
                                f"{_pending_note(lock, owner)}")
    return _result("config-keys", problems, f"{len(keys.top)} top-level keys in the tree")


def _hint(name: str, known) -> str:
    hint = did_you_mean(name, sorted(known))
    return f"; {hint}" if hint else ""


def check_env(lock: dict, root: Path) -> Check:
    names = env_names(root)
    version = lock["versions"]["vllm_ascend"]
    problems = [
        f"{_who(e['recipe'])}: env var {e['name']} is not defined in vllm-ascend {version}'s vllm_ascend/envs.py "
        f"and the recipe does not mark it external{_hint(e['name'], names)}{_pending_note(lock, e['recipe'])}"
        for e in lock["launch"]["env"] if not e.get("external") and e["name"] not in names]
    return _result("env", problems, f"{len(names)} env vars in envs.py")


# --------------------------------------------------------------------------- scripts


def check_scripts(bundle: Path) -> Check:
    """``bash -n`` and ``shellcheck -x`` (run in the bundle, so ``source env.sh`` resolves)."""
    scripts = sorted(p.name for p in bundle.glob("*.sh"))
    problems = []
    for name in scripts:
        proc = subprocess.run(["bash", "-n", name], cwd=bundle, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT)
        if proc.returncode:
            problems.append(f"optkit: {name}: bash -n: {proc.stderr.strip()}")
    if shutil.which("shellcheck") is None:
        return Check("scripts", "fail" if problems else "skipped", problems,
                     "shellcheck not installed (apt-get install shellcheck); ran bash -n only")
    proc = subprocess.run(["shellcheck", "-x", *scripts], cwd=bundle, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT)
    if proc.returncode:
        problems.append(f"optkit: shellcheck:\n{proc.stdout.strip()}")
    return _result("scripts", problems, f"{len(scripts)} scripts")
