"""What ``optkit docs`` writes and checks: each stage's generated pages, gathered in one place.

``docs/catalog.md`` (from the catalog) and ``docs/example-bundle/`` (the flagship plan's bundle,
with ``--k8s``). ``optkit docs --check`` lists the files that differ from what would be written.
"""

from __future__ import annotations

from optkit.catalog.markdown import catalog_markdown


EXAMPLE_REQUEST = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
EXAMPLE_DIR = "docs/example-bundle"


def _example_bundle_files(root) -> dict[str, bytes]:
    from optkit.bundle.writer import bundle_files
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    workspace = load_workspace(root)
    return bundle_files(plan(parse_request(EXAMPLE_REQUEST), workspace), workspace, k8s=True)


def generated_docs(root, check: bool = False) -> list[str]:
    """The generated doc files (relative paths) — with ``check``, only those that are stale."""
    from optkit.catalog.loader import load_catalog

    wanted = {"docs/catalog.md": catalog_markdown(load_catalog(root)).encode("utf-8")}
    wanted.update({f"{EXAMPLE_DIR}/{name}": data for name, data in _example_bundle_files(root).items()})
    if not check:
        return sorted(wanted)
    present = {p.relative_to(root).as_posix() for p in (root / EXAMPLE_DIR).rglob("*") if p.is_file()}
    stale = [rel for rel, data in wanted.items() if not (root / rel).is_file() or (root / rel).read_bytes() != data]
    stale += sorted(present - set(wanted))
    return sorted(stale)


def write_docs(root) -> list[str]:
    """Write docs/catalog.md and the example bundle (the flagship request, with --k8s)."""
    import shutil

    from optkit.catalog.loader import load_catalog

    (root / "docs" / "catalog.md").write_text(catalog_markdown(load_catalog(root)), encoding="utf-8")
    example = root / EXAMPLE_DIR
    if example.exists():
        shutil.rmtree(example)
    for name, data in _example_bundle_files(root).items():
        path = example / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if name.endswith(".sh"):
            path.chmod(0o755)
    return ["docs/catalog.md", EXAMPLE_DIR + "/"]
