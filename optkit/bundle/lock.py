"""The lock (``optkit.lock.json``): everything a bundle was decided from, and the way back.

``lock_data`` follows the bundle contract that ``optkit apply`` consumes (``optkit.tree.patchset``)
plus ``launch.argv``, which ``optkit bundle check`` verifies against serve.sh; ``request_from_lock``
recovers the request for ``--from-lock``, refused when the catalog or profiles hash differently.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from optkit import __version__
from optkit.bundle import BundleWriteError
from optkit.bundle.launch import Launch
from optkit.catalog.recipe_records import RecipeRecord
from optkit.catalog.records import effective_level
from optkit.resolve.plan import Plan, Workspace
from optkit.resolve.report import facts_data, plan_data
from optkit.resolve.request_record import RequestRecord, parse_request, request_keys
from optkit.catalog.linemap import LineMap
from optkit.errors import BundleError, Location, Problem
from optkit.tree.patchset import LOCK_VERSION, REWRITE, checked, lock_json
from optkit.tree.schema import Lock


def catalog_sha256(root: Path) -> str:
    """sha256 over every ``recipes/*/recipe.yaml`` and ``recipes/*/*.patch``, sorted by path."""
    return _files_sha256(root, ["recipes/*/recipe.yaml", "recipes/*/*.patch"])


def layered_sha256(folder: Path) -> str:
    """sha256 of a ``--catalog`` folder: every ``*/recipe.yaml`` and ``*/*.patch`` in it, and the
    measurement records in its ``verified/`` (they change the plan's numbers), sorted by path."""
    return _files_sha256(folder, ["*/recipe.yaml", "*/*.patch", "verified/*.yaml", "verified/tunes/*.json"])


def catalogs_data(catalog, names: dict[str, str] | None = None) -> list[dict[str, str]]:
    """The ``--catalog`` folders a plan was made with: each as given (no absolute path is added; ``names``:
    where a replay found a lock's folder → as the lock names it) and its hash."""
    names = names or {}
    return [{"path": names.get(str(folder), str(folder)), "sha256": layered_sha256(folder)} for folder in catalog.extra]


def _catalog_names(workspace: Workspace) -> dict[str, str]:
    replay = workspace.replay
    return (replay.catalogs or {}) if replay is not None else {}


def profiles_sha256(root: Path) -> str:
    """sha256 over the other plan inputs: model and target profiles, baselines, kernel specs, the
    measurement records in verified/ (tune records in verified/tunes/), the tutorial data page rules read (they
    change the plan's numbers) and the architectures each release registers (``versions.native_architecture``)."""
    return _files_sha256(root, ["models/*.yaml", "models/reference/*.yaml", "targets/*.yaml", "kernels/*/kernel.yaml",
                                "verified/*.yaml", "verified/tunes/*.json", "versions/tutorials/*.json",
                                "versions/architectures.json"])


