"""For CPU tests of patched code: a scratch release tree with recipes applied, and its code loaded by path.

The patched modules mostly import torch_npu and vLLM internals, so they cannot be imported here.
A helper module a patch adds (torch/stdlib only) is loaded whole with ``load_module``; single
classes or functions of a module that cannot be imported are executed among fakes with
``load_defs``, single methods of a class with ``load_method``.
"""

from __future__ import annotations

import __future__
import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support

from compat_support import CATALOG, scratch_tree, specs  # noqa: E402
from optkit.tree.apply import apply  # noqa: E402
from optkit.resolve.resolver import dependency_order  # noqa: E402


def patched_tree(tmp_path: Path, recipe_ids: list[str], version: str = "0.23.0") -> Path:
    """A private copy of the ``version`` tree with the patches written for that release of
    ``recipe_ids`` applied in dependency order (every recipe must have some for it)."""
    root = scratch_tree(tmp_path, version)
    chosen = specs(dependency_order(CATALOG, recipe_ids), version)
    missing = sorted(set(recipe_ids) - {s.recipe for s in chosen})
    assert not missing, f"no patch for vllm-ascend {version} in {missing}"
    result = apply(root, chosen)
    assert all(o.outcome == "applied" for o in result.outcomes), result.outcomes
    return root


def load_module(path: Path) -> ModuleType:
    """The module at ``path``, executed under a private name (a fresh module object every call)."""
    spec = importlib.util.spec_from_file_location(f"patched_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_defs(path: Path, names: list[str], namespace: dict) -> dict:
    """Execute the top-level classes/functions ``names`` of ``path`` in ``namespace`` (its fakes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    nodes = [node for node in tree.body if getattr(node, "name", None) in names]
    assert sorted(node.name for node in nodes) == sorted(names), f"{names} not all in {path}"
    namespace = dict(namespace)
    code = compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)
    return namespace


def load_method(path: Path, class_name: str, method: str, namespace: dict):
    """The method ``class_name.method`` of ``path`` as a plain function (decorators dropped), run in ``namespace``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    func = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method)
    func.decorator_list = []
    namespace = dict(namespace)
    code = compile(ast.Module(body=[func], type_ignores=[]), str(path), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)
    return namespace[method]
