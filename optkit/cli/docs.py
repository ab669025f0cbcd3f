"""What ``optkit docs`` writes and checks: each stage's generated pages, gathered in one place.

``docs/catalog.md`` (from the catalog), ``docs/example-bundle/`` (the flagship plan's bundle, with
``--k8s``), ``docs/example-pd-bundle/`` (the 1P1D plan at concurrency 64, with ``--k8s``), ``docs/example-ladder/report/`` (the report of the simulated ladder run whose inputs,
ladder.json and results/, are kept in docs/example-ladder/ by tests/measure/make_example.py),
``docs/compat.md`` (the compatibility matrix over every known release, from the real trees: fetched
and cached on first use), and the generated regions of hand-written pages: a region
``<!-- optkit:NAME -->…<!-- /optkit:NAME -->`` of any ``docs/*.md`` is rewritten with
``FIGURES[NAME]`` — the ``optkit profile`` report of the profile fixture (docs/profile.md, with its
timeline in ``docs/profile-timeline.png``), a count from the example bundle, the multi-node example's manifests, the release
and probe tables of docs/versions.md, the tutorial data's summary and tab map of docs/tutorials.md, the real ``optkit port`` reports of docs/port.md — so nothing
quoted in prose can go stale. Each figure is computed only when a page asks for it.
``optkit docs --check`` lists the files that differ from what would be written.
"""

from __future__ import annotations

import json
import re

from optkit.catalog.markdown import catalog_markdown

_REGION = re.compile(r"(<!-- optkit:([a-z-]+) -->)(.*?)(<!-- /optkit:\2 -->)", re.S)


class _Sources:
    """What the figures are computed from, each made on first use."""

    def __init__(self, root, catalog, example: dict[str, bytes]):
        self.root, self.catalog, self.example = root, catalog, example
        self._multinode = None

    @property
    def multinode(self) -> dict[str, bytes]:
        if self._multinode is None:
            from optkit.bundle.k8s import K8sOptions

            self._multinode = _example_bundle_files(self.root, MULTINODE_REQUEST,
                                                    K8sOptions(replicas=MULTINODE_REPLICAS))
        return self._multinode

    @property
    def pd(self) -> dict[str, bytes]:
        return _example_bundle_files(self.root, PD_REQUEST)


def _lock(files: dict[str, bytes]) -> dict:
    return json.loads(files["optkit.lock.json"])


def _patch_count(src: _Sources) -> str:
    lock = _lock(src.example)
    targets = {t for p in lock["patches"] for t in p["targets"]}
    recipes = {p["recipe"] for p in lock["patches"]}
    return f"{len(lock['patches'])} patches of {len(recipes)} recipes, touching {len(targets)} files"


def _series_state(src: _Sources) -> str:
    lock = _lock(src.example)
    pending = len(lock["pending_patches"])
    state = f"{len(lock['patches'])} patches in the series"
    return state + (f", {pending} still pending" if pending else ", none pending")


def _manifests(*names: str):
    """A figure that is the multi-node example's k8s manifests ``names``, as one YAML code block."""
    def figure(src: _Sources) -> str:
        text = "---\n".join(src.multinode[f"k8s/{name}"].decode("utf-8") for name in names)
        return f"\n\n```yaml\n{text}```\n\n"

    return figure


def _pd_example(src: _Sources) -> list[str]:
    """The PD example's instances, their --kv-transfer-config, and what proxy.sh runs (its defaults)."""
    lock = _lock(src.pd)
    rows = ["| role | instance | node | devices | API port | kv_port |", "| --- | --- | --- | --- | --- | --- |"]
    configs = []
    for role in ("prefill", "decode"):
        for i in lock["launch"]["roles"][role]["instances"]:
            rows.append(f"| {role} | {i['index']} | {i['node']} | {i['devices']} | {i['port']} | {i['kv_port']} |")
            configs.append(f"    {role}/serve.sh --instance {i['index']}: --kv-transfer-config '{i['kv_transfer_config']}'")
    proxy = lock["launch"]["pd"]["proxy"]
    ports = {r: " ".join(str(i["port"]) for i in lock["launch"]["roles"][r]["instances"]) for r in ("prefill", "decode")}
    command = (f"    python3 TREE/{proxy['script']} --host 0.0.0.0 --port {proxy['port']} --prefiller-hosts 127.0.0.1 "
               f"--prefiller-ports {ports['prefill']} --decoder-hosts 127.0.0.1 --decoder-ports {ports['decode']}")
    return rows + ["", *configs, "", "proxy.sh runs (one node, its defaults):", "", command]


