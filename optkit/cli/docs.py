"""What ``optkit docs`` writes and checks: each stage's generated pages, gathered in one place.

``docs/catalog.md`` (from the catalog), ``docs/example-bundle/`` (the flagship plan's bundle, with
``--k8s``) and ``docs/example-ladder/report/`` (the report of the simulated ladder run whose inputs,
ladder.json and results/, are kept in docs/example-ladder/ by tests/measure/make_example.py).
``optkit docs --check`` lists the files that differ from what would be written.
"""

from __future__ import annotations

from optkit.catalog.markdown import catalog_markdown


EXAMPLE_REQUEST = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
EXAMPLE_DIR = "docs/example-bundle"
LADDER_DIR = "docs/example-ladder"
REPORT_DIR = f"{LADDER_DIR}/report"


def _example_bundle_files(root) -> dict[str, bytes]:
    from optkit.bundle.writer import bundle_files
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    workspace = load_workspace(root)
    return bundle_files(plan(Request(**EXAMPLE_REQUEST), workspace), workspace, k8s=True)


def _example_report_files(root) -> dict[str, bytes]:
    """The report of the example ladder run (none when its inputs are not there)."""
    if not (root / LADDER_DIR / "ladder.json").is_file():
        return {}
    from optkit.measure.report import build_report, report_files

    return report_files(build_report(root / LADDER_DIR))


def _wanted(root) -> dict[str, bytes]:
    from optkit.catalog.loader import load_catalog

    wanted = {"docs/catalog.md": catalog_markdown(load_catalog(root)).encode("utf-8")}
    wanted.update({f"{EXAMPLE_DIR}/{name}": data for name, data in _example_bundle_files(root).items()})
    wanted.update({f"{REPORT_DIR}/{name}": data for name, data in _example_report_files(root).items()})
    return wanted


def generated_docs(root, check: bool = False) -> list[str]:
    """The generated doc files (relative paths) — with ``check``, only those that are stale."""
    wanted = _wanted(root)
    if not check:
        return sorted(wanted)
    present = {p.relative_to(root).as_posix() for folder in (EXAMPLE_DIR, REPORT_DIR)
               for p in (root / folder).rglob("*") if p.is_file()}
    stale = [rel for rel, data in wanted.items() if not (root / rel).is_file() or (root / rel).read_bytes() != data]
    stale += sorted(present - set(wanted))
    return sorted(stale)


def write_docs(root) -> list[str]:
    """Write docs/catalog.md, the example bundle (the flagship request, with --k8s) and the example report."""
    import shutil

    wanted = _wanted(root)
    for folder in (EXAMPLE_DIR, REPORT_DIR):
        if (root / folder).exists():
            shutil.rmtree(root / folder)
    for name, data in wanted.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if name.endswith(".sh"):
            path.chmod(0o755)
    return ["docs/catalog.md", EXAMPLE_DIR + "/"] + ([REPORT_DIR + "/"] if any(n.startswith(REPORT_DIR) for n in wanted) else [])
