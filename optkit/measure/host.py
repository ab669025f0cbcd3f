"""What the NPU host is, recorded with every ladder step (``host.json``): NPU, driver, CANN, the
serving Python's package versions, and the pristine digest of the vllm-ascend tree.

Read without side effects: ``npu-smi info`` (the NPU name of the first device row and the
``Version:`` of its header; the driver's ``version.info`` when npu-smi gives none), the CANN
toolkit's ``ascend_toolkit_install.info`` or ``version.cfg`` (as preflight.sh reads them), and
``importlib.metadata`` in the serving Python. Anything missing is recorded as null with the reason,
so a report can say the run was not on an Ascend NPU. No host name and no path is recorded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from optkit.tree.digest import pristine_digest

HOST_VERSION = 1
PACKAGES = ("vllm", "vllm_ascend", "torch", "torch_npu")
_DEVICE_ROW = re.compile(r"^\|\s*\d+\s+(\w[^|]*?)\s*\|", re.M)
_VERSION = re.compile(r"Version:\s*(\S+)")
_PACKAGES_CODE = """import importlib.metadata as m, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))"""


def host_facts(tree: Path, python: str, targets: dict) -> dict[str, Any]:
    """The facts of this host and ``tree`` (``targets``: the optkit targets, to name the NPU's)."""
    digest = pristine_digest(tree)
    npu, driver, notes = _npu_smi()
    driver = driver or _driver_version()
    cann = _cann_version(Path(os.environ.get("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/latest")))
    if cann is None:
        notes.append("CANN: no ascend_toolkit_install.info or version.cfg (set ASCEND_TOOLKIT_HOME)")
    return {"host_version": HOST_VERSION, "npu": npu, "target": _target_of(npu, targets), "driver": driver,
            "cann": cann, "packages": _packages(python, notes), "notes": notes,
            "tree": {"digest": digest.digest, "vllm_ascend": digest.version, "files": digest.files,
                     "applied": digest.applied}}


def _npu_smi() -> tuple[str | None, str | None, list[str]]:
    if shutil.which("npu-smi") is None:
        return None, None, ["npu-smi: not found on PATH (not an Ascend host, or the driver is not installed)"]
    try:
        proc = subprocess.run(["npu-smi", "info"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, None, [f"npu-smi info: {exc}"]
    if proc.returncode != 0:
        return None, None, [f"npu-smi info failed: {(proc.stderr or proc.stdout).strip()[:200]}"]
    rows, version = _DEVICE_ROW.findall(proc.stdout), _VERSION.search(proc.stdout)
    notes = [] if rows else ["npu-smi info lists no device"]
    return (rows[0].strip() if rows else None), (version.group(1) if version else None), notes


def _driver_version() -> str | None:
    path = Path("/usr/local/Ascend/driver/version.info")
    text = path.read_text(errors="replace") if path.is_file() else ""
    found = re.search(r"^Version=(\S+)", text, re.M)
    return found.group(1) if found else None


def _cann_version(toolkit: Path) -> str | None:
    for path in [*sorted(toolkit.glob("*/ascend_toolkit_install.info")), toolkit / "version.cfg",
                 *sorted(toolkit.glob("*/version.cfg"))]:
        if path.is_file():
            found = re.search(r"^(?:version|Version)=\"?([^\"\s]+)", path.read_text(errors="replace"), re.M)
            if found:
                return found.group(1)
    return None


def _packages(python: str, notes: list[str]) -> dict[str, str | None]:
    try:
        proc = subprocess.run([python, "-c", _PACKAGES_CODE, *PACKAGES], capture_output=True, text=True, timeout=120)
        import json

        return json.loads(proc.stdout) if proc.returncode == 0 else _failed(notes, python, proc.stderr)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return _failed(notes, python, str(exc))


def _failed(notes: list[str], python: str, why: str) -> dict[str, None]:
    notes.append(f"packages: {python} could not report them: {why.strip()[:200]}")
    return {name: None for name in PACKAGES}


def _target_of(npu: str | None, targets: dict) -> str | None:
    if npu is None:
        return None
    found = [t.id for t in targets.values() if re.search(t.npu_smi_name_pattern, npu)]
    return found[0] if len(found) == 1 else None


__all__ = ["host_facts", "PACKAGES"]