def _files_sha256(root: Path, patterns: list[str]) -> str:
    digest = hashlib.sha256()
    paths = sorted({p.relative_to(root).as_posix() for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    for rel in paths:
        data = (root / rel).read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def lock_data(plan: Plan, workspace: Workspace, launch: Launch, *, k8s=None) -> dict[str, Any]:
    """The lock, per the bundle contract (plus ``launch.argv`` and what ``bundle check`` needs)."""
    data = plan_data(plan)
    patches, pending = _patch_entries(plan, workspace)
    root = workspace.catalog.root
    launch_data = dict(data["launch"])
    launch_data.update(env=launch.env, argv=launch.argv, argv_sources=launch.sources,
                       parameters=launch.parameters, effective_speculative_config=launch.speculative)
    if launch.nodes:
        launch_data["nodes"] = launch.nodes
    if plan.pd is not None:  # launch.argv above is the decode role's; each role's is under launch.roles
        from optkit.bundle.pd import pd_lock, role_launches, role_lock

        roles = role_launches(plan, workspace)
        launch_data.update(pd=pd_lock(roles), roles={role: role_lock(r, data["launch"]) for role, r in roles.items()})
    return {
        "lock_version": LOCK_VERSION,
        "optkit": {"version": __version__, "catalog_sha256": catalog_sha256(root), "profiles_sha256": profiles_sha256(root),
                   "catalogs": catalogs_data(workspace.catalog, _catalog_names(workspace))},
        "request": (plan.given or plan.request).dump(mode="json", by_alias=True),
        **_inputs(plan, workspace),
        "assumptions": data["assumptions"],
        **({"choices": data["choices"]} if "choices" in data else {}),
        **({"page_advice": data["page_advice"]} if "page_advice" in data else {}),  # the page lines the plan used
        **({"weights": data["weights"]} if "weights" in data else {}),  # the quantization and checkpoint served
        "slo_checks": data["slo_checks"],  # each SLO bound against the plan's own estimate (Plan.slo_checks)
        "facts": facts_data(plan),
        "selected": list(plan.selected),
        "recipes": {r.id: _recipe_entry(r, workspace, plan.verdicts.get(r.id)) for r in launch.recipes},
        "decisions": data["decisions"],
        "patches": patches,
        "pending_patches": pending,
        "kernels": [{"spec": kernel, "recipe": rid} for kernel, rid in launch.kernels],
        "launch": launch_data,
        "target": {"id": plan.target.id, "soc_version": plan.facts["target.soc_version"],
                   "soc_versions": list(plan.target.soc_versions)},
        "versions": {"vllm_ascend": str(plan.facts["versions.vllm_ascend"]), "vllm": str(plan.facts["versions.vllm"])},
        "bundle": _bundle_options(plan, k8s),
    }


def _inputs(plan: Plan, workspace: Workspace) -> dict[str, Any]:
    """The ``inputs`` section: the request's model config, profile and tree by content digest
    (``optkit.resolve.inputs``); left out when the request has none, as before."""
    from optkit.resolve.inputs import input_records

    inputs = input_records(plan.given or plan.request, workspace.replay, plan.profile_input)
    return {"inputs": inputs} if inputs else {}


def _bundle_options(plan: Plan, k8s) -> dict[str, Any]:
    """How the bundle was written, beyond the request: ``--k8s`` (and its options), and a ladder
    step's selection."""
    options: dict[str, Any] = {"k8s": bool(k8s), **({"k8s_options": k8s.data()} if k8s else {})}
    if plan.restricted_to is not None:
        options.update(selection=list(plan.restricted_to), selection_reason=plan.restriction_reason)
    return options


def _recipe_entry(recipe: RecipeRecord, workspace: Workspace, verdict) -> dict[str, Any]:
    """The recipe as the lock records it: the catalog it came from, as ``versions.vllm_ascend`` the
    range its patch set was written for (what ``optkit apply`` checks the tree against), its
    effective verification level and the records that measured it."""
    origin = workspace.catalog.origins.get(recipe.id)
    origin = _catalog_names(workspace).get(str(origin), origin) if origin is not None else None
    ascend = verdict.patch_versions if verdict is not None and verdict.patches else recipe.versions.vllm_ascend
    entry = {"catalog": "shipped" if origin is None else str(origin), "kind": recipe.kind.value, "title": recipe.title,
             "versions": {"vllm_ascend": ascend, "vllm": recipe.versions.vllm},
             "verification": effective_level(recipe, workspace.records).value,
             "needs_npu": recipe.verification.needs_npu}
    measured = [e.label for e in workspace.records.of(recipe.id)]
    if measured:
        entry["measured"] = measured
    return entry


def _patch_entries(plan: Plan, workspace: Workspace) -> tuple[list[dict], list[dict]]:
    patches, pending = [], []
    for rid in plan.selected:
        recipe = workspace.catalog[rid]
        chosen = set(plan.verdicts[rid].patches) if rid in plan.verdicts and recipe.releases else None
        for patch in recipe.patches:
            if chosen is not None and patch.file not in chosen:
                continue
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


def pending_names(lock: dict) -> list[str]:
    """The lock's pending patches as ``recipe/file`` (how the scripts and the README name them)."""
    return [f"{p['recipe']}/{p['file']}" for p in lock["pending_patches"]]


class LockCatalog(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    path: str = Field(description="The --catalog folder as it was given.")
    sha256: str = Field(description="Its hash when the lock was written (``layered_sha256``).")


class LockOrigin(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)  # later optkits may record more

    version: str = Field(description="The optkit that wrote the lock.")
    catalog_sha256: str = Field(description="Hash of the shipped recipe catalog (``catalog_sha256``).")
    profiles_sha256: str = Field(description="Hash of the other plan inputs (``profiles_sha256``).")
    catalogs: list[LockCatalog] = Field(default_factory=list, description="The --catalog folders planned with.")


class _Held(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class LockModelConfig(_Held):
    path: str = Field(description="--model-config as it was given.")
    file: str = Field(description="The config.json read (the folder's, for a checkpoint folder).")
    sha256: str = Field(description="sha256 of its text.")
    text: str = Field(description="Its text: what a replay plans from.")


class LockSaving(_Held):
    saving_us: float = Field(description="The saving per decode step the plan counted, in µs.")
    basis: str = Field(description="How it was read from the capture (the plan's words).")


class LockProfile(_Held):
    path: str = Field(description="--profile as it was given.")
    concurrency: int = Field(description="The concurrency the capture counts at (--profile-at).")
    files: dict[str, str] = Field(description="sha256 of each file of the capture, by path inside it.")
    savings: dict[str, LockSaving] = Field(description="Per recipe with a signature: what the plan counted.")


class LockTree(_Held):
    path: str = Field(description="--tree as it was given.")
    version: str = Field(description="The tree's vllm-ascend version.")
    pristine_sha256: str = Field(description="Its pristine digest (``optkit.tree.digest``).")


class LockInputs(_Held):
    model_config_: Optional[LockModelConfig] = Field(None, alias="model_config", description="The --model-config.")
    profile: Optional[LockProfile] = Field(None, description="The --profile capture.")
    tree: Optional[LockTree] = Field(None, description="The --tree.")


class PlanLock(Lock):
    """What ``plan --from-lock`` reads of a lock, beyond what ``optkit apply`` reads: the request
    (its fields are checked as a request's, see ``request_from_lock``) and where it came from."""

    request: dict[str, Any] = Field(description="The request, every field of it (``Request``, by alias).")
    optkit: LockOrigin = Field(description="The optkit and the catalogs the lock was written with.")
    inputs: LockInputs = Field(default_factory=LockInputs, description=(
        "The request's model config, profile and tree by content digest (``optkit.resolve.inputs``)."))


class _Within:
    """A lock's line map seen from one of its sections (a request's problems are located under ``request``)."""

    def __init__(self, lines: LineMap, prefix: tuple):
        self.lines, self.prefix = lines, prefix

    def location(self, path: tuple) -> Location:
        return self.lines.location(self.prefix + tuple(path))


def _read_plan_lock(lock_path: Path) -> tuple[dict, LineMap]:
    lock, lines = lock_json(Path(lock_path))  # the common JSON reader, lock_version checked
    checked(PlanLock, lock, lines)  # its sections have their types, the request and its origin are there
    return lock, lines


def lock_catalogs(lock_path: Path, now: list[Path] = ()) -> dict[str, str]:
    """The ``--catalog`` folders the lock was planned with, where they are now (``now``: given with
    ``--from-lock``) → as the lock names them; load the workspace with the keys."""
    from optkit.resolve.inputs import locate_catalogs

    lock, _ = _read_plan_lock(lock_path)
    return locate_catalogs([entry["path"] for entry in lock["optkit"].get("catalogs", [])], list(now))


def request_from_lock(lock_path: Path, workspace: Workspace, tree_at: Path | None = None,
                      catalogs: dict[str, str] | None = None) -> tuple[RequestRecord, dict, Any]:
    """The Request a lock was written for, refused if the catalog (shipped, or a ``--catalog``
    folder it names) or an input it holds (model config, profile, tree: ``optkit.resolve.inputs``)
    changed since, else the bundle would differ; also the lock's ``bundle`` options and the inputs it
    holds, for ``Workspace.replay`` (``tree_at``: where the request's tree is now, when not at its path;
    ``catalogs``: where the lock's ``--catalog`` folders are now, ``lock_catalogs``).
    Its problems are located (``file:line: request.tp: …``) as every reader's are."""
    from optkit.resolve.inputs import replay_inputs

    lock, lines = _read_plan_lock(lock_path)
    request = _lock_request(lock, lines)
    replay = replay_inputs(lock.get("inputs", {}), request, tree_at, catalogs)
    _check_layered(lock_path, lock, workspace, catalogs or {})
    root = workspace.catalog.root
    for key, now in (("catalog_sha256", catalog_sha256(root)), ("profiles_sha256", profiles_sha256(root))):
        then = lock["optkit"][key]
        if then != now:
            what = "recipe catalog (recipes/)" if key == "catalog_sha256" else "model/target profiles or tutorial data"
            raise BundleWriteError(
                f"the {what} changed since the lock was written ({key} {then} in the lock, {now} now); "
                "the same bundle cannot be reproduced: check out the catalog the lock was made with, "
                "or plan again without --from-lock")
    return request, lock.get("bundle", {}), replay


def _lock_request(lock: dict, lines: LineMap) -> RequestRecord:
    """The lock's request, validated as a request and whole: a field left out would be planned
    with its default, which is not what the lock was written for."""
    from pydantic_core import ValidationError

    from optkit.catalog.loader import validation_problems

    data = lock["request"]
    try:
        request = parse_request(data)
    except ValidationError as exc:
        from optkit.resolve.request import Request

        problems = validation_problems(exc, _Within(lines, ("request",)), Request)
    else:
        problems = [Problem(lines.location(("request", alias)), f"missing required field {alias!r}")
                    for name, alias in request_keys() if alias not in data and name not in data]
    if problems:
        raise BundleError([str(p) for p in problems] + [_rewrite(lock["optkit"]["version"])])
    return request


def _rewrite(written: str) -> str:
    """What to do about a lock this optkit cannot plan again: another optkit's may know its fields."""
    if written != __version__:
        return (f"the lock was written by optkit {written}, this is optkit {__version__}: plan it with that "
                "optkit, or write the bundle again with this one (`optkit plan ... -o DIR`)")
    return REWRITE


def _check_layered(lock_path: Path, lock: dict, workspace: Workspace, names: dict[str, str]) -> None:
    then = {entry["path"]: entry["sha256"] for entry in lock["optkit"].get("catalogs", [])}
    now = {entry["path"]: entry["sha256"] for entry in catalogs_data(workspace.catalog, names)}
    for path in sorted(set(then) | set(now)):
        if then.get(path) != now.get(path):
            raise BundleWriteError(
                f"the catalog {path} changed since {lock_path} was written (sha256 {then.get(path)} in the lock, "
                f"{now.get(path)} now); the same bundle cannot be reproduced: restore that folder, or plan again "
                "without --from-lock")


__all__ = ["lock_data", "request_from_lock", "lock_catalogs", "catalog_sha256", "profiles_sha256", "pending_names"]
