"""Turn a Plan into a launch bundle: a directory that runs on the NPU host with bash alone.

``bundle_files(plan, workspace)`` renders every file as bytes (a pure function: same request and
catalog, same bytes; no timestamps, no absolute paths of this machine, no host names);
``write_bundle`` writes them to a temporary sibling directory and renames it into place, so a
reader never sees a half-written bundle. The lock (``optkit.lock.json``) follows the bundle
contract that ``optkit apply`` consumes (``optkit.tree.patchset``); ``launch.argv`` in it is the exact
``vllm serve`` argument list that ``serve.sh`` runs, which ``optkit bundle check`` verifies.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from optkit import __version__
from optkit.errors import OptkitError
from optkit.tree.patchset import LOCK_NAME, LOCK_VERSION
from optkit.resolve.plan import Plan, Workspace
from optkit.resolve.report import dump_json, facts_data, plan_data
from optkit.resolve.request import Request
from optkit.catalog.schema import Recipe, Verification, compiled

DEFAULT_PORT = "8000"
EXECUTABLE = 0o755
REGULAR = 0o644
MIN_CANN = {"0.23.0": "9.0.1"}
"""Lowest CANN per vllm-ascend release (seed map A.1: the 0.23.0 release notes say 9.0.1)."""
TORCH_NPU_PIN = {"0.23.0": "2.10.0.post4"}
"""torch-npu that vllm-ascend pins (PKG-INFO Requires-Dist, seed map A.1)."""
DEVICE_RESOURCE = {"A3": "huawei.com/ascend-1980", "A2": "huawei.com/Ascend910"}
"""Ascend device-plugin resource name per device generation."""
EXTRA_ARGS = '${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}'
PLACEHOLDERS = ("$MODEL", "$SERVED_NAME", "$PORT")
_TOP_LEVEL = {LOCK_NAME, "README.md", "env.sh", "serve.sh", "preflight.sh", "apply.sh", "build-kernels.sh",
              "bench.sh", "expected.json", "patches", "k8s"}


class BundleWriteError(OptkitError):
    """A bundle that cannot be written (occupied directory, missing patch file, changed catalog)."""


def compact_json(data: Any) -> str:
    """JSON for command-line values: one line, sorted keys."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- write


