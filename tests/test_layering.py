"""The package's layout is its architecture: stages import only lower stages (docs/architecture.md).

Every ``import`` in every module of ``optkit/`` is read with ``ast`` (function-level imports too),
so a lazy import cannot hide a dependency on a later stage.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "optkit"

# Lowest first. A module may import its own stage and any stage before it.
STAGES = ["catalog", "tree", "versions", "profile", "resolve", "bundle", "measure", "tune", "cli"]
FACE = {"__init__", "errors", "value"}  # the package face: importable from every stage
ENTRY = "__main__"  # `python -m optkit`: runs the CLI, so it sits above every stage
CLI_ONLY = {"click"}  # the command line


def _modules(package: Path) -> list[Path]:
    return sorted(package.rglob("*.py"))


def _stage(path: Path, package: Path) -> str | None:
    rel = path.relative_to(package)
    return rel.parts[0] if len(rel.parts) > 1 else None


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module == "optkit":  # from optkit import catalog → optkit.catalog
                found += [(node.lineno, f"optkit.{a.name}") for a in node.names if a.name in STAGES]
    return found


def violations(path: Path, package: Path) -> list[str]:
    """Imports of ``path`` that break the layering, one line each."""
    mine = _stage(path, package)
    rank = len(STAGES) if path.stem == ENTRY and mine is None else (STAGES.index(mine) if mine in STAGES else -1)
    out = []
    for line, module in _imports(path):
        parts = module.split(".")
        if parts[0] == "optkit" and len(parts) > 1 and parts[1] not in FACE | {ENTRY}:
            if parts[1] not in STAGES or STAGES.index(parts[1]) > rank:
                out.append(f"line {line}: {module}")
        if parts[0] in CLI_ONLY and mine != "cli":
            out.append(f"line {line}: {module} (only optkit.cli imports click)")
    return out


def test_every_module_belongs_to_a_stage_or_the_package_face():
    stray = [p.relative_to(PACKAGE).as_posix() for p in _modules(PACKAGE)
             if _stage(p, PACKAGE) is None and p.stem not in FACE | {ENTRY}]
    assert stray == []
    assert sorted({_stage(p, PACKAGE) for p in _modules(PACKAGE)} - set(STAGES) - {None}) == []


@pytest.mark.parametrize("path", _modules(PACKAGE), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_imports_only_lower_stages(path):
    assert violations(path, PACKAGE) == []


@pytest.mark.parametrize("source, expected", [
    pytest.param("def f():\n    from optkit.resolve.plan import plan\n", ["line 2: optkit.resolve.plan"], id="lazy-later-stage"),
    pytest.param("from optkit import bundle\n", ["line 1: optkit.bundle"], id="from-optkit-import-stage"),
    pytest.param("import click.testing\n", ["line 1: click.testing (only optkit.cli imports click)"], id="click-module"),
    pytest.param("import click\n", ["line 1: click (only optkit.cli imports click)"], id="click"),
    pytest.param("from optkit.errors import OptkitError\nfrom optkit import __version__\n", [], id="package-face"),
    pytest.param("from optkit.catalog.schema import Recipe\n", [], id="own-stage"),
])
def test_the_rule_catches_what_it_should(tmp_path, source, expected):
    bad = tmp_path / "optkit" / "catalog" / "mod.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(source)
    assert violations(bad, tmp_path / "optkit") == expected
