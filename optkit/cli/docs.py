"""What ``optkit docs`` writes and checks: each stage's generated pages, gathered in one place.

``docs/catalog.md`` (from the catalog), ``docs/example-bundle/`` (the flagship plan's bundle, with
``--k8s``), ``docs/example-ladder/report/`` (the report of the simulated ladder run whose inputs,
ladder.json and results/, are kept in docs/example-ladder/ by tests/measure/make_example.py),
``docs/compat.md`` (the compatibility matrix over every known release, from the real trees: fetched
and cached on first use), the generated blocks of ``docs/versions.md`` and of ``docs/port.md`` (the
real ``optkit port`` reports), and the figures inside
hand-written pages: a region ``<!-- optkit:NAME -->…<!-- /optkit:NAME -->`` of any ``docs/*.md`` is
rewritten with ``SNIPPETS[NAME]`` of the example bundle (the flagship's, or the multi-node example's
for ``multinode-*``), so a count or a manifest in prose cannot go stale.
``optkit docs --check`` lists the files that differ from what would be written.
"""

from __future__ import annotations

import json
import re

from optkit.catalog.markdown import catalog_markdown

_REGION = re.compile(r"(<!-- optkit:([a-z-]+) -->)(.*?)(<!-- /optkit:\2 -->)", re.S)


def _lock(files: dict[str, bytes]) -> dict:
    return json.loads(files["optkit.lock.json"])


def _patch_count(files: dict[str, bytes]) -> str:
    lock = _lock(files)
    targets = {t for p in lock["patches"] for t in p["targets"]}
    recipes = {p["recipe"] for p in lock["patches"]}
    return f"{len(lock['patches'])} patches of {len(recipes)} recipes, touching {len(targets)} files"


def _series_state(files: dict[str, bytes]) -> str:
    lock = _lock(files)
    pending = len(lock["pending_patches"])
    state = f"{len(lock['patches'])} patches in the series"
    return state + (f", {pending} still pending" if pending else ", none pending")


def _manifests(*names: str):
    """A figure that is the bundle's k8s manifests ``names``, as one YAML code block."""
    def figure(files: dict[str, bytes]) -> str:
        text = "---\n".join(files[f"k8s/{name}"].decode("utf-8") for name in names)
        return f"\n\n```yaml\n{text}```\n\n"

    return figure


SNIPPETS = {"flagship-patches": _patch_count, "flagship-series": _series_state,
            "multinode-manifests": _manifests("leaderworkerset.yaml", "service.yaml")}
"""Figures that hand-written docs quote, computed from the files of an example bundle: the flagship's
(``docs/example-bundle/``), or for ``multinode-*`` the multi-node example's (``MULTINODE_REQUEST``)."""


def _filled(text: str, files: dict[str, bytes], multinode=dict) -> str:
    """``text`` with every generated region rewritten from the flagship's ``files``, or for
    ``multinode-*`` from ``multinode()``, the multi-node example's files (made only when asked for)."""
    def fill(match: re.Match) -> str:
        name = match.group(2)
        if name not in SNIPPETS:
            from optkit.errors import OptkitError

            raise OptkitError(f"docs: unknown generated figure optkit:{name}; known: {', '.join(SNIPPETS)}")
        return match.group(1) + SNIPPETS[name](multinode() if name.startswith("multinode-") else files) + match.group(4)

    return _REGION.sub(fill, text)


EXAMPLE_REQUEST = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
EXAMPLE_DIR = "docs/example-bundle"
MULTINODE_REQUEST = {**EXAMPLE_REQUEST, "tp": 2, "dp": 16}
MULTINODE_REPLICAS = 2
"""The multi-node example of docs/bundle.md: the flagship as 16 DP ranks of TP2 on two 910C nodes, with
``--k8s --replicas 2``."""
LADDER_DIR = "docs/example-ladder"
REPORT_DIR = f"{LADDER_DIR}/report"


