"""Turn a Plan into a launch bundle: a directory that runs on the NPU host with bash alone.

``bundle_files(plan, workspace)`` renders every file as bytes (a pure function: same request and
catalog, same bytes; no timestamps, no absolute paths of this machine, no host names);
``write_bundle`` writes them to a temporary sibling directory and renames it into place, so a
reader never sees a half-written bundle. This module owns which files a bundle has and the
write. The lock and expected.json are JSON; every other text file is the template
``templates/<path>.j2`` rendered (``optkit.bundle.render``) with the data that ``CONTEXT[path]``
computes in ``scripts``, ``readme`` or ``k8s``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from optkit.bundle import BundleWriteError, scripts
from optkit.bundle.k8s import K8sOptions, configmap_data, deployment_data, leaderworkerset_data, service_data
from optkit.bundle.launch import Launch
from optkit.bundle.lock import lock_data
from optkit.bundle.readme import expected_data, readme_data
from optkit.bundle.render import render
from optkit.catalog.paths import file_in_the_way
from optkit.resolve.plan import Plan, Workspace
from optkit.resolve.report import dump_json
from optkit.tree.patchset import LOCK_NAME

EXECUTABLE = 0o755
REGULAR = 0o644
CONTEXT = {
    "env.sh": scripts.env_data, "serve.sh": scripts.serve_data, "preflight.sh": scripts.preflight_data,
    "apply.sh": scripts.apply_data, "build-kernels.sh": scripts.build_kernels_data, "bench.sh": scripts.bench_data,
    "README.md": readme_data, "k8s/deployment.yaml": deployment_data, "k8s/service.yaml": service_data,
    "k8s/leaderworkerset.yaml": leaderworkerset_data, "k8s/configmap.yaml": configmap_data,
}
"""Every templated file of a bundle (``templates/<path>.j2``) and the function ``(launch, lock) -> data``
that computes what its template is given."""
_TOP_LEVEL = {LOCK_NAME, "expected.json", "patches", "prefill", "decode", "proxy.sh"} | {rel.split("/")[0] for rel in CONTEXT}


def write_bundle(plan: Plan, workspace: Workspace, out_dir: Path, *, k8s: bool | K8sOptions = False) -> list[Path]:
    """Write the bundle of ``plan`` to ``out_dir`` all at once; return the files written.

    ``out_dir`` must be absent, empty, or a previous bundle (it has ``optkit.lock.json`` and
    nothing a bundle does not contain, so no benchmark results are lost); it is then replaced.
    """
    files = bundle_files(plan, workspace, k8s=k8s)
    out_dir = Path(out_dir).absolute()
    _check_target(out_dir)
    return write_files(files, out_dir)


def write_files(files: dict[str, bytes], out_dir: Path) -> list[Path]:
    """Write ``files`` (relative path → bytes) as the directory ``out_dir``, replacing it all at once:
    into a temporary sibling first, then renamed into place. ``*.sh`` files but env.sh are executable.
    A directory that cannot be written (read-only, a full disk) is a ``BundleWriteError``; what was
    there before is unchanged."""
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.new-", dir=out_dir.parent))
    except OSError as exc:
        raise BundleWriteError(f"cannot write {out_dir}: {exc.strerror or exc}"
                               f"{f' ({exc.filename})' if exc.filename else ''}; give a writable directory") from None
    try:
        for rel, data in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(EXECUTABLE if rel.endswith(".sh") and not rel.endswith("env.sh") else REGULAR)
        staging.chmod(0o755)
        _swap_into_place(staging, out_dir)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BundleWriteError(f"cannot write {out_dir}: {exc.strerror or exc}; nothing was written "
                               "(what was there before is unchanged)") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out_dir / rel for rel in sorted(files)]


def _check_target(out_dir: Path) -> None:
    check_replaceable(out_dir, LOCK_NAME, _TOP_LEVEL, "bundle", BundleWriteError)


def check_replaceable(out_dir: Path, marker: str, allowed: set[str], what: str, error: type[Exception]) -> None:
    """Refuse (``error``) to replace ``out_dir`` unless it is absent, empty, or a previous optkit ``what``:
    it has ``marker`` and nothing besides the ``allowed`` top-level names, so nothing of the user's is lost."""
    if out_dir.exists() and not out_dir.is_dir():
        raise error(f"{out_dir} is a file; give a new or empty directory for the {what}")
    blocking = file_in_the_way(out_dir)
    if blocking is not None:
        raise error(f"{out_dir} cannot be created: {blocking} is a file; give a directory elsewhere")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    if not (out_dir / marker).is_file():
        raise error(f"{out_dir} is not empty and is not an optkit {what} (no {marker}); give a new or empty directory")
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in allowed)
    if foreign:
        raise error(f"{out_dir} is a previous {what} but also holds {', '.join(foreign)}, which "
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


def bundle_files(plan: Plan, workspace: Workspace, *, k8s: bool | K8sOptions = False) -> dict[str, bytes]:
    """Every file of the bundle, by relative path (pure: nothing is read but the catalog and the templates).
    ``k8s``: also the manifests, with these options (True: the defaults)."""
    options = K8sOptions() if k8s is True else (k8s or None)
    if plan.pd is not None:
        from optkit.bundle.pd_files import pd_bundle_texts

        return _with_patches(*pd_bundle_texts(plan, workspace, options), workspace)
    launch = Launch(plan, workspace)
    lock = lock_data(plan, workspace, launch, k8s=options)
    texts = {
        LOCK_NAME: dump_json(lock),
        "expected.json": dump_json(expected_data(plan, workspace)),
        "patches/series": "".join(p["name"] + "\n" for p in lock["patches"]),
    }
    nodes = plan.layout.nodes > 1
    written = {"build-kernels.sh": bool(launch.kernels), "k8s/deployment.yaml": bool(options) and not nodes,
               "k8s/leaderworkerset.yaml": bool(options) and nodes, "k8s/configmap.yaml": bool(options) and nodes,
               "k8s/service.yaml": bool(options)}
    texts.update({rel: render(f"{rel}.j2", **data(launch, lock)) for rel, data in CONTEXT.items() if written.get(rel, True)})
    return _with_patches(texts, lock, workspace)


def _with_patches(texts: dict[str, str], lock: dict, workspace: Workspace) -> dict[str, bytes]:
    """The bundle's texts as bytes, and the patch files its lock names, sorted by path."""
    files = {rel: text.encode("utf-8") for rel, text in texts.items()}
    for entry in lock["patches"]:
        files[f"patches/{entry['name']}"] = workspace.catalog.patch_path(entry["recipe"], entry["file"]).read_bytes()
    return dict(sorted(files.items()))


__all__ = ["write_bundle", "bundle_files", "write_files", "check_replaceable"]