def _lines(make, pad: str = "\n"):
    """A figure made of the lines ``make(src)`` returns, between blank-line ``pad``s."""
    return lambda src: pad + "\n".join(make(src)) + pad


def _releases(src: _Sources) -> list[str]:
    from optkit.versions.markdown import releases_table

    return releases_table()


def _moves(src: _Sources) -> list[str]:
    from optkit.versions.markdown import moves_table

    return moves_table()


def _probes(src: _Sources) -> list[str]:
    from optkit.versions.markdown import probes_table

    return probes_table(src.catalog)


def _tutorials_summary(src: _Sources) -> list[str]:
    from optkit.versions.tutorial_docs import summary_table

    return summary_table()


def _tutorial_tabs(src: _Sources) -> list[str]:
    from optkit.versions.tutorial_docs import hardware_table

    return hardware_table()


PORT_DATE = "2026-12-01"
"""The --date of the port reports in docs/port.md (a fixed one: the page must not change by the day)."""


def _port_report(target: str | None, diffs: bool):
    """The real ``optkit port --all`` report from 0.23.0 to ``target`` (None: the newest release)."""
    def make(src: _Sources) -> list[str]:
        import datetime as dt

        from optkit.versions.markdown import port_markdown
        from optkit.versions.port import port
        from optkit.versions.releases import newest

        report = port(src.catalog, None, "0.23.0", target or str(newest()), date=dt.date.fromisoformat(PORT_DATE))
        return port_markdown(report, False, diffs=diffs)

    return make


OBJECTIVE_REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": 64, "dp": 4, "mtp": True,
                     "slo": "tpot_p99<=25ms", "goal": "throughput", "vllm_ascend_version": "0.30.0rc2"}
OBJECTIVE_COMMAND = ("optkit explain sched-capacity-for-load cudagraph-capture-sizes-for-load qwen3.5-35b --concurrency 64 "
                     "--dp 4 --mtp --slo 'tpot_p99<=25ms' --goal throughput --vllm-ascend-version 0.30.0rc2")
"""docs/objective.md's example: a throughput plan's derived values and why (``optkit explain``'s own text)."""


def _objective_example(src: _Sources) -> str:
    from optkit.cli.render import explain_report, layout
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    workspace = load_workspace(src.root)
    result = plan(parse_request(OBJECTIVE_REQUEST), workspace)
    recipes = ["sched-capacity-for-load", "cudagraph-capture-sizes-for-load"]
    text = layout(explain_report(result, workspace.catalog, recipes))
    return f"\n\n    $ {OBJECTIVE_COMMAND}\n" + "".join(f"    {line}\n".replace("    \n", "\n")
                                                   for line in text.splitlines()) + "\n"


FIT_CASES = "tests/fit_cases.yaml"
FIT_COMMAND = "optkit plan qwen3.5-397b --target 910b --tp 8 --quantization w8a8"
"""docs/objective.md's fit figures: the page cases of tests/fit_cases.yaml, and the refusal of one A2 node."""


def _fit_pages(src: _Sources) -> str | None:
    """The tutorials' hardware rows against optkit's fewest nodes (tests/fit_cases.yaml, as tests/test_fit.py runs
    it); None (the region kept) in a tree without the cases."""
    if not (src.root / FIT_CASES).is_file():
        return None
    return "\n" + "\n".join(_fit_rows(src)) + "\n"


def _fit_rows(src: _Sources) -> list[str]:
    import yaml

    from optkit.resolve.fit import DEFAULT_UTILIZATION, FitInputs, fewest_nodes, measure
    from optkit.resolve.plan import load_workspace

    workspace = load_workspace(src.root)
    data = yaml.safe_load((src.root / FIT_CASES).read_text())
    rows = ["| page row (0.30.0rc2) | weights | target | page | optkit | layout | weights / device | free |",
            "|---|---|---|---|---|---|---|---|"]
    for case in data["cases"]:
        load = data["pages"][case["page"]]["a3" if case["target"] == "910c" else "a2"]
        model, target = workspace.models[case["model"]], workspace.targets[case["target"]]
        inputs = FitInputs(1, 1, True, case["quantization"], 1, load["max_model_len"], load["max_model_len"],
                           hccl_buffsize_mb=load["hccl_buffsize_mb"], spec_tokens=load["spec_tokens"],
                           utilization=load.get("utilization", DEFAULT_UTILIZATION))
        nodes, tp, dp = fewest_nodes(model, target, inputs)
        from optkit.value import replace

        report = measure(model, target, replace(inputs, tp=tp, dp=dp))
        rows.append(f"| {case['page']}:{case['line']} | {case['quantization']} | {case['target']} | {case['nodes']} | "
                    f"{nodes}{' (see below)' if 'why' in case else ''} | TP{tp} DP{dp} | {report.weights_gib:.1f} GiB | "
                    f"{report.free_gib:.1f} GiB |")
    return rows