def _example_bundle_files(root, request=EXAMPLE_REQUEST, k8s=True) -> dict[str, bytes]:
    from optkit.bundle.writer import bundle_files
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    workspace = load_workspace(root)
    return bundle_files(plan(parse_request(request), workspace), workspace, k8s=k8s)


def _multinode_example(root):
    """The files of the multi-node example bundle, made on the first call."""
    import functools

    from optkit.bundle.k8s import K8sOptions

    return functools.cache(lambda: _example_bundle_files(root, MULTINODE_REQUEST, K8sOptions(replicas=MULTINODE_REPLICAS)))


def _versions_docs(root, catalog) -> dict[str, bytes]:
    """docs/compat.md, and docs/versions.md with its generated blocks filled."""
    from optkit.versions.compat import release_matrix
    from optkit.versions.markdown import compat_markdown, fill_blocks, moves_table, probes_table, releases_table

    text = (root / "docs" / "versions.md").read_text(encoding="utf-8")
    blocks = {"releases": releases_table(), "moves": moves_table(), "probes": probes_table(catalog)}
    return {"docs/compat.md": compat_markdown(release_matrix(catalog)).encode("utf-8"),
            "docs/versions.md": fill_blocks(text, blocks).encode("utf-8")}


def _example_report_files(root) -> dict[str, bytes]:
    """The report of the example ladder run (none when its inputs are not there)."""
    if not (root / LADDER_DIR / "ladder.json").is_file():
        return {}
    from optkit.measure.report import build_report, report_files

    return report_files(build_report(root / LADDER_DIR))


PORT_DATE = "2026-12-01"
"""The --date of the port reports in docs/port.md (a fixed one: the page must not change by the day)."""


def _port_docs(root, catalog) -> dict[str, bytes]:
    """docs/port.md with its generated blocks: the real port reports for 0.23.0.post1 and the newest release."""
    import datetime as dt

    from optkit.versions.markdown import fill_blocks, port_markdown
    from optkit.versions.port import port
    from optkit.versions.releases import newest

    date = dt.date.fromisoformat(PORT_DATE)
    blocks = {"port-post": port_markdown(port(catalog, None, "0.23.0", "0.23.0.post1", date=date), False),
              "port-newest": port_markdown(port(catalog, None, "0.23.0", str(newest()), date=date), False, diffs=False)}
    text = (root / "docs" / "port.md").read_text(encoding="utf-8")
    return {"docs/port.md": fill_blocks(text, {k: ["", *v, ""] for k, v in blocks.items()}).encode("utf-8")}


def _wanted(root) -> dict[str, bytes]:
    """Every generated file, relative path → bytes."""
    from optkit.catalog.loader import load_catalog

    catalog = load_catalog(root)
    wanted = {"docs/catalog.md": catalog_markdown(catalog).encode("utf-8"), **_versions_docs(root, catalog),
              **_port_docs(root, catalog)}
    example = _example_bundle_files(root)
    wanted.update({f"{EXAMPLE_DIR}/{name}": data for name, data in example.items()})
    wanted.update({f"{REPORT_DIR}/{name}": data for name, data in _example_report_files(root).items()})
    wanted.update(_pages_with_figures(root, example))
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


def _pages_with_figures(root, example: dict[str, bytes]) -> dict[str, bytes]:
    """Every ``docs/*.md`` with a generated region, as it should read (``example``: the flagship's files)."""
    multinode = _multinode_example(root)
    out = {}
    for page in sorted((root / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        if _REGION.search(text):
            out[page.relative_to(root).as_posix()] = _filled(text, example, multinode).encode("utf-8")
    return out


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
    folders = {EXAMPLE_DIR + "/", *([REPORT_DIR + "/"] if any(n.startswith(REPORT_DIR) for n in wanted) else [])}
    return sorted(folders | {n for n in wanted if not n.startswith((EXAMPLE_DIR, REPORT_DIR))})
