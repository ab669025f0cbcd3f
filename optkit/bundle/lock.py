"""The lock (``optkit.lock.json``): everything a bundle was decided from, and the way back.

``lock_data`` follows the bundle contract that ``optkit apply`` consumes (``optkit.tree.patchset``)
plus ``launch.argv``, which ``optkit bundle check`` verifies against serve.sh; ``request_from_lock``
recovers the request for ``--from-lock``, refused when the catalog or profiles hash differently.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from optkit import __version__
from optkit.bundle import BundleWriteError
from optkit.bundle.launch import Launch
from optkit.catalog.recipe_records import RecipeRecord
from optkit.resolve.plan import Plan, Workspace
from optkit.resolve.report import facts_data, plan_data
from optkit.resolve.request_record import RequestRecord, parse_request
from optkit.tree.patchset import LOCK_VERSION


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
        "request": plan.request.dump(mode="json", by_alias=True),
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


def _recipe_entry(recipe: RecipeRecord) -> dict[str, Any]:
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


def pending_names(lock: dict) -> list[str]:
    """The lock's pending patches as ``recipe/file`` (how the scripts and the README name them)."""
    return [f"{p['recipe']}/{p['file']}" for p in lock["pending_patches"]]


def request_from_lock(lock_path: Path, workspace: Workspace) -> tuple[RequestRecord, dict]:
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
    from pydantic_core import ValidationError

    try:
        request = parse_request(lock["request"])
    except (KeyError, ValidationError) as exc:
        raise BundleWriteError(f"{lock_path}: request: {exc}") from None
    return request, lock.get("bundle", {})


__all__ = ["lock_data", "request_from_lock", "catalog_sha256", "profiles_sha256", "pending_names"]
