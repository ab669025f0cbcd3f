"""The kernel specs under ``kernels/``, as records (validated once, then from the catalog cache).

The specs are validated by ``optkit.catalog.kernels``, imported only when the cache misses;
``kernel_ready`` checks the files on every call (a patch can go while the specs stay the same).
"""

from __future__ import annotations

from pathlib import Path

from optkit.catalog.linemap import LineMap
from optkit.catalog.loader import load_entries
from optkit.catalog.recipe_records import KernelSpecRecord
from optkit.errors import Location
from optkit.value import field, valueclass

KERNEL_FILE = "kernel.yaml"


@valueclass
class Kernels:
    """All kernel specs, by id (sorted), with the folder and line map each came from."""

    root: Path
    specs: dict[str, KernelSpecRecord] = field(default_factory=dict)
    folders: dict[str, Path] = field(default_factory=dict)
    lines: dict[str, LineMap] = field(default_factory=dict)

    def location(self, kernel_id: str, path: tuple = ()) -> Location:
        return self.lines[kernel_id].location(path)


def load_kernels(root: Path) -> Kernels:
    """Every spec under ``root/kernels``; all problems of all files are reported together."""
    specs, folders, lines = load_entries(root, "kernels", KERNEL_FILE, _validate)
    return Kernels(root, specs, folders, lines)


def _validate(folder: Path, display: str) -> tuple[KernelSpecRecord, LineMap]:
    from optkit.catalog.kernels import load_kernel

    return load_kernel(folder, display)


def kernel_ready(spec: KernelSpecRecord, root: Path) -> tuple[bool, list[str]]:
    """Whether every source of ``spec`` is present under the project ``root``, and if not, why not."""
    reasons = []
    reasons += [f"{path} is not in this repo (the source is external)" for path in spec.source.missing]
    for name in spec.patches:
        if not (root / "kernels" / spec.id / name).is_file():
            reasons.append(f"kernels/{spec.id}/{name} is missing")
    for path in spec.source.recipe_patches:
        if not (root / path).is_file():
            reasons.append(f"{path} is missing (a patch of recipe {spec.recipe})")
    return not reasons, reasons