def _fit_refusal(src: _Sources) -> list[str]:
    """The refusal ``FIT_COMMAND`` prints, wrapped as the terminal shows it."""
    import textwrap

    from optkit.errors import RequestError
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    try:
        plan(parse_request({"model": "qwen3.5-397b", "target": "910b", "tp": 8, "quantization": "w8a8"}),
             load_workspace(src.root))
    except RequestError as exc:
        return [f"    $ {FIT_COMMAND}", *("    " + line for line in textwrap.wrap(f"optkit: error: {exc}", 100))]
    from optkit.errors import InternalError

    raise InternalError(f"docs/objective.md: {FIT_COMMAND} was not refused")


PROFILE_FIXTURE = "tests/profile/fixtures/one-rank"
PROFILE_ARGS = ["--model", "qwen3.5-35b", "--target", "910c", "--mtp"]
PROFILE_CHART = "docs/profile-timeline.png"
"""docs/profile.md's example: ``optkit profile tests/profile/fixtures/one-rank --model qwen3.5-35b --target 910c
--mtp`` (the fixture is written by tests/profile/make_fixture.py) and its ``--chart``."""


def _profile_report(root):
    from optkit.resolve.plan import load_workspace
    from optkit.resolve.profiled import profile_report
    from optkit.resolve.request_record import parse_request

    request = parse_request({"model": "qwen3.5-35b", "target": "910c", "mtp": True})  # as the command shown makes it
    return profile_report(request, root / PROFILE_FIXTURE, load_workspace(root), 1, PROFILE_FIXTURE)


def _profile_example(src: _Sources) -> str | None:
    """The report of the profile fixture; None (the page's region stays) in a checkout without tests/."""
    if not (src.root / PROFILE_FIXTURE).is_dir():
        return None
    from optkit.cli.profile_render import profile_blocks
    from optkit.cli.render import layout

    text = layout(profile_blocks(_profile_report(src.root)))
    return f"\n\n    $ optkit profile {PROFILE_FIXTURE} {' '.join(PROFILE_ARGS)}\n\n```text\n{text}```\n\n"


def _profile_chart(root) -> dict[str, bytes]:
    if not (root / PROFILE_FIXTURE).is_dir():
        return {}
    from optkit.profile.timeline import chart

    return {PROFILE_CHART: chart(_profile_report(root).analysis)}


def _target_reach(src: _Sources) -> str:
    """docs/targets.md's table: each recipe on each target, by the recipes' own target rules."""
    from optkit.resolve.profile_catalog import load_targets
    from optkit.resolve.target_review import reach_markdown, recipe_reach

    return "\n\n" + reach_markdown(recipe_reach(src.catalog, load_targets(src.root / "targets"))) + "\n\n"


FIGURES = {"flagship-patches": _patch_count, "profile-example": _profile_example, "flagship-series": _series_state,
           "multinode-manifests": _manifests("leaderworkerset.yaml", "service.yaml"),
           "pd-example": _lines(_pd_example, "\n\n"), "releases": _lines(_releases), "moves": _lines(_moves), "probes": _lines(_probes),
           "tutorials-summary": _lines(_tutorials_summary), "tutorial-tabs": _lines(_tutorial_tabs),
           "port-post": _lines(_port_report("0.23.0.post1", True), "\n\n"),
           "port-newest": _lines(_port_report(None, False), "\n\n"), "objective-example": _objective_example,
           "fit-pages": _fit_pages, "fit-refusal": _lines(_fit_refusal, "\n\n"),
           "target-reach": _target_reach}
"""What a region ``<!-- optkit:NAME -->`` of a docs page holds, computed from ``_Sources``."""


def _filled(text: str, page: str, src: _Sources) -> str:
    """``text`` (of ``page``) with every generated region rewritten."""
    def fill(match: re.Match) -> str:
        name = match.group(2)
        if name not in FIGURES:
            from optkit.errors import OptkitError

            raise OptkitError(f"{page}: unknown generated region optkit:{name}; known: {', '.join(FIGURES)}")
        made = FIGURES[name](src)
        return match.group(1) + (match.group(3) if made is None else made) + match.group(4)

    return _REGION.sub(fill, text)


