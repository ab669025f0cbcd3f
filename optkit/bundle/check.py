"""``optkit bundle check``: is a written bundle consistent, and would vLLM and vllm-ascend accept it?

Each check returns problems, and each problem names the recipe responsible (found through the
lock's ``launch.sources``, ``launch.env`` and ``launch.argv_sources``):

- ``launch``: serve.sh runs exactly the lock's ``launch.argv`` (and, on a multi-node plan, its worker
  nodes add the lock's ``launch.nodes.worker_args``); env.sh exports the lock's env; the k8s ConfigMap
  of a multi-node bundle carries these serve.sh and env.sh.
- ``vllm``: the argv (of every node, on a multi-node plan) passes the paired vLLM's own parser and config classes, and its
  capture sizes survive vLLM's spec-decode rounding (``optkit.bundle.vllm_probe``; skipped, not passed, when that vLLM is
  not installed).
- ``config-keys``: every ``--additional-config`` key (nested ones too) is read by the vllm-ascend
  tree, found statically (``ast``) in the tree after the bundle's patches are applied to a copy.
- ``env``: every env var is in the tree's ``vllm_ascend/envs.py`` or marked external.
- ``ascend-config``: on a strict release, the tree's own ``AscendConfig`` takes the ``--additional-config``
  (``optkit.bundle.ascend_config_probe``).
- ``scripts``: ``bash -n`` and ``shellcheck`` on every script.

vLLM's import is most of the time: ONE probe process (``optkit.bundle.probe.ProbeSession``) does every
vLLM-side check, started first so that its import overlaps the rest; the tree's knobs are read once.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field

from optkit.bundle.engine_check import check_engine, engine_requests, model_config_for
from optkit.bundle.launch_check import launch_problems
from optkit.bundle.probe import ProbeSession, find_vllm_python, probe_names, probe_requests, probe_session, run_probe
from optkit.errors import BundleError, did_you_mean
from optkit.tree.patchset import LOCK_NAME, checked, lock_json
from optkit.tree.schema import Lock

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


def check_bundle(bundle: Path, *, tree: Path | None = None, use_vllm: bool = True,
                 vllm_python: Path | None = None, model_config: Path | None = None) -> BundleReport:
    """Run every check on the bundle directory ``bundle``.

    ``tree`` is the vllm-ascend source tree to check config keys and env vars against (default:
    the pristine tree of the lock's version, fetched and cached by ``optkit.tree.fetch.fetch``).
    vLLM's parser is the one of the vLLM the bundle's release pairs with (``find_vllm_python``); its
    engine configuration is built with ``model_config`` (default: ``engine_check.model_config_for``).
    """
    bundle = Path(bundle)
    lock = read_lock(bundle)
    python, found = find_vllm_python(lock["versions"]["vllm"], vllm_python) if use_vllm else (None, NO_VLLM)
    config, config_found = model_config_for(lock, model_config) if use_vllm else (None, NO_VLLM)
    with probe_session(python) as probe:
        if probe is not None:  # its vLLM import runs while the checks below run here
            probe.ask("vllm", {"batch": engine_requests(probe_requests(lock), config)})
        launch, scripts = check_launch(bundle, lock), check_scripts(bundle)
        with prepared_tree(bundle, lock, tree) as (root, patch_problems):
            knobs = tree_knobs(root)
            config_keys, env = check_config_keys(lock, knobs, patch_problems), check_env(lock, knobs)
            pd = [check_pd(lock, root)] if lock["launch"].get("pd") else []
            vllm = _vllm_checks(probe, lock, knobs, root, found, config_found)
    return BundleReport(bundle, [launch, *vllm[:2], *pd, config_keys, *vllm[2:], env, scripts])


NO_VLLM = "--no-vllm"
"""Why the vLLM-side checks are skipped when the user asked so."""


def _vllm_checks(probe: ProbeSession | None, lock: dict, knobs, root: Path, found: str, config_found: str) -> list[Check]:
    """The vllm, engine and ascend-config checks from the session's answers (the last asked for now
    that the tree is ready); without a session all three are skipped, ``found`` says why."""
    strict = knobs.additional_config.unknown_keys == "rejected"
    if probe is None:  # the reason is said once, on the vllm line
        short = found if found == NO_VLLM else "no vLLM to run it in (the vllm line says why)"
        return [check_vllm(lock, missing=found), Check("engine", "skipped", [], f"skipped: {short}"),
                check_ascend_config(lock, knobs, missing=short)]
    if strict:
        probe.ask("ascend-config", ascend_config_request(lock, knobs, root))
    answers = probe.answers()
    results = answers[0]["results"]
    vllm = check_vllm(lock, results)
    engine = vllm if vllm.status == "skipped" else check_engine(results, probe_names(lock), config_found, _who)
    skipped = Check("engine", "skipped", [], "skipped: no vLLM to run it in (the vllm line says why)")
    return [vllm, skipped if engine is vllm else engine,
            check_ascend_config(lock, knobs, answers[1] if strict else None, missing=found)]


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
    words = {"request": "the request (optkit plan flags)", "optkit": "optkit's own serve arguments",
             "model": "the model's checkpoint (its own config code: --trust-remote-code)"}
    parts = [part for part in label.split(",") if part]
    recipes = [part for part in parts if part not in words]
    named = [words[part] for part in parts if part in words]
    if recipes:
        named.append(("recipe " if len(recipes) == 1 else "recipes ") + ", ".join(recipes))
    return " and ".join(named) or words["optkit"]


def _result(name: str, problems: list[str], note: str = "") -> Check:
    return Check(name, "fail" if problems else "pass", problems, note)


# --------------------------------------------------------------------------- launch


def check_launch(bundle: Path, lock: dict) -> Check:
    """serve.sh, env.sh (and a multi-node bundle's k8s ConfigMap) against the lock (``optkit.bundle.launch_check``)."""
    return _result("launch", launch_problems(bundle, lock))


# --------------------------------------------------------------------------- vllm


def _blame(problem: dict, lock: dict) -> list[str]:
    """Who to name: the owner of the capture sizes for a rounding problem (the probe only knows
    who wrote the whole --compilation-config), else the probe's blame."""
    owner = lock["launch"]["sources"].get("compilation_config.cudagraph_capture_sizes")
    if problem["check"] == "capture-sizes" and owner:
        return [owner]
    return problem["blame"]


def check_vllm(lock: dict, result: dict | list[dict] | None = None, *, python: str | None = None,
               missing: str = "") -> Check:
    """vLLM's verdict on the argv of every node, in ``python`` (``result``: probe results already at
    hand, one per node of ``probe_requests``, e.g. in tests; no ``python`` and no ``result``: skipped,
    ``missing`` says why)."""
    if result is None and python is None and missing:
        return Check("vllm", "skipped", [], f"skipped: {missing}")
    if result is None:
        requests = probe_requests(lock)
        result = [run_probe(requests[0], python)] if len(requests) == 1 else \
            run_probe({"batch": requests}, python)["results"]
    results = [result] if isinstance(result, dict) else result
    skipped = next((r for r in results if r["status"] == "skipped"), None)
    if skipped is not None:
        return Check("vllm", "skipped", [], f"skipped: {skipped['reason']}")
    names = probe_names(lock)
    problems = [f"{names[n] + ': ' if names[n] else ''}{', '.join(_who(b) for b in _blame(p, lock))}: {p['message']}"
                for n, r in enumerate(results) for p in r["problems"] if p["check"] != "engine"]
    sizes = next((r["capture_sizes"] for r in results if r.get("capture_sizes")), None)  # a PD prefiller has none
    note = f"vLLM {results[0]['vllm_version']}" + (f"; capture sizes {sizes['given']} → {sizes['effective']}" if sizes else "")
    widened = results[0].get("widened")
    note += f"; with vllm-ascend's widening of {', '.join(widened)}" if widened else ""
    if lock["launch"].get("roles"):
        count = sum(len(role["instances"]) for role in lock["launch"]["roles"].values())
        what = f"{count} instances" if count == len(results) else f"{len(results)} nodes of its {count} instances"
        note += f"; the argv of all {what} ({', '.join(names)}), --kv-transfer-config included"
    elif len(results) > 1:
        note += f"; the argv of all {len(results)} nodes (leader and {len(results) - 1} headless)"
    return _result("vllm", problems, note)


# --------------------------------------------------------------------------- tree


def tree_knobs(root: Path):
    """The knob registry of the tree at ``root`` (``optkit.versions.knobs``, read with ``ast``)."""
    from optkit.versions.scan import registry_data
    from optkit.versions.knobs import scan_knobs
    from optkit.catalog.frozen import freeze
    from optkit.versions.schema import RECORDS, Knobs

    if not (root / "vllm_ascend" / "envs.py").is_file():
        raise BundleError([f"{root / 'vllm_ascend' / 'envs.py'}: no such file; is this a vllm-ascend tree?"])
    try:
        found = scan_knobs(root)
    except (SyntaxError, ValueError) as exc:  # a source file that is not Python (ValueError: a NUL byte)
        raise BundleError([f"{root}: {exc}; a patch or an edit broke the tree's Python"]) from None
    return freeze(Knobs.model_validate(registry_data(found)), RECORDS)


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
        pd = lock["launch"].get("pd")
        _copy_sources(tree, copy, [t for p in lock["patches"] for t in p.get("targets", [])] + ([pd["proxy"]["script"]] if pd else []))
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


def check_config_keys(lock: dict, knobs, patch_problems: list[str]) -> Check:
    """Every --additional-config key (nested ones too) is one the tree knows (``knobs``: its
    ``tree_knobs``; ``optkit.versions.knobs.unread_at``); an unknown one is ignored by a lenient release and
    stops a strict one (0.27.1rc1 on) at start-up."""
    from optkit.versions.knobs import unread_at

    launch, version = lock["launch"], lock["versions"]["vllm_ascend"]
    top = knobs.additional_config
    problems = list(patch_problems)
    for path in _leaf_paths(launch["additional_config"]):
        unread = unread_at(top, path)
        if unread is None:
            continue
        (depth, section), parts = unread, path.split(".")
        key = parts[depth]
        owner = launch["sources"].get(f"additional_config.{path}") or launch["sources"].get(
            f"additional_config.{'.'.join(parts[:depth + 1])}", "optkit")
        shown = key if depth == 0 else ".".join(parts[:depth + 1])
        effect = "; vllm-ascend rejects unknown keys there: the server would stop at start-up" \
            if section.unknown_keys == "rejected" else ""
        knows = f" (it knows {', '.join(sorted(section.keys))})" if depth else ""
        named = repr(shown) if depth == 0 else shown
        problems.append(f"{_who(owner)}: --additional-config key {named} is not read by "
                        f"vllm-ascend {version}{knows}{_hint(key, section.keys)}{effect}{_pending_note(lock, owner)}")
    return _result("config-keys", problems, f"{len(top.keys)} top-level keys in the tree"
                   + (", unknown keys rejected" if top.unknown_keys == "rejected" else ""))


def _leaf_paths(fragment: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in sorted(fragment.items()):
        out += _leaf_paths(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [f"{prefix}{key}"]
    return out


def ascend_config_request(lock: dict, knobs, root: Path) -> dict:
    """What ``ascend_config_probe`` gets: the fragment, the keys ``init_ascend_config`` takes out
    itself, and the tree to import ``AscendConfig`` from."""
    return {"additional_config": lock["launch"]["additional_config"],
            "factory": list(knobs.additional_config.factory), "tree": str(root)}


def check_ascend_config(lock: dict, knobs, result: dict | None = None, *, python: str | None = None,
                        root: Path | None = None, missing: str = "") -> Check:
    """On a strict release (pydantic AscendConfig, 0.27.1rc1 on): the tree's own AscendConfig
    validates the --additional-config (``result``: the probe's answer at hand; else, with ``python``,
    a session of its own on the tree ``root``; else skipped, ``missing`` says why)."""
    if knobs.additional_config.unknown_keys != "rejected":
        return Check("ascend-config", "skipped", [], "a lenient release: unknown keys are ignored, checked statically by config-keys")
    if result is None and python is not None:
        with probe_session(python) as probe:
            probe.ask("ascend-config", ascend_config_request(lock, knobs, root))
            result = probe.answers()[0]
    if result is None:
        return Check("ascend-config", "skipped", [], f"skipped: {missing}")
    if result["status"] == "skipped":
        return Check("ascend-config", "skipped", [], f"skipped: {result['reason']}")
    sources = lock["launch"]["sources"]
    problems = [f"{_who(sources.get('additional_config.' + p['loc'], 'optkit'))}: AscendConfig rejects "
                f"--additional-config {p['loc'] or '(whole)'}: {p['message']}" for p in result["problems"]]
    return _result("ascend-config", problems, f"vllm-ascend {lock['versions']['vllm_ascend']}'s AscendConfig")


def _hint(name: str, known) -> str:
    hint = did_you_mean(name, sorted(known))
    return f"; {hint}" if hint else ""


def check_env(lock: dict, knobs) -> Check:
    """Every env var is in the tree's envs.py (``knobs``: its ``tree_knobs``) or marked external."""
    names = set(knobs.env) | set(knobs.env_read)
    version = lock["versions"]["vllm_ascend"]
    roles = lock["launch"].get("roles") or {"": lock["launch"]}  # a PD bundle: every role's env.sh
    env = {(e["name"], e["recipe"]): e for launch in roles.values() for e in launch["env"]}.values()
    problems = [
        f"{_who(e['recipe'])}: env var {e['name']} is not defined in vllm-ascend {version}'s vllm_ascend/envs.py "
        f"and the recipe does not mark it external{_hint(e['name'], names)}{_pending_note(lock, e['recipe'])}"
        for e in env if not e.get("external") and e["name"] not in names]
    return _result("env", problems, f"{len(knobs.env)} env vars in envs.py, {len(knobs.env_read)} read directly")


# --------------------------------------------------------------------------- pd


def check_pd(lock: dict, root: Path) -> Check:
    """A PD bundle's KV transfer and proxy against the tree (``ast``, nothing imported): the connector
    is one the tree registers with vLLM's ``KVConnectorFactory``, and the proxy script is there with every
    option proxy.sh passes."""
    from optkit.versions.pd import REGISTRY, pd_release

    pd, version = lock["launch"]["pd"], lock["versions"]["vllm_ascend"]
    problems = []
    registered = _string_calls(root / REGISTRY, "register_connector")
    if pd["connector"] not in registered:
        problems.append(f"the request (--pd): kv_connector {pd['connector']!r} is not registered by vllm-ascend {version} "
                        f"({REGISTRY} registers {', '.join(sorted(registered)) or 'none'}){_hint(pd['connector'], registered)}")
    script = root / pd["proxy"]["script"]
    if not script.is_file():
        problems.append(f"the request (--pd): the proxy {pd['proxy']['script']} is not in vllm-ascend {version}'s tree")
    else:
        options = _string_calls(script, "add_argument")
        missing = [o for o in pd_release(version).proxy_options if o not in options]
        if missing:
            problems.append(f"the request (--pd): {pd['proxy']['script']} has no option {', '.join(missing)} (proxy.sh passes them)")
    return _result("pd", problems, f"{pd['connector']} registered, proxy {pd['proxy']['script']}")


def _string_calls(path: Path, name: str) -> set[str]:
    """The first argument of every ``….name("…", …)`` call in the Python file ``path`` (none if it is missing)."""
    import ast

    if not path.is_file():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == name
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


# --------------------------------------------------------------------------- scripts


def check_scripts(bundle: Path) -> Check:
    """``bash -n`` and ``shellcheck -x`` (run in each script's directory, so ``source env.sh`` resolves;
    a PD bundle's role directories too)."""
    folders = [bundle] + [bundle / role for role in ("prefill", "decode") if (bundle / role / "serve.sh").is_file()]
    groups = [(folder, sorted(p.name for p in folder.glob("*.sh"))) for folder in folders]
    problems = []
    for folder, scripts in groups:
        shown = "" if folder == bundle else f"{folder.name}/"
        for name in scripts:
            proc = subprocess.run(["bash", "-n", name], cwd=folder, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT)
            if proc.returncode:
                problems.append(f"optkit: {shown}{name}: bash -n: {proc.stderr.strip()}")
    if shutil.which("shellcheck") is None:
        return Check("scripts", "fail" if problems else "skipped", problems,
                     "shellcheck not installed (apt-get install shellcheck); ran bash -n only")
    for folder, scripts in groups:
        proc = subprocess.run(["shellcheck", "-x", *scripts], cwd=folder, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT)
        if proc.returncode:
            problems.append(f"optkit: shellcheck{' in ' + folder.name + '/' if folder != bundle else ''}:\n{proc.stdout.strip()}")
    return _result("scripts", problems, f"{sum(len(s) for _, s in groups)} scripts")