def write_bundle(plan: Plan, workspace: Workspace, out_dir: Path, *, k8s: bool = False) -> list[Path]:
    """Write the bundle of ``plan`` to ``out_dir`` all at once; return the files written.

    ``out_dir`` must be absent, empty, or a previous bundle (it has ``optkit.lock.json`` and
    nothing a bundle does not contain, so no benchmark results are lost); it is then replaced.
    """
    files = bundle_files(plan, workspace, k8s=k8s)
    out_dir = Path(out_dir).absolute()
    _check_target(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    try:
        for rel, data in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(EXECUTABLE if rel.endswith(".sh") and rel != "env.sh" else REGULAR)
        staging.chmod(0o755)
        _swap_into_place(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out_dir / rel for rel in sorted(files)]


def _check_target(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise BundleWriteError(f"{out_dir} is a file; give a new or empty directory for the bundle")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    if not (out_dir / LOCK_NAME).is_file():
        raise BundleWriteError(f"{out_dir} is not empty and is not an optkit bundle (no {LOCK_NAME}); "
                               "give a new or empty directory")
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in _TOP_LEVEL)
    if foreign:
        raise BundleWriteError(f"{out_dir} is a previous bundle but also holds {', '.join(foreign)}, which "
                               "rewriting it would delete; move them out or write to another directory")


def _swap_into_place(staging: Path, out_dir: Path) -> None:
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        out_dir.rmdir()
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    old.rmdir()
    out_dir.rename(old)
    try:
        staging.rename(out_dir)
    except OSError:
        old.rename(out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------- files


def bundle_files(plan: Plan, workspace: Workspace, *, k8s: bool = False) -> dict[str, bytes]:
    """Every file of the bundle, by relative path (pure: nothing is read but the catalog)."""
    launch = Launch(plan, workspace)
    lock = lock_data(plan, workspace, launch, k8s=k8s)
    texts = {
        LOCK_NAME: dump_json(lock),
        "env.sh": env_sh(launch),
        "serve.sh": serve_sh(launch),
        "preflight.sh": preflight_sh(launch, lock),
        "apply.sh": apply_sh(lock),
        "bench.sh": bench_sh(launch),
        "expected.json": dump_json(expected_data(plan, workspace)),
        "README.md": readme(plan, workspace, launch, lock, k8s),
        "patches/series": "".join(p["name"] + "\n" for p in lock["patches"]),
    }
    if launch.kernels:
        texts["build-kernels.sh"] = build_kernels_sh(launch)
    if k8s:
        texts["k8s/deployment.yaml"] = deployment_yaml(launch)
    files = {rel: text.encode("utf-8") for rel, text in texts.items()}
    for entry in lock["patches"]:
        files[f"patches/{entry['name']}"] = workspace.catalog.patch_path(entry["recipe"], entry["file"]).read_bytes()
    return dict(sorted(files.items()))


class Launch:
    """What serving needs, derived once from a plan: the argv (with who set each part) and env."""

    def __init__(self, plan: Plan, workspace: Workspace):
        self.plan = plan
        self.catalog = workspace.catalog
        self.recipes: list[Recipe] = [workspace.catalog[rid] for rid in plan.selected]
        self.model_default = plan.model.hf_id
        self.served_name = plan.model.id
        self.speculative, self.speculative_sources = speculative_config(plan)
        self.argv, self.sources = serve_argv(plan, self.speculative, self.speculative_sources)
        self.env = [{"name": s.key, "value": s.value, "recipe": s.recipe,
                     "external": self._env_var(s.recipe, s.key).external} for s in plan.env]
        self.build_env = [(e, r.id) for r in self.recipes for e in r.env if e.build_time]
        self.kernels = [(kernel, r.id) for r in self.recipes for kernel in r.kernels]

    def _env_var(self, rid: str, name: str):
        return next(e for e in self.catalog[rid].env if e.name == name)

    @property
    def devices(self) -> int:
        return self.plan.request.tp * self.plan.request.dp

    @property
    def parameters(self) -> dict[str, str]:
        return {"MODEL": self.model_default, "SERVED_NAME": self.served_name, "PORT": DEFAULT_PORT}


def speculative_config(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """The --speculative-config: MTP from the request (k tokens), then recipes' fragments on top."""
    config: dict[str, Any] = {}
    sources: list[str] = []
    if plan.request.mtp:
        config = {"method": "mtp", "num_speculative_tokens": plan.request.k}
        sources.append("request")
    if plan.speculative_config:
        config.update(plan.speculative_config)
        sources.extend(_sources(plan, "speculative_config"))
    return config, sources


def _sources(plan: Plan, prefix: str) -> list[str]:
    """Recipes that set anything under ``prefix`` (selected order)."""
    owners = {r for key, r in plan.config_sources.items() if key.startswith(prefix + ".")}
    return [rid for rid in plan.selected if rid in owners]


def serve_argv(plan: Plan, speculative: dict, speculative_sources: list[str]) -> tuple[list[str], list[str]]:
    """``vllm serve`` argv (``$MODEL``/``$SERVED_NAME``/``$PORT`` stand for serve.sh's parameters)
    and, per token, who put it there (``optkit``, ``request`` or comma-joined recipe ids)."""
    request, facts = plan.request, plan.facts
    parts: list[tuple[list[str], str]] = [
        (["vllm", "serve", "$MODEL", "--served-model-name", "$SERVED_NAME", "--port", "$PORT"], "optkit"),
        (["--tensor-parallel-size", str(request.tp)], "request"),
    ]
    if request.dp > 1:
        parts.append((["--data-parallel-size", str(request.dp)], "request"))
    parts.append((["--dtype", request.dtype], "request"))
    if facts["parallel.ep"]:
        parts.append((["--enable-expert-parallel"], "request"))
    if not request.async_scheduling:
        parts.append((["--no-async-scheduling"], "request"))
    parts.append((["--enable-prefix-caching" if request.prefix_caching else "--no-enable-prefix-caching"], "request"))
    if request.enforce_eager:
        parts.append((["--enforce-eager"], "request"))
    for flag, value, owners in [
        ("--compilation-config", plan.compilation_config, _sources(plan, "compilation_config")),
        ("--speculative-config", speculative, speculative_sources),
        ("--additional-config", plan.additional_config, _sources(plan, "additional_config")),
    ]:
        if value:
            parts.append(([flag, compact_json(value)], ",".join(owners)))
    for setting in plan.serve_args:
        parts.append((shlex.split(setting.key), setting.recipe))
    argv = [token for tokens, _ in parts for token in tokens]
    sources = [owner for tokens, owner in parts for _ in tokens]
    return argv, sources


# --------------------------------------------------------------------------- lock


def catalog_sha256(root: Path) -> str:
    """sha256 over every ``recipes/*/recipe.yaml`` and ``recipes/*/*.patch``, sorted by path."""
    return _files_sha256(root, ["recipes/*/recipe.yaml", "recipes/*/*.patch"])


def profiles_sha256(root: Path) -> str:
    """sha256 over the other plan inputs: model and target profiles, baselines, kernel specs."""
    return _files_sha256(root, ["models/*.yaml", "models/reference/*.yaml", "targets/*.yaml", "kernels/*/kernel.yaml"])


def _files_sha256(root: Path, patterns: list[str]) -> str:
    digest = hashlib.sha256()
    paths = sorted({p.relative_to(root).as_posix() for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    for rel in paths:
        data = (root / rel).read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def lock_data(plan: Plan, workspace: Workspace, launch: Launch, *, k8s: bool = False) -> dict[str, Any]:
    """The lock, per the bundle contract (plus ``launch.argv`` and what ``bundle check`` needs)."""
    data = plan_data(plan)
    patches, pending = _patch_entries(plan, workspace)
    root = workspace.catalog.root
    launch_data = dict(data["launch"])
    launch_data.update(env=launch.env, argv=launch.argv, argv_sources=launch.sources,
                       parameters=launch.parameters, effective_speculative_config=launch.speculative)
    return {
        "lock_version": LOCK_VERSION,
        "optkit": {"version": __version__, "catalog_sha256": catalog_sha256(root), "profiles_sha256": profiles_sha256(root)},
        "request": plan.request.model_dump(by_alias=True, mode="json"),
        "facts": facts_data(plan),
        "selected": list(plan.selected),
        "recipes": {r.id: _recipe_entry(r) for r in launch.recipes},
        "decisions": data["decisions"],
        "patches": patches,
        "pending_patches": pending,
        "kernels": [{"spec": kernel, "recipe": rid} for kernel, rid in launch.kernels],
        "launch": launch_data,
        "target": {"id": plan.target.id, "soc_version": plan.target.default_soc_version,
                   "soc_versions": list(plan.target.soc_versions)},
        "versions": {"vllm_ascend": str(plan.facts["versions.vllm_ascend"]), "vllm": str(plan.facts["versions.vllm"])},
        "bundle": {"k8s": k8s},
    }


def _recipe_entry(recipe: Recipe) -> dict[str, Any]:
    return {"kind": recipe.kind.value, "title": recipe.title,
            "versions": {"vllm_ascend": recipe.versions.vllm_ascend, "vllm": recipe.versions.vllm},
            "verification": recipe.verification.level.value, "needs_npu": recipe.verification.needs_npu}


def _patch_entries(plan: Plan, workspace: Workspace) -> tuple[list[dict], list[dict]]:
    patches, pending = [], []
    for rid in plan.selected:
        for patch in workspace.catalog[rid].patches:
            if patch.status == "pending":
                pending.append({"recipe": rid, "file": patch.file})
                continue
            path = workspace.catalog.patch_path(rid, patch.file)
            if not path.is_file():
                raise BundleWriteError(f"recipe {rid}: patch file recipes/{rid}/{patch.file} is missing "
                                       "(its status is 'present'); write it or mark it 'pending'")
            patches.append({"recipe": rid, "file": patch.file, "name": f"{len(patches) + 1:04d}-{rid}--{patch.file}",
                            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "targets": list(patch.targets)})
    return patches, pending


def request_from_lock(lock_path: Path, workspace: Workspace) -> tuple[Request, dict]:
    """The Request a lock was written for, refused if the catalog changed since (else the bundle
    would differ); also the lock's ``bundle`` options."""
    try:
        lock = json.loads(Path(lock_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleWriteError(f"{lock_path}: not a readable optkit lock: {exc}") from None
    if not isinstance(lock, dict) or lock.get("lock_version") != LOCK_VERSION:
        raise BundleWriteError(f"{lock_path}: not an optkit lock of lock_version {LOCK_VERSION}")
    root = workspace.catalog.root
    for key, now in (("catalog_sha256", catalog_sha256(root)), ("profiles_sha256", profiles_sha256(root))):
        then = lock.get("optkit", {}).get(key)
        if then != now:
            what = "recipe catalog (recipes/)" if key == "catalog_sha256" else "model/target profiles"
            raise BundleWriteError(
                f"the {what} changed since the lock was written ({key} {then} in the lock, {now} now); "
                "the same bundle cannot be reproduced: check out the catalog the lock was made with, "
                "or plan again without --from-lock")
    from pydantic import ValidationError

    try:
        request = Request.model_validate(lock["request"])
    except (KeyError, ValidationError) as exc:
        raise BundleWriteError(f"{lock_path}: request: {exc}") from None
    return request, lock.get("bundle", {})


# --------------------------------------------------------------------------- scripts

_HEADER = "# Generated by optkit {version} for {model} on {target}; do not edit (re-run `optkit plan -o`).\n"


def _header(launch: Launch) -> str:
    return _HEADER.format(version=__version__, model=launch.plan.model.id, target=launch.plan.target.id)


def env_sh(launch: Launch) -> str:
    lines = ["# shellcheck shell=bash", _header(launch).rstrip("\n"),
             "# Sourced by serve.sh. Each variable names the recipe that set it."]
    for entry in launch.env:
        note = " (CANN/HCCL/PyTorch, not vllm-ascend)" if entry["external"] else ""
        lines.append(f"export {entry['name']}={shlex.quote(entry['value'])}  # {entry['recipe']}{note}")
    if not launch.env:
        lines.append("# (no recipe sets an environment variable)")
    return "\n".join(lines) + "\n"


def _argv_lines(argv: list[str]) -> list[str]:
    """The serve argv as shell words, one option (with its value) per line."""
    words = [token if token in PLACEHOLDERS else shlex.quote(token) for token in argv[3:]]
    words = [f'"{w}"' if w in PLACEHOLDERS else w for w in words]
    lines, current = [], []
    for word in words:
        if word.startswith("--") and current:
            lines.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        lines.append(" ".join(current))
    return lines


def serve_sh(launch: Launch) -> str:
    params = launch.parameters
    model_default = (f'MODEL="${{MODEL:-{params["MODEL"]}}}"' if _plain(params["MODEL"])
                     else 'MODEL="${MODEL:-}"')
    body = " \\\n  ".join(['exec vllm serve "$MODEL"', *_argv_lines(launch.argv), EXTRA_ARGS])
    return SERVE_SH.format(header=_header(launch), model_default=model_default,
                           served_default=shlex.quote(params["SERVED_NAME"]), port_default=params["PORT"],
                           command=body)


def _plain(text: str) -> bool:
    return bool(text) and shlex.quote(text) == text


SERVE_SH = r"""#!/usr/bin/env bash
{header}# Serve the model with the plan's settings.
#   ./serve.sh [--model M] [--served-model-name S] [--port N] [-- extra `vllm serve` arguments]
# MODEL, SERVED_NAME and PORT may also be set in the environment.
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
{model_default}
SERVED_NAME="${{SERVED_NAME:-{served_default}}}"
PORT="${{PORT:-{port_default}}}"
EXTRA_ARGS=()

usage() {{
  sed -n '3,5p' "$0" | sed 's/^# \{{0,1\}}//'
}}

need_value() {{
  if [ "$#" -lt 2 ]; then
    echo "serve.sh: $1 needs a value" >&2
    exit 2
  fi
}}

while [ "$#" -gt 0 ]; do
  case "$1" in
    --model) need_value "$@"; MODEL="$2"; shift 2 ;;
    --model=*) MODEL="${{1#--model=}}"; shift ;;
    --served-model-name) need_value "$@"; SERVED_NAME="$2"; shift 2 ;;
    --served-model-name=*) SERVED_NAME="${{1#--served-model-name=}}"; shift ;;
    --port) need_value "$@"; PORT="$2"; shift 2 ;;
    --port=*) PORT="${{1#--port=}}"; shift ;;
    --) shift; EXTRA_ARGS=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "serve.sh: unknown option: $1 (put extra vllm serve arguments after --)" >&2; exit 2 ;;
  esac
done

if [ -z "$MODEL" ]; then
  echo "serve.sh: no model: pass --model PATH_OR_HF_ID" >&2
  exit 2
fi
case "$MODEL" in
  -*) echo "serve.sh: the model must not start with '-': $MODEL" >&2; exit 2 ;;
esac
case "$PORT" in
  ''|*[!0-9]*) echo "serve.sh: --port must be a number, got: $PORT" >&2; exit 2 ;;
esac

# shellcheck source=env.sh
. "$HERE/env.sh"

{command}
"""


def preflight_sh(launch: Launch, lock: dict) -> str:
    plan = launch.plan
    version = lock["versions"]["vllm_ascend"]
    names = " ".join(shlex.quote(p["name"]) for p in lock["patches"])
    pending = " ".join(shlex.quote(f"{p['recipe']}/{p['file']}") for p in lock["pending_patches"])
    return PREFLIGHT_SH.format(
        header=_header(launch), pattern=shlex.quote(plan.target.npu_smi_name_pattern),
        target=shlex.quote(plan.target.title), devices=launch.devices, tp=plan.request.tp, dp=plan.request.dp,
        min_cann=MIN_CANN.get(version, ""), vllm_ascend=version, vllm=lock["versions"]["vllm"],
        torch_npu=TORCH_NPU_PIN.get(version, ""), patch_names=names, pending=pending)


PREFLIGHT_SH = r"""#!/usr/bin/env bash
{header}# Check the NPU host before serving: chip, devices, CANN, Python packages, patches, host
# settings. Prints PASS/FAIL/WARN per check; exits 1 if anything FAILed.
#   ./preflight.sh [VLLM_ASCEND_TREE]
# Environment: PYTHON (default python3), ASCEND_TOOLKIT_HOME (default
# /usr/local/Ascend/ascend-toolkit/latest), VLLM_ASCEND_TREE (default: where vllm_ascend is installed).
set -uo pipefail
PYTHON="${{PYTHON:-python3}}"
TOOLKIT="${{ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}}"
CHIP_PATTERN={pattern}
TARGET={target}
NEED_DEVICES={devices}
MIN_CANN='{min_cann}'
WANT_VLLM_ASCEND='{vllm_ascend}'
WANT_VLLM='{vllm}'
WANT_TORCH_NPU='{torch_npu}'
PATCHES=({patch_names})
PENDING=({pending})
FAILED=0

pass() {{ printf 'PASS  %s\n' "$*"; }}
fail() {{ printf 'FAIL  %s\n' "$*"; FAILED=1; }}
warn() {{ printf 'WARN  %s\n' "$*"; }}

version_ge() {{  # version_ge A B: A >= B
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}}

check_chip() {{
  if ! command -v npu-smi >/dev/null 2>&1; then
    fail "npu-smi: not found on PATH (install the Ascend driver, or run inside the NPU container)"
    return
  fi
  local info
  if ! info="$(npu-smi info 2>&1)"; then
    fail "npu-smi info: failed: $(printf '%s' "$info" | head -n 1)"
    return
  fi
  if printf '%s' "$info" | "$PYTHON" -c 'import re, sys; sys.exit(0 if re.search(sys.argv[1], sys.stdin.read()) else 1)' "$CHIP_PATTERN"; then
    pass "chip: npu-smi reports a $TARGET"
  else
    fail "chip: npu-smi info does not show a $TARGET (pattern $CHIP_PATTERN); this bundle was planned for it"
  fi
}}

check_devices() {{
  local count
  if [ -n "${{ASCEND_RT_VISIBLE_DEVICES:-}}" ]; then
    count="$(printf '%s' "$ASCEND_RT_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)"
  else
    count="$(find /dev -maxdepth 1 -name 'davinci[0-9]*' 2>/dev/null | wc -l)"
  fi
  if [ "$count" -ge "$NEED_DEVICES" ]; then
    pass "devices: $count visible, TP{tp} x DP{dp} needs $NEED_DEVICES"
  else
    fail "devices: $count visible, TP{tp} x DP{dp} needs $NEED_DEVICES (check ASCEND_RT_VISIBLE_DEVICES and the container's devices)"
  fi
}}

check_cann() {{
  local file version=""
  for file in "$TOOLKIT"/*/ascend_toolkit_install.info "$TOOLKIT"/version.cfg "$TOOLKIT"/*/version.cfg; do
    [ -f "$file" ] || continue
    version="$(grep -m 1 -E '^(version|Version)=' "$file" | cut -d= -f2 | tr -d '"[:space:]')"
    [ -n "$version" ] && break
  done
  if [ -z "$version" ]; then
    fail "CANN: no ascend_toolkit_install.info or version.cfg under $TOOLKIT (set ASCEND_TOOLKIT_HOME)"
  elif [ -z "$MIN_CANN" ]; then
    warn "CANN: $version (no known minimum for vllm-ascend $WANT_VLLM_ASCEND)"
  elif version_ge "$version" "$MIN_CANN"; then
    pass "CANN: $version (>= $MIN_CANN)"
  else
    fail "CANN: $version is older than $MIN_CANN, which vllm-ascend $WANT_VLLM_ASCEND needs"
  fi
}}

dist_version() {{
  "$PYTHON" -c 'import importlib.metadata as m, sys
try:
    print(m.version(sys.argv[1]))
except m.PackageNotFoundError:
    pass' "$1" 2>/dev/null
}}

check_package() {{  # check_package DIST WANTED SEVERITY
  local have
  have="$(dist_version "$1")"
  if [ -z "$have" ]; then
    fail "$1: not installed in $PYTHON"
  elif [ -z "$2" ] || [ "$have" = "$2" ]; then
    pass "$1: $have"
  elif [ "$3" = warn ]; then
    warn "$1: $have, but vllm-ascend $WANT_VLLM_ASCEND pins $2"
  else
    fail "$1: $have, but this bundle was planned for $2"
  fi
}}

check_patches() {{
  local tree="${{1:-${{VLLM_ASCEND_TREE:-}}}}" listing="" name missing=0
  if [ "${{#PENDING[@]}}" -gt 0 ]; then
    warn "patches not written yet (status pending), so their recipes are incomplete: ${{PENDING[*]}}"
  fi
  if [ "${{#PATCHES[@]}}" -eq 0 ]; then
    pass "patches: this bundle has none to apply"
    return
  fi
  if [ -z "$tree" ]; then
    tree="$("$PYTHON" -c 'import importlib.util, os
spec = importlib.util.find_spec("vllm_ascend")
print(os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else "")' 2>/dev/null)"
  fi
  if [ -z "$tree" ] || [ ! -d "$tree/vllm_ascend" ]; then
    fail "patches: no vllm-ascend tree found (pass it as the first argument or set VLLM_ASCEND_TREE)"
    return
  fi
  if command -v optkit >/dev/null 2>&1; then
    listing="$(optkit status --tree "$tree" --json 2>/dev/null || true)"
  fi
  for file in "$tree/.optkit/state.json" "$tree/.optkit/apply-sh.done"; do
    [ -f "$file" ] && listing="$listing$(cat "$file")"
  done
  for name in "${{PATCHES[@]}}"; do
    if ! printf '%s' "$listing" | grep -qF -- "$name"; then
      fail "patch $name is not applied to $tree (run ./apply.sh $tree or optkit apply)"
      missing=1
    fi
  done
  [ "$missing" -eq 0 ] && pass "patches: all ${{#PATCHES[@]}} applied to $tree"
}}

check_host() {{  # generic host settings from vllm-ascend's Atlas A3 tuning docs: warnings only
  local governor swappiness numa
  governor="$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || true)"
  swappiness="$(cat /proc/sys/vm/swappiness 2>/dev/null || true)"
  numa="$(cat /proc/sys/kernel/numa_balancing 2>/dev/null || true)"
  if [ "$governor" = performance ]; then pass "cpu governor: performance"
  else warn "cpu governor: ${{governor:-unknown}} (recommended: performance)"; fi
  if [ "$swappiness" = 0 ]; then pass "vm.swappiness: 0"
  else warn "vm.swappiness: ${{swappiness:-unknown}} (recommended: 0)"; fi
  if [ "$numa" = 0 ]; then pass "kernel.numa_balancing: 0"
  else warn "kernel.numa_balancing: ${{numa:-unknown}} (recommended: 0)"; fi
}}

check_chip
check_devices
check_cann
check_package vllm_ascend "$WANT_VLLM_ASCEND" fail
check_package vllm "$WANT_VLLM" fail
check_package torch_npu "$WANT_TORCH_NPU" warn
check_patches "${{1:-}}"
check_host

if [ "$FAILED" -ne 0 ]; then
  echo "preflight: FAILED; fix the FAIL lines above before ./serve.sh" >&2
  exit 1
fi
echo "preflight: ok"
"""


def apply_sh(lock: dict) -> str:
    pending = " ".join(shlex.quote(f"{p['recipe']}/{p['file']}") for p in lock["pending_patches"])
    return APPLY_SH.format(version=__version__, vllm_ascend=lock["versions"]["vllm_ascend"], pending=pending)


APPLY_SH = r"""#!/usr/bin/env bash
# Generated by optkit {version}; do not edit.
# Apply this bundle's patches (patches/series, in order) to a vllm-ascend tree without optkit.
#   ./apply.sh [--allow-pending] TREE       apply
#   ./apply.sh --revert TREE                undo what apply.sh applied (reverse order)
# Each patch is checked before it is applied; if one fails, the ones already applied are
# reverted. `optkit apply BUNDLE --tree TREE` is the atomic, journaled path (all patches checked
# together on a scratch copy, interrupted runs recovered); use it when optkit is available.
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
WANT_VERSION='{vllm_ascend}'
PENDING=({pending})
MODE=apply
ALLOW_PENDING=0

while [ "$#" -gt 0 ]; do
  case "$1" in
    --revert) MODE=revert; shift ;;
    --allow-pending) ALLOW_PENDING=1; shift ;;
    -h|--help) sed -n '3,8p' "$0"; exit 0 ;;
    -*) echo "apply.sh: unknown option: $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ "$#" -ne 1 ]; then
  echo "usage: apply.sh [--allow-pending|--revert] TREE" >&2
  exit 2
fi
TREE="$(cd "$1" && pwd)"
DONE="$TREE/.optkit/apply-sh.done"

if [ ! -f "$TREE/vllm_ascend/_version.py" ]; then
  echo "apply.sh: $TREE is not a vllm-ascend tree (no vllm_ascend/_version.py)" >&2
  exit 1
fi
HAVE_VERSION="$(sed -n -E "s/^__version__ .*= *['\"]([^'\"]+)['\"].*$/\1/p" "$TREE/vllm_ascend/_version.py" | head -n 1)"
if [ "$HAVE_VERSION" != "$WANT_VERSION" ]; then
  echo "apply.sh: $TREE is vllm-ascend ${{HAVE_VERSION:-unknown}}, this bundle is for $WANT_VERSION; nothing changed" >&2
  exit 1
fi

run_patch() {{  # run_patch FILE [--check] [--reverse]
  local file="$1" check="" reverse=""
  shift
  for flag in "$@"; do
    case "$flag" in --check) check=1 ;; --reverse) reverse=1 ;; esac
  done
  if command -v git >/dev/null 2>&1; then
    # GIT_CEILING_DIRECTORIES: never let git resolve paths against an enclosing repository.
    (cd "$TREE" && GIT_CEILING_DIRECTORIES="$(dirname "$TREE")" \
      git -c safe.directory="$TREE" apply -p1 --whitespace=nowarn ${{check:+--check}} ${{reverse:+--reverse}} < "$file")
  else
    (cd "$TREE" && patch -p1 --forward --silent ${{check:+--dry-run}} ${{reverse:+--reverse}} < "$file")
  fi
}}

if [ "$MODE" = revert ]; then
  if [ ! -f "$DONE" ]; then
    echo "apply.sh: nothing to revert ($DONE not found)"
    exit 0
  fi
  mapfile -t APPLIED < "$DONE"
  for ((i = ${{#APPLIED[@]}} - 1; i >= 0; i--)); do
    name="${{APPLIED[$i]}}"
    [ -n "$name" ] || continue
    run_patch "$HERE/patches/$name" --reverse
    echo "reverted $name"
  done
  rm -f "$DONE"
  exit 0
fi

if [ "${{#PENDING[@]}}" -gt 0 ] && [ "$ALLOW_PENDING" -ne 1 ]; then
  echo "apply.sh: these recipes need patches that are not written yet: ${{PENDING[*]}}" >&2
  echo "apply.sh: applying the rest would leave them half done; pass --allow-pending to apply anyway" >&2
  exit 1
fi
if [ -f "$DONE" ] || [ -f "$TREE/.optkit/state.json" ]; then
  echo "apply.sh: $TREE already has patches applied (.optkit/); revert them first" >&2
  exit 1
fi

NAMES=()
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in ''|'#'*) continue ;; esac
  NAMES+=("$line")
done < "$HERE/patches/series"
if [ "${{#NAMES[@]}}" -eq 0 ]; then
  echo "apply.sh: this bundle has no patches; nothing to do"
  exit 0
fi

APPLIED=()
rollback() {{
  for ((i = ${{#APPLIED[@]}} - 1; i >= 0; i--)); do
    run_patch "$HERE/patches/${{APPLIED[$i]}}" --reverse || echo "apply.sh: could not revert ${{APPLIED[$i]}}" >&2
  done
}}
for name in "${{NAMES[@]}}"; do
  if ! run_patch "$HERE/patches/$name" --check; then
    echo "apply.sh: $name does not apply to $TREE; reverting the ${{#APPLIED[@]}} patch(es) applied so far" >&2
    rollback
    exit 1
  fi
  run_patch "$HERE/patches/$name"
  APPLIED+=("$name")
  echo "applied $name"
done
mkdir -p "$TREE/.optkit"
printf '%s\n' "${{APPLIED[@]}}" > "$DONE"
echo "apply.sh: applied ${{#APPLIED[@]}} patch(es) to $TREE (recorded in .optkit/apply-sh.done)"
"""


def build_kernels_sh(launch: Launch) -> str:
    target = launch.plan.target
    specs = "\n".join(f"#   kernels/{kernel}/kernel.yaml  (recipe {rid})" for kernel, rid in launch.kernels)
    exports = "\n".join(f"export {e.name}={shlex.quote(e.value)}  # {rid}" for e, rid in launch.build_env)
    scope = ("the whole Atlas A3 custom-op package (~41 ops)" if target.device_generation == "A3"
             else f"the whole custom-op package of {target.soc_family}")
    return BUILD_SH.format(header=_header(launch), specs=specs, scope=scope, exports=exports or "# (none)",
                           default=target.default_soc_version, valid=" ".join(target.soc_versions),
                           family=target.soc_family)


BUILD_SH = r"""#!/usr/bin/env bash
{header}# Rebuild vllm-ascend's custom ops after the patches are applied (./apply.sh TREE first).
#   ./build-kernels.sh TREE        (SOC_VERSION may be set; default {default})
# `python3 setup.py build_ext --inplace` with COMPILE_CUSTOM_KERNELS=1 rebuilds {scope}
# and the torch binding: there is no per-op build. Needs CANN, bisheng and the catlass submodule;
# takes tens of minutes. Kernel specs involved:
{specs}
set -euo pipefail
if [ "$#" -ne 1 ]; then
  echo "usage: build-kernels.sh TREE" >&2
  exit 2
fi
TREE="$1"
SOC_VERSION="${{SOC_VERSION:-{default}}}"
VALID=" {valid} "
case "$VALID" in
  *" $SOC_VERSION "*) ;;
  *)
    echo "build-kernels.sh: SOC_VERSION=$SOC_VERSION is not a full SoC name of this target ({valid})." >&2
    if [ "$SOC_VERSION" = '{family}' ]; then
      echo "build-kernels.sh: '{family}' is only the family name; setup.py's SoC map asserts on it." >&2
    fi
    exit 2
    ;;
esac
export SOC_VERSION
export COMPILE_CUSTOM_KERNELS=1
{exports}
cd "$TREE"
python3 setup.py build_ext --inplace
"""


def bench_sh(launch: Launch) -> str:
    request = launch.plan.request
    extra = []
    if request.sampling == "greedy":
        extra += ["--temperature", "0"]
    if request.logprobs:
        extra += ["--logprobs", "1"]
    if request.min_tokens:
        extra += ["--extra-body", compact_json({"min_tokens": request.output_len})]
    runs = "\n".join(f"run {c} {max(10 * c, 20)}" for c in request.concurrency)
    return BENCH_SH.format(header=_header(launch), served=shlex.quote(launch.served_name),
                           model=shlex.quote(launch.model_default) if launch.model_default else "''",
                           input_len=request.input_len, output_len=request.output_len,
                           extra=" ".join(shlex.quote(w) for w in extra), runs=runs)


BENCH_SH = r"""#!/usr/bin/env bash
{header}# Benchmark a running ./serve.sh with the plan's workload (random dataset, {input_len} in /
# {output_len} out), once per concurrency; results go to $RESULT_DIR/c<N>.json.
# Compare them with expected.json (the article's figures; estimates, not guarantees).
# Environment: MODEL, SERVED_NAME, HOST, PORT, RESULT_DIR.
set -euo pipefail
MODEL="${{MODEL:-{model}}}"
SERVED_NAME="${{SERVED_NAME:-{served}}}"
HOST="${{HOST:-127.0.0.1}}"
PORT="${{PORT:-8000}}"
RESULT_DIR="${{RESULT_DIR:-results}}"
if [ -z "$MODEL" ]; then
  echo "bench.sh: set MODEL (the tokenizer / checkpoint the server runs)" >&2
  exit 2
fi
mkdir -p "$RESULT_DIR"

run() {{  # run CONCURRENCY NUM_PROMPTS
  vllm bench serve --backend vllm --model "$MODEL" --served-model-name "$SERVED_NAME" \
    --host "$HOST" --port "$PORT" \
    --dataset-name random --random-input-len {input_len} --random-output-len {output_len} \
    --max-concurrency "$1" --num-prompts "$2" --ignore-eos {extra} \
    --save-result --result-dir "$RESULT_DIR" --result-filename "c$1.json"
}}

{runs}
"""


# --------------------------------------------------------------------------- expected.json, README


def _gain_applies(gain, plan: Plan) -> tuple[bool, str]:
    if gain.mtp is not None and gain.mtp != plan.request.mtp:
        return False, f"measured with MTP {'on' if gain.mtp else 'off'}"
    if gain.concurrency is not None and gain.concurrency not in plan.request.concurrency:
        return False, f"measured at concurrency {gain.concurrency}, not requested"
    return True, ""


def _gain_data(gain) -> dict[str, Any]:
    return gain.model_dump(mode="json", exclude_none=True)


def expected_data(plan: Plan, workspace: Workspace) -> dict[str, Any]:
    """The article's figures for this plan (per recipe) and the plan's TPOT estimate."""
    recipes = {}
    for rid in plan.selected:
        recipe = workspace.catalog[rid]
        applies, other = [], []
        for gain in recipe.gains:
            ok, why = _gain_applies(gain, plan)
            (applies if ok else other).append(_gain_data(gain) if ok else {**_gain_data(gain), "not_applicable": why})
        recipes[rid] = {"gains": applies, "other_reported": other,
                        "verification": recipe.verification.level.value}
    return {
        "label": "ESTIMATES from the article's reported numbers, not measurements of this deployment; "
                 "gains were measured stacked and are not strictly additive",
        "recipes": recipes,
        "estimate": plan_data(plan)["estimate"],
        "workload": {"concurrency": list(plan.request.concurrency), "input_len": plan.request.input_len,
                     "output_len": plan.request.output_len, "dataset": "random"},
    }


def _gain_line(gain) -> str:
    where = f"c{gain.concurrency} " if gain.concurrency else ""
    mtp = "" if gain.mtp is None else (" (MTP on)" if gain.mtp else " (MTP off)")
    numbers = (f"{gain.before:g} → {gain.after:g} {gain.unit}" if gain.delta is None
               else f"{gain.delta:+g} {gain.unit}")
    return f"{where}{gain.metric} {numbers}{mtp} — “{gain.quote}”"


def _below_hardware(recipe: Recipe) -> bool:
    levels = list(Verification)
    return levels.index(recipe.verification.level) < levels.index(Verification.hardware_verified)


def _recipe_section(plan: Plan, recipe: Recipe, lock: dict) -> list[str]:
    decision = plan.resolution.decisions[recipe.id]
    lines = [f"### {recipe.id} — {recipe.title}", "", f"*{recipe.kind.value}*. {recipe.summary}", "",
             f"**Why selected:** {decision.reason}" + (f" ({'; '.join(decision.chain)})" if decision.chain else ""), ""]
    applicable = [g for g in recipe.gains if _gain_applies(g, plan)[0]]
    others = [g for g in recipe.gains if not _gain_applies(g, plan)[0]]
    if applicable or others:
        lines.append("**Expected gains (article figures, not measured here):**")
        lines += [f"- {_gain_line(g)}" for g in applicable]
        lines += [f"- (other conditions) {_gain_line(g)}" for g in others]
        lines.append("")
    risks = [r for r in recipe.risks if r.when is None or compiled(r.when).evaluate(plan.facts.values)]
    if risks:
        lines.append("**Risks:**")
        lines += [f"- {r.severity}: {r.text}" for r in risks]
        lines.append("")
    level = recipe.verification.level.value
    if _below_hardware(recipe):
        lines.append(f"**Verification: {level} — NOT hardware-verified.** {recipe.verification.notes}".rstrip())
    else:
        lines.append(f"**Verification:** {level}. {recipe.verification.notes}".rstrip())
    pending = [p["file"] for p in lock["pending_patches"] if p["recipe"] == recipe.id]
    if pending:
        lines += ["", f"**Patches not written yet (pending):** {', '.join(pending)} — this recipe is "
                      "incomplete until they exist; its settings alone may do nothing or fail."]
    return lines + [""]


def readme(plan: Plan, workspace: Workspace, launch: Launch, lock: dict, k8s: bool) -> str:
    request = plan.request
    mtp = f", MTP k={request.k}" if request.mtp else ""
    lines = [
        f"# Launch bundle: {plan.model.id} on {plan.target.title}", "",
        f"Generated by optkit {__version__}. Request: TP{request.tp} DP{request.dp}, {request.dtype}, "
        f"vllm-ascend {lock['versions']['vllm_ascend']} / vLLM {lock['versions']['vllm']}{mtp}, "
        f"concurrency {', '.join(map(str, request.concurrency))}, {request.input_len} in / {request.output_len} out.",
        "", "## Use", "",
        "1. `./preflight.sh [TREE]` — chip, devices, CANN, package versions, applied patches, host settings.",
        "2. `optkit apply . --tree TREE` (atomic, journaled) or `./apply.sh TREE` (bash only: checks each "
        "patch before applying it and reverts the applied ones if one fails, but is not crash-safe).",
    ]
    if launch.kernels:
        lines.append("3. `./build-kernels.sh TREE` — rebuild the custom-op package (the patches change csrc/).")
    lines += [
        f"{4 if launch.kernels else 3}. `./serve.sh [--model M] [--port N] [-- extra vllm serve args]` — "
        "sources env.sh and runs `vllm serve`.",
        f"{5 if launch.kernels else 4}. `./bench.sh` — `vllm bench serve` per concurrency; compare "
        "`results/c<N>.json` with `expected.json`.", "",
        "Rebuild this exact bundle: `optkit plan --from-lock optkit.lock.json -o DIR` (refused if the catalog changed).",
        "Check it: `optkit bundle check DIR` (vLLM 0.23.0's own argument parser, the tree's config keys and env vars).",
        "",
    ]
    if lock["pending_patches"]:
        listed = ", ".join(f"{p['recipe']}/{p['file']}" for p in lock["pending_patches"])
        lines += ["## Warning: patches not written yet", "",
                  f"These selected recipes need source patches that the catalog does not have yet: {listed}. "
                  "`optkit apply` and `apply.sh` refuse the bundle unless `--allow-pending` is given; without the "
                  "patches, their env vars and config keys are ignored (or unknown) in vllm-ascend "
                  f"{lock['versions']['vllm_ascend']}.", ""]
    lines += ["## Selected recipes (dependency order)", ""]
    for rid in plan.selected:
        lines += _recipe_section(plan, workspace.catalog[rid], lock)
    lines += _estimate_lines(plan)
    lines += _excluded_lines(plan)
    lines += _rollback_lines(lock)
    lines += _files_lines(launch, k8s)
    return "\n".join(lines).rstrip("\n") + "\n"


def _estimate_lines(plan: Plan) -> list[str]:
    lines = ["## TPOT estimate (ESTIMATE, not a measurement)", ""]
    for e in plan.estimates:
        if e.estimate_ms is None:
            lines.append(f"- c{e.concurrency}: expected saving {e.saved_ms:.2f} ms; {e.basis}")
        else:
            lines.append(f"- c{e.concurrency}: {e.baseline_ms} ms − {e.saved_ms:.2f} ms ≈ {e.estimate_ms:.2f} ms ({e.basis})")
    return lines + ["", "The article's gains were measured one after another and are not strictly additive.", ""]


def _excluded_lines(plan: Plan) -> list[str]:
    decisions = plan.resolution.decisions
    left_out = [rid for rid in sorted(decisions) if rid not in plan.selected]
    lines = ["## Not selected", ""]
    lines += [f"- **{rid}** ({decisions[rid].status.value}): {decisions[rid].reason}" for rid in left_out]
    if not left_out:
        lines.append("- (none)")
    return lines + [""]


def _rollback_lines(lock: dict) -> list[str]:
    lines = ["## Roll back", "",
             "- Patches: `optkit revert --tree TREE` (restores the exact pristine bytes), or `./apply.sh --revert TREE`,",
             "  or by hand `git apply -R` of each patch in *reverse* `patches/series` order.",
             "- Settings: drop a recipe's lines from env.sh / its keys from serve.sh, or plan again with `--without RECIPE`.",
             "- Kernels: rebuild from the reverted tree (`./build-kernels.sh TREE` after reverting).", ""]
    if lock["patches"]:
        lines += ["Patch series (apply order):", ""] + [f"- `{p['name']}` ({p['recipe']})" for p in lock["patches"]] + [""]
    return lines


def _files_lines(launch: Launch, k8s: bool) -> list[str]:
    files = [("optkit.lock.json", "everything decided: request, facts, decisions, patches (sha256), launch argv"),
             ("env.sh", "environment variables, each with the recipe that set it"),
             ("serve.sh", "`vllm serve` with the plan's arguments"),
             ("preflight.sh", "host checks (PASS/FAIL/WARN)"),
             ("patches/", "the patch series (quilt style) and apply.sh to apply it without optkit"),
             ("bench.sh", "`vllm bench serve` at each requested concurrency"),
             ("expected.json", "the article's figures for this plan and the TPOT estimate")]
    if launch.kernels:
        files.append(("build-kernels.sh", "custom-op package rebuild"))
    if k8s:
        files.append(("k8s/deployment.yaml", "a Kubernetes Deployment with Ascend device-plugin resources"))
    return ["## Files", ""] + [f"- `{name}` — {what}" for name, what in files] + [""]


# --------------------------------------------------------------------------- k8s


def deployment_yaml(launch: Launch) -> str:
    plan = launch.plan
    resource = DEVICE_RESOURCE[plan.target.device_generation]
    params = launch.parameters
    argv = [params["MODEL"] or "MODEL"] + launch.argv[3:]
    argv = [{"$SERVED_NAME": params["SERVED_NAME"], "$PORT": params["PORT"]}.get(t, t) for t in argv]
    name = "vllm-" + plan.model.id.replace(".", "-").replace("_", "-")
    env = [{"name": e["name"], "value": e["value"]} for e in launch.env]
    container = {
        "name": "vllm", "image": "vllm-ascend:v{}".format(plan.facts["versions.vllm_ascend"]),
        "command": ["vllm", "serve"], "args": argv, "env": env,
        "ports": [{"containerPort": int(params["PORT"]), "name": "http"}],
        "resources": {"limits": {resource: launch.devices}, "requests": {resource: launch.devices}},
        "readinessProbe": {"httpGet": {"path": "/health", "port": int(params["PORT"])},
                           "initialDelaySeconds": 120, "periodSeconds": 10, "failureThreshold": 60},
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}},
    }
    note = ("# Generated by optkit {v}. Set `image` to your vllm-ascend image with this bundle's patches applied\n"
            "# (and kernels rebuilt if build-kernels.sh exists); mount or bake in the model weights.\n").format(v=__version__)
    return note + yaml.safe_dump(deployment, sort_keys=True, allow_unicode=True, default_flow_style=False, width=1000)


__all__ = ["write_bundle", "bundle_files", "request_from_lock", "catalog_sha256", "serve_argv", "Launch"]