EXAMPLE_REQUEST = {"model": "qwen3.5-35b", "target": "910c", "mtp": True}
EXAMPLE_DIR = "docs/example-bundle"
MULTINODE_REQUEST = {**EXAMPLE_REQUEST, "tp": 2, "dp": 16}
MULTINODE_REPLICAS = 2
"""The multi-node example (docs/bundle.md's LeaderWorkerSet): DP16 of TP2 on two 16-die nodes, two replicas."""
PD_REQUEST = {"model": "qwen3.5-35b", "target": "910c", "concurrency": [64], "pd": "1:1"}
PD_DIR = "docs/example-pd-bundle"
"""The PD example (docs/bundle.md): the issue's 1P1D plan at concurrency 64, with --k8s."""
LADDER_DIR = "docs/example-ladder"
REPORT_DIR = f"{LADDER_DIR}/report"


def _example_bundle_files(root, request=EXAMPLE_REQUEST, k8s=True) -> dict[str, bytes]:
    from optkit.bundle.writer import bundle_files
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request_record import parse_request

    workspace = load_workspace(root)
    return bundle_files(plan(parse_request(request), workspace), workspace, k8s=k8s)


def _example_report_files(root) -> dict[str, bytes]:
    """The report of the example ladder run (none when its inputs are not there)."""
    if not (root / LADDER_DIR / "ladder.json").is_file():
        return {}
    from optkit.measure.report import build_report, report_files

    return report_files(build_report(root / LADDER_DIR))


def _wanted(root) -> dict[str, bytes]:
    """Every generated file, relative path → bytes."""
    from optkit.catalog.loader import load_catalog
    from optkit.versions.compat import release_matrix
    from optkit.versions.markdown import compat_markdown

    catalog = load_catalog(root)
    example = _example_bundle_files(root)
    wanted = {"docs/catalog.md": catalog_markdown(catalog).encode("utf-8"),
              "docs/compat.md": compat_markdown(release_matrix(catalog)).encode("utf-8")}
    wanted.update({f"{EXAMPLE_DIR}/{name}": data for name, data in example.items()})
    wanted.update({f"{PD_DIR}/{name}": data for name, data in _example_bundle_files(root, PD_REQUEST).items()})
    wanted.update({f"{REPORT_DIR}/{name}": data for name, data in _example_report_files(root).items()})
    wanted.update(_pages_with_regions(root, _Sources(root, catalog, example)))
    wanted.update(_profile_chart(root))
    return wanted


def generated_docs(root, check: bool = False) -> list[str]:
    """The generated doc files (relative paths) — with ``check``, only those that are stale."""
    wanted = _wanted(root)
    if not check:
        return sorted(wanted)
    present = {p.relative_to(root).as_posix() for folder in (EXAMPLE_DIR, PD_DIR, REPORT_DIR)
               for p in (root / folder).rglob("*") if p.is_file()}
    stale = [rel for rel, data in wanted.items() if not (root / rel).is_file() or (root / rel).read_bytes() != data]
    stale += sorted(present - set(wanted))
    return sorted(stale)


def _pages_with_regions(root, src: _Sources) -> dict[str, bytes]:
    """Every ``docs/*.md`` with a generated region, as it should read."""
    out = {}
    for page in sorted((root / "docs").glob("*.md")):
        rel = page.relative_to(root).as_posix()
        text = page.read_text(encoding="utf-8")
        if _REGION.search(text):
            out[rel] = _filled(text, rel, src).encode("utf-8")
    return out


def write_docs(root) -> list[str]:
    """Write docs/catalog.md, the example bundle (the flagship request, with --k8s) and the example report."""
    import shutil

    wanted = _wanted(root)
    for folder in (EXAMPLE_DIR, PD_DIR, REPORT_DIR):
        if (root / folder).exists():
            shutil.rmtree(root / folder)
    for name, data in wanted.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if name.endswith(".sh"):
            path.chmod(0o755)
    folders = {EXAMPLE_DIR + "/", PD_DIR + "/", *([REPORT_DIR + "/"] if any(n.startswith(REPORT_DIR) for n in wanted) else [])}
    return sorted(folders | {n for n in wanted if not n.startswith((EXAMPLE_DIR, PD_DIR, REPORT_DIR))})
