"""Which model architectures a release can serve natively, read off the real trees.

vLLM serves a checkpoint natively when its ``architectures`` entry is one of vLLM's registered model classes
(``vllm/model_executor/models/registry.py``: the ``_*_MODELS`` tables ``_VLLM_MODELS`` gathers) or one vllm-ascend
registers at start-up (``ModelRegistry.register_model("Name", …)`` under ``vllm_ascend/``). Anything else runs only
through vLLM's Transformers backend, which needs transformers itself to implement the checkpoint's ``model_type``
(not known here: the user's transformers). ``versions/architectures.json`` holds both lists for the vLLM trees
optkit fetches (the vLLM each compared vllm-ascend release pairs with) and for every vllm-ascend release; it is
regenerated with ``python -m optkit.versions.architectures --write`` and a test holds it to a fresh read of the
trees. A plan reads it (``support``): where the paired vLLM's list is known and neither list has the model's
architecture, the plan says so, with the releases whose lists have it.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from functools import lru_cache
from pathlib import Path

FILE = "versions/architectures.json"
REGISTRY = "vllm/model_executor/models/registry.py"
_NOT_SERVED = {"_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS", "_VLLM_MODELS"}
_REGISTERS = re.compile(r"ModelRegistry\.register_model\(\s*[\"']([A-Za-z0-9_]+)[\"']")
VLLM_TREES = ("0.23.0", "0.30.0")
"""The vLLM trees optkit fetches: the releases vllm-ascend 0.23.x and 0.30.x pair with."""


def vllm_architectures(tree: Path) -> list[str]:
    """The architectures vLLM's registry serves (every key of its top-level ``_*_MODELS`` tables but the
    previously supported and out-of-tree ones), sorted."""
    module = ast.parse((tree / REGISTRY).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in module.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names or not names[0].endswith("_MODELS") or names[0] in _NOT_SERVED:
            continue
        if isinstance(node.value, ast.Dict):
            found |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return sorted(found)


def ascend_architectures(tree: Path) -> list[str]:
    """The architectures vllm-ascend registers itself (``ModelRegistry.register_model("Name", …)``), sorted."""
    found: set[str] = set()
    for path in sorted((tree / "vllm_ascend").rglob("*.py")):
        found |= set(_REGISTERS.findall(path.read_text(encoding="utf-8", errors="replace")))
    return sorted(found)


def read_trees(releases: list[str]) -> dict:
    """``versions/architectures.json`` from the trees (fetched and cached): ``{"vllm": {version: [...]},
    "vllm_ascend": {release: [...]}}``."""
    from optkit.tree.fetch import fetch

    return {"vllm": {v: vllm_architectures(fetch(v, package="vllm").path) for v in VLLM_TREES},
            "vllm_ascend": {r: ascend_architectures(fetch(r).path) for r in releases}}


def dump(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def data_path() -> Path:
    """The committed file: the checkout's, or an installed wheel's copy (``optkit.catalog.paths.project_root``)."""
    from optkit.catalog.paths import project_root

    return project_root() / FILE


@lru_cache(maxsize=1)
def committed() -> dict:
    """The committed lists (empty where the file is absent)."""
    path = data_path()
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"vllm": {}, "vllm_ascend": {}}


def support(architecture: str, vllm: str, release: str) -> tuple[str, str]:
    """('yes' | 'no' | 'unknown', why) for serving ``architecture`` natively with vllm-ascend ``release`` on its
    paired ``vllm``: 'unknown' where optkit has no list of that vLLM's registry."""
    data = committed()
    ascend = data["vllm_ascend"].get(release, [])
    if architecture in ascend:
        return "yes", f"vllm-ascend {release} registers {architecture}"
    if vllm not in data["vllm"]:
        return "unknown", f"optkit holds no list of vLLM {vllm}'s registry"
    if architecture in data["vllm"][vllm]:
        return "yes", f"vLLM {vllm} registers {architecture} ({REGISTRY})"
    ascends = [r for r, names in data["vllm_ascend"].items() if architecture in names]
    vllms = [v for v, names in data["vllm"].items() if architecture in names]
    said = "; ".join(part for part in (
        ("vllm-ascend " + ", ".join(ascends) + " register it") if ascends else "",
        ("vLLM " + ", ".join(vllms) + " registers it") if vllms else "") if part)
    return "no", (f"neither vLLM {vllm} ({REGISTRY}) nor vllm-ascend {release} registers {architecture}: vLLM can "
                  "serve it only through its Transformers backend, where the installed transformers (or, with "
                  "--trust-remote-code, the checkpoint's own code) implements its model_type"
                  + (f" ({said})" if said else ""))


def main(argv: list[str]) -> int:
    from optkit.versions.releases import known_versions

    data = read_trees([str(v) for v in known_versions()])
    if "--write" in argv:
        data_path().write_text(dump(data), encoding="utf-8")
    else:
        sys.stdout.write(dump(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["vllm_architectures", "ascend_architectures", "read_trees", "committed", "data_path", "support", "VLLM_TREES"]
