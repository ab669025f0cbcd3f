"""Page-keyed rules (optkit.resolve.page_rules): a scheduling, layout or speculative number read on a tutorial page
holds for the model the page is about, on the hardware tab and in the release where the page states it; a model
without a page gets the nearest page's, labelled optkit's generalization; a model with a page never gets another
page's number.

The data is the tutorial data's contract (versions/tutorials/<release>.json, format 1). The fixtures under
tests/fixtures/tutorials/ hold the scenario tables of three pages of 0.23.0 and 0.30.0rc2 in that format, and
``test_the_fixture_rows_are_the_trees_lines`` holds every fixture row to the line of the cached tree it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optkit.bundle.writer import bundle_files
from optkit.resolve import page_rules, page_tables
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request

FIXTURES = Path(__file__).parent / "fixtures" / "tutorials"
DATA = {path.stem.removeprefix("scenario-tables-"): json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(FIXTURES.glob("scenario-tables-*.json"))}
OWN_397B = "models/Qwen3.5-397B-A17B.md"
PAGE_35B = "models/Qwen3.6-35B-A3B.md"


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


@pytest.fixture
def committed(monkeypatch):
    """The plan path reads the fixtures as the committed tutorial data; ``committed(data)`` replaces them."""
    def use(data: dict[str, dict]):
        monkeypatch.setattr(page_rules, "committed_pages", lambda r: data[r]["pages"] if r in data else None)
        monkeypatch.setattr(page_rules, "committed_releases", lambda: sorted(data))
        page_rules._ADVICE.clear()

    use(DATA)
    yield use
    page_rules._ADVICE.clear()


def _advice(workspace, model: str, generation: str, goal: str = "throughput", release: str = "0.30.0rc2",
            data=DATA):
    return page_rules.advice(workspace.models[model], generation, release, goal,
                             catalog_models=tuple(workspace.models.values()),
                             source=_source(data))


def _source(data: dict[str, dict]) -> page_rules.TutorialSource:
    return page_rules.TutorialSource(lambda: sorted(data), lambda r: data[r]["pages"] if r in data else None)


def _values(advice) -> dict:
    return {v.knob: (v.value, v.source.page, v.source.line) for v in advice.values}


def _committed_advice(model: str, family: str, goal: str, release: str = "0.30.0rc2"):
    """The advice the committed tutorial data gives ``model`` on ``family`` (skipped without that release's data)."""
    tutorial_data = pytest.importorskip("optkit.versions.tutorial_data")
    if release not in tutorial_data.releases():
        pytest.skip(f"no committed tutorial data for {release}")
    workspace = load_workspace()
    page_rules._ADVICE.clear()
    return page_rules.advice(workspace.models[model], family, release, goal,
                             catalog_models=tuple(workspace.models.values()))


# --------------------------------------------------------------------------- the data is the trees'


def _tree_lines(release: str, page: str) -> list[str] | None:
    from optkit.tree.cache import tree_path

    path = tree_path("vllm-ascend", release) / "docs/source/tutorials" / page
    return path.read_text(encoding="utf-8").split("\n") if path.is_file() else None


def test_the_fixture_rows_are_the_trees_lines():
    checked = 0
    for release, data in DATA.items():
        for page, entry in data["pages"].items():
            lines = _tree_lines(release, page)
            if lines is None:
                pytest.skip(f"vllm-ascend {release}'s tree is not cached")
            for table in entry["tables"]:
                assert [c.strip() for c in lines[table["line"] - 1].strip().strip("|").split("|")] == table["columns"]
                for row in table["rows"]:
                    assert [c.strip() for c in lines[row["line"] - 1].strip().strip("|").split("|")] == row["cells"]
                    checked += 1
    assert checked >= 40


# --------------------------------------------------------------------------- each page's own numbers


@pytest.mark.parametrize("release, line", [("0.30.0rc2", 881), ("0.23.0", 958)])
def test_the_397b_gets_its_own_page_and_never_the_35b_pages_numbers(workspace, release, line):
    """Qwen3.5-397B-A17B.md's high-throughput row (A2, multi-node MP): 16 per DP, 4096 batched tokens, MTP 3, prefix
    cache off and no sequence parallelism ("FullGraph, shared expert overlap, CPU binding"); Qwen3.6-35B-A3B.md's
    (same model_type) says 32 per DP, 8192 and sequence parallelism: none of those reaches the 397B."""
    own = _advice(workspace, "qwen3.5-397b-a17b", "A2", release=release)
    assert (own.page, own.page_release, own.generalized) == (OWN_397B, release, "")
    assert {k: v[0] for k, v in _values(own).items() if k in ("max_num_seqs", "max_num_batched_tokens",
            "num_speculative_tokens", "sequence_parallel", "prefix_caching")} == {
        "max_num_seqs": 16, "max_num_batched_tokens": 4096, "num_speculative_tokens": 3, "sequence_parallel": False,
        "prefix_caching": False}
    assert {(page, ln) for _, page, ln in _values(own).values()} == {(OWN_397B, line)}
    other = _advice(workspace, "qwen3.6-35b-a3b", "A2", release=release)
    assert (other.page, other.value("max_num_seqs"), other.value("max_num_batched_tokens"),
            other.value("sequence_parallel")) == (PAGE_35B, 32, 8192, True)


def test_another_tab_of_the_models_own_page_is_labelled_a_generalization(workspace):
    advice = _advice(workspace, "qwen3.5-397b-a17b", "A3")
    assert advice.page == OWN_397B and advice.value("max_num_seqs") == 16
    assert advice.generalized == ("the page's high throughput row is on its A2 tab and it has none for A3: optkit "
                                  "carries it to A3")
    assert advice.facts()["page.own"] is False and advice.facts()["page.present"] is True
    assert advice.lines()[0].startswith("Page advice for high throughput (optkit's generalization from "
                                        "Qwen3.5-397B-A17B.md (vllm-ascend 0.30.0rc2): ")


def test_a_row_naming_its_hardware_is_read_on_that_tab_only(workspace):
    """Qwen3.5-27B-Qwen3.6-27B.md:900/901: TP 2 with DP 4 on A2, DP 8 on A3; its 950DT row runs TP 1."""
    a2, a3, a5 = (_advice(workspace, "qwen3.6-27b", tab) for tab in ("A2", "A3", "A5"))
    assert [(a.value("data_parallel_size"), a.values[0].source.line, a.generalized) for a in (a2, a3)] == [
        (4, 900, ""), (8, 901, "")]
    assert (a5.value("tensor_parallel_size"), a5.value("max_num_batched_tokens")) == (1, 16384)


def test_a_model_without_a_page_gets_the_nearest_page_labelled(workspace):
    advice = _advice(workspace, "qwen3.5-35b-a3b", "A3")
    assert advice.page == PAGE_35B and advice.facts()["page.own"] is False
    assert advice.generalized == ("qwen3.5-35b-a3b has no page of its own; qwen3.6-35b-a3b's page is the nearest by "
                                  "architecture (the same model_type, qwen3_5_moe)")
    assert "optkit's generalization from Qwen3.6-35B-A3B.md (vllm-ascend 0.30.0rc2)" in advice.lines()[0]


def test_a_model_whose_page_is_silent_gets_no_other_pages_number(workspace):
    """The 397B's page has no low-latency row outside PD (its rows are prefill and decode nodes): the advice is
    empty, although the 35B page, the nearest by architecture, has one."""
    advice = _advice(workspace, "qwen3.5-397b-a17b", "A3", goal="latency")
    assert (advice.page, advice.values) == ("", ())
    assert advice.facts()["page.present"] is False


def test_a_release_without_the_page_reads_the_nearest_earlier_release(workspace):
    advice = _advice(workspace, "qwen3.6-35b-a3b", "A3", release="0.28.0rc1", data={"0.23.0": DATA["0.23.0"]})
    assert (advice.page_release, advice.release) == ("0.23.0", "0.28.0rc1")
    assert advice.values[0].source.text().endswith("(vllm-ascend 0.23.0)")
    assert "vllm-ascend 0.28.0rc1 has no data for this page: read on 0.23.0" in advice.lines()[0]


def test_a_release_before_every_page_has_no_advice(workspace):
    assert _advice(workspace, "qwen3.6-35b-a3b", "A3", release="0.18.0").page == ""


def test_commands_fill_what_the_row_leaves_unstated():
    """A command on the request's tab, under the scenario, gives k, FlashComm1 and memory (inline data in the
    contract's format)."""
    model = type("M", (), {"tutorials": ["X.md"], "id": "x"})()
    page = {"tables": [{"kind": "scenario", "line": 10, "tabs": [], "columns": ["Scenario", "Max Num Seqs"],
                        "rows": [{"line": 12, "cells": ["High throughput", "Tune by concurrency"]}]}],
            "commands": [
                {"line": 40, "hardware": "A3", "scenario": "High Throughput", "pd_role": None,
                 "options": {"--max-num-seqs": {"value": "24", "line": 44},
                             "--speculative-config.num_speculative_tokens": {"value": 2, "line": 47},
                             "--gpu-memory-utilization": {"value": "0.9", "line": 45}},
                 "env": {"VLLM_ASCEND_ENABLE_FLASHCOMM1": {"value": "1", "line": 38}}},
                {"line": 80, "hardware": "A2", "scenario": "High Throughput", "pd_role": None,
                 "options": {"--max-num-seqs": {"value": "99", "line": 84}}, "env": {}}]}
    advice = page_rules.advice(model, "A3", "0.30.0rc2", "throughput",
                               source=_source({"0.30.0rc2": {"pages": {"models/X.md": page}}}))
    assert _values(advice) == {"max_num_seqs": (24, "models/X.md", 44), "num_speculative_tokens": (2, "models/X.md", 47),
                               "gpu_memory_utilization": ("0.9", "models/X.md", 45),
                               "sequence_parallel": (True, "models/X.md", 38)}


@pytest.mark.parametrize("text, family", [
    ("16 A2 NPUs", "A2"), ("Single-Node (A3)", "A3"), ("8 950DT Products NPUs", "A5"), ("Atlas 300I DUO", "310P"),
    ("Atlas 800 A3", "A3"), ("A3", "A3"), ("Single node", None), ("2 or more NPUs", None), ("Qwen3.6-35B-A3B", None)])
def test_the_hardware_a_cell_names(text, family):
    assert page_tables.hardware_named(text) == family


# --------------------------------------------------------------------------- the plan


def _plan(workspace, **fields):
    return plan(parse_request({"target": "910b", "concurrency": 64, "goal": "throughput", "dp": "auto",
                               "vllm_ascend_version": "0.30.0rc2", **fields}), workspace)


def _serve(result, flag: str):
    return next(d.value for d in result.derivations if d.target == f"serve:{flag}")


@pytest.mark.parametrize("model, target, more, dp, batched, flashcomm1", [
    # 64 / 16 per DP on the page's A2 layout (TP 8, one DP rank per node); the row's 4096; no sequence parallelism
    ("qwen3.5-397b-a17b", "910b", {"tp": 8, "nodes": 4}, 4, 4096, False),
    ("qwen3.5-397b-a17b", "910c", {"quantization": "w8a8", "tp": 4}, 4, 4096, False),  # the A2 row carried to A3, labelled (W8A8: bf16 needs 2 A3 nodes)
    ("qwen3.6-35b-a3b", "910c", {}, 2, 8192, True),  # 64 / 32 per DP; FlashComm1 with EP and DP > 1
    ("qwen3.5-35b-a3b", "910c", {}, 2, 8192, True),  # no page: the 35B page's, labelled
    ("qwen3.6-27b", "910c", {}, 2, 16384, False),  # Qwen3.5-27B-Qwen3.6-27B.md:901: 32 per DP, 16384
], ids=["397b-a2", "397b-a3", "35b-a3", "3.5-35b-a3", "27b-a3"])
def test_plans_take_their_own_pages_numbers(workspace, committed, model, target, more, dp, batched, flashcomm1):
    result = _plan(workspace, model=model, target=target, **more)
    assert (result.request.dp, _serve(result, "--max-num-batched-tokens"), result.request.flashcomm1) == (
        dp, batched, flashcomm1)
    chosen = {c.field: c for c in result.choices}
    assert "page.max_num_seqs" in chosen["dp"].how


def test_a_k_other_than_the_pages_is_a_risk_naming_it(workspace, committed):
    result = _plan(workspace, model="qwen3.5-397b-a17b", target="910c", quantization="w8a8", tp=4, mtp=True, num_speculative_tokens=4)
    assert result.facts["page.num_speculative_tokens"] == 3
    from optkit.resolve.classify import risks_that_hold

    texts = [r.text for r in risks_that_hold(workspace.catalog["mtp-enable-k4"], result.facts)]
    assert any("another num_speculative_tokens" in t for t in texts)
    assert not any("another num_speculative_tokens" in t for t in
                   [r.text for r in risks_that_hold(workspace.catalog["mtp-enable-k4"],
                                                    _plan(workspace, model="qwen3.5-397b-a17b", target="910c", quantization="w8a8", tp=4, mtp=True, num_speculative_tokens=3).facts)])


def test_the_views_show_each_value_with_its_line_and_the_lock_records_them(workspace, committed):
    from optkit.cli.render import explain_report, plan_report

    result = _plan(workspace, model="qwen3.5-397b-a17b", target="910c", quantization="w8a8", tp=4)
    shown = "\n".join(str(b) for b in explain_report(result, workspace.catalog, ["sched-capacity-for-load"]))
    assert "  max_num_seqs = 16 ('Max Num Seqs: 16 per DP', Qwen3.5-397B-A17B.md:881 (vllm-ascend 0.30.0rc2))" in shown
    lock = json.loads(bundle_files(result, workspace)["optkit.lock.json"])
    recorded = {v["knob"]: (v["value"], v["page"], v["line"], v["release"]) for v in lock["page_advice"]["values"]}
    assert recorded["max_num_batched_tokens"] == (4096, OWN_397B, 881, "0.30.0rc2")
    assert lock["facts"]["page.max_num_seqs"] == 16


def test_without_committed_data_the_plan_reads_no_page(workspace, committed):
    committed({})
    result = _plan(workspace, model="qwen3.5-397b-a17b", target="910c", quantization="w8a8", tp=4)
    assert result.facts["page.present"] is False and result.page_advice.values == ()
    assert result.request.dp == 4  # the architecture rule the page rules replace, kept for releases without data


def test_a_page_silent_on_the_scenario_leaves_the_model_to_its_own_pages_rules(workspace, committed):
    """With the 397B page's scenario tables gone, no row states its high-throughput numbers: the rule read on its
    own page (16 per DP: 128 / 16 = 8, cited per release in sched-capacity-for-load) applies, never the 35B page's 32 that the
    generic rule carries to models without a page."""
    data = json.loads(json.dumps(DATA))
    data["0.30.0rc2"]["pages"][OWN_397B]["tables"] = []
    committed(data)
    result = _plan(workspace, model="qwen3.5-397b-a17b", target="910c", quantization="w8a8", tp=4, nodes=2, concurrency=128)
    assert (result.facts["page.present"], result.facts["page.model_pages"]) == (False, "Qwen3.5-397B-A17B.md")
    assert result.request.dp == 8 and "page.model_pages" in {c.field: c for c in result.choices}["dp"].how


def test_an_unnamed_command_is_read_only_where_it_agrees_with_the_row():
    """A command the page places under no scenario is the row's own when it runs on the row's tab and deployment
    and agrees with every number the row states (Qwen3.5-397B-A17B.md's multi-node MP script for its A2 row)."""
    model = type("M", (), {"tutorials": ["X.md"], "id": "x"})()
    table = {"kind": "scenario", "line": 10, "tabs": [], "columns": ["Scenario", "Node Role", "Max Num Seqs", "DP"],
             "rows": [{"line": 12, "cells": ["High throughput", "MP node (A2)", "16 per DP", "1 per node, 2 global"]}]}

    def command(line: int, seqs: str, deployment: str = "multi-node") -> dict:
        return {"line": line, "hardware": "A2", "scenario": None, "pd_role": None, "deployment": deployment,
                "options": {"--max-num-seqs": {"value": seqs, "line": line + 1},
                            "--data-parallel-size": {"value": "2", "line": line + 2}}, "env": {}}

    def read(*commands) -> dict:
        page = {"tables": [table], "commands": list(commands)}
        return _values(page_rules.advice(model, "A2", "0.30.0rc2", "throughput",
                                         source=_source({"0.30.0rc2": {"pages": {"models/X.md": page}}})))

    assert read(command(30, "16"))["data_parallel_size"] == (2, "models/X.md", 32)
    assert read(command(30, "128"))["data_parallel_size"] == (None, "models/X.md", 12)  # disagrees: another row's
    assert read(command(30, "16", "single-node"))["data_parallel_size"] == (None, "models/X.md", 12)


def test_the_committed_data_gives_the_397b_its_own_page():
    """Once the tutorial data is committed (versions/tutorials/, optkit.versions.tutorial_data): the same reading
    on the real extraction of 0.30.0rc2, with the multi-node MP command of the A2 row (:306-325) filling in DP."""
    advice = _committed_advice("qwen3.5-397b-a17b", "A2", "throughput")
    found = _values(advice)
    assert {k: found[k] for k in ("max_num_seqs", "max_num_batched_tokens", "num_speculative_tokens",
                                  "sequence_parallel", "data_parallel_size")} == {
        "max_num_seqs": (16, OWN_397B, 881), "max_num_batched_tokens": (4096, OWN_397B, 881),
        "num_speculative_tokens": (3, OWN_397B, 881), "sequence_parallel": (False, OWN_397B, 881),
        "data_parallel_size": (2, OWN_397B, 309)}


def test_a_page_silent_on_the_scenario_still_gives_its_command_of_the_plans_layout():
    """No row or command of the page states the scenario on this tab: its command of exactly the plan's layout is
    the page's advice for that layout (carried, and its batched tokens a page fact), unless the page places it
    under another scenario or its numbers are another scenario row's; page.present stays false (no scenario
    advice), so the model's own-page rules still apply."""
    model = type("M", (), {"tutorials": ["X.md"], "id": "x"})()
    table = {"kind": "scenario", "line": 10, "tabs": [], "columns": ["Scenario", "TP", "Max Num Batched Tokens"],
             "rows": [{"line": 12, "cells": ["Long context (A2)", "8", "32768"]}]}

    def command(line: int, tp: str, dp: str, batched: str) -> dict:
        return {"line": line, "hardware": "A2", "scenario": None, "pd_role": None, "deployment": "single-node",
                "nodes": 1, "node_rank": 0,
                "options": {"--tensor-parallel-size": {"value": tp, "line": line + 1},
                            "--data-parallel-size": {"value": dp, "line": line + 2},
                            "--max-num-batched-tokens": {"value": batched, "line": line + 3}},
                "env": {"TASK_QUEUE_ENABLE": {"value": "1", "line": line - 1}}}

    page = {"tables": [table], "commands": [command(30, "8", "1", "32768"), command(50, "4", "2", "2048")]}
    advice = page_rules.advice(model, "A2", "0.30.0rc2", "throughput",
                               source=_source({"0.30.0rc2": {"pages": {"models/X.md": page}}}))
    assert advice.values == () and advice.facts()["page.present"] is False
    mine = advice.for_layout(4, 2, 1)
    assert {s.key: (s.value, s.source.line) for s in mine.settings} == {
        "env:TASK_QUEUE_ENABLE": ("1", 49), "serve:--max-num-batched-tokens": ("2048", 53),
        "layout:--enable-expert-parallel": (False, 50),  # no flag: the command runs without expert parallelism
        "layout:weights": ("bf16", 50),  # no checkpoint, format word or --quantization: bf16
        "layout:--decode-context-parallel-size": (1, 50)}  # no flag: no context parallelism
    assert mine.facts()["page.command_max_num_batched_tokens"] == 2048 and ":50, of this layout" in mine.note
    assert mine.facts()["page.present"] is False
    # the TP 8 command agrees with the long-context row: that scenario's advice, not throughput's
    assert advice.for_layout(8, 1, 1).page == "" and advice.for_layout(2, 1, 1).page == ""
    assert advice.for_layout(8, 1, 1).facts()["page.command_max_num_batched_tokens"] == 0


def test_the_tabs_a_command_holds_for():
    """A command's own tab; every family its context names ('Atlas 800 A3 / Atlas 800 A2'); for a command the page
    places under a scenario with no tab, the one tab that scenario's rows name (Qwen3-30B-A3B.md's 'Low Latency'
    command under a row saying '2 (A3)'); else none."""
    table = {"kind": "scenario", "line": 10, "tabs": [], "columns": ["Scenario", "NPUs", "TP"],
             "rows": [{"line": 12, "cells": ["Low Latency", "2 (A3)", "4"]},
                      {"line": 13, "cells": ["Long Context", "2 (A3)", "4"]},
                      {"line": 14, "cells": ["Long Context", "4 (A2)", "4"]}]}
    page = {"tables": [table]}
    assert page_tables.command_tabs(page, {"hardware": "A2", "hardware_families": ["A2"]}) == ("A2",)
    assert page_tables.command_tabs(page, {"hardware": None, "hardware_families": ["A3", "A2"]}) == ("A2", "A3")
    assert page_tables.command_tabs(page, {"hardware": None, "scenario": "Low Latency"}) == ("A3",)
    assert page_tables.command_tabs(page, {"hardware": None, "scenario": "Long Context"}) == ()  # two tabs
    assert page_tables.command_tabs(page, {"hardware": None, "scenario": None}) == ()


def test_a_command_written_for_several_tabs_is_each_tabs_after_the_tabs_own():
    """A command the page writes for A2 and A3 holds on the A2 tab too: a plan of its layout carries its settings,
    and an A2-only command of the same layout comes first."""
    model = type("M", (), {"tutorials": ["X.md"], "id": "x"})()

    def command(line: int, tp: str, families: list, buffsize: str) -> dict:
        return {"line": line, "hardware": families[0] if len(families) == 1 else None,
                "hardware_families": families, "scenario": None, "pd_role": None, "deployment": "single-node",
                "nodes": 1, "node_rank": 0, "options": {"--tensor-parallel-size": {"value": tp, "line": line + 1}},
                "env": {"HCCL_BUFFSIZE": {"value": buffsize, "line": line - 1}}}

    def carried(commands: list, tp: int) -> dict:
        advice = page_rules.advice(model, "A2", "0.30.0rc2", "throughput", source=_source(
            {"0.30.0rc2": {"pages": {"models/X.md": {"tables": [], "commands": commands}}}}))
        return {s.key: (s.value, s.source.line) for s in advice.for_layout(tp, 1, 1).settings
                if not s.key.startswith("layout:")}

    shared, own = command(30, "4", ["A2", "A3"], "512"), command(50, "4", ["A2"], "1024")
    assert carried([shared], 4) == {"env:HCCL_BUFFSIZE": ("512", 29)}
    assert carried([shared, own], 4) == {"env:HCCL_BUFFSIZE": ("1024", 49)}
    assert carried([command(30, "4", ["A3"], "512")], 4) == {}


def _committed_plan(**fields):
    """A plan of ``fields`` on vllm-ascend 0.30.0rc2, read from the committed tutorial data (skipped without it)."""
    tutorial_data = pytest.importorskip("optkit.versions.tutorial_data")
    if "0.30.0rc2" not in tutorial_data.releases():
        pytest.skip("no committed tutorial data for 0.30.0rc2")
    page_rules._ADVICE.clear()
    return plan(parse_request({**fields, "vllm_ascend_version": "0.30.0rc2"}), load_workspace())


def test_the_committed_data_gives_a_plan_its_pages_command_of_its_layout():
    """DeepSeek-V3.1.md (0.30.0rc2) states no batched tokens for high throughput: on its 950 tab, a plan of its
    single-node command's layout (TP 8, MTP 3) takes that command's 16384 (:194) and settings, each with its line,
    not another page's 8192."""
    result = _committed_plan(model="deepseek-v3.1", target="950", tp=8, dp=1, mtp=True, num_speculative_tokens=3,
                             concurrency=96, goal="throughput", quantization="w8a8c8")
    batched = next(d for d in result.derivations if d.target == "serve:--max-num-batched-tokens")
    assert batched.value == 16384 and "DeepSeek-V3.1.md:194 (vllm-ascend 0.30.0rc2)" in batched.how
    assert result.facts["page.command_max_num_batched_tokens"] == 16384
    assert any(s.recipe.startswith("page:DeepSeek-V3.1.md:") for s in result.env)


def test_a_page_that_keeps_static_kernels_off_keeps_them_off():
    """DeepSeek-V4-Flash.md (0.30.0rc2) sets "enable_static_kernel": false in every command (:335 says it "keeps
    static-kernel compilation disabled"): waterfall-static-kernel does not apply, and the plan carries the page's
    false from the scenario's own command (:185), not from the tab's other command of the same layout (:208)."""
    result = _committed_plan(model="deepseek-v4-flash", target="910b", tp=8, dp=1, mtp=True,
                             num_speculative_tokens=1, concurrency=32, goal="throughput", quantization="w8a8")
    assert result.facts["page.static_kernel"] == "off"
    decision = result.resolution.decisions["waterfall-static-kernel"]
    assert decision.status.name != "selected" and "keeps static kernels off" in decision.reason
    assert result.additional_config["ascend_compilation_config"]["enable_static_kernel"] is False
    assert result.config_sources["additional_config.ascend_compilation_config.enable_static_kernel"] == \
        "page:DeepSeek-V4-Flash.md:185"


def test_a_command_is_the_row_it_agrees_with_most():
    """Qwen3.6-35B-A3B.md (0.30.0rc2) writes one single-node command for A2 and A3 (:191: TP 2, DP 1, 128
    sequences, 262144, 16384, prefix caching): it is the long-context row's (:348, five numbers agree), not the
    low-latency row's (:350 states only TP 2 and DP 1; the rest in words), so low-latency advice keeps the row's
    words ('Tune by concurrency', '1024 to 4096') instead of the long-context command's numbers."""
    pages = page_rules.committed_pages("0.30.0rc2")
    if not pages:
        pytest.skip("no committed tutorial data for 0.30.0rc2")
    page = pages[PAGE_35B]
    assert page_tables.agreeing_scenario(page, 191, "A3") == "long context"
    page_rules._ADVICE.clear()
    workspace = load_workspace()
    advice = page_rules.advice(workspace.models["qwen3.6-35b-a3b"], "A3", "0.30.0rc2", "latency",
                               catalog_models=tuple(workspace.models.values()))
    seqs = next(v for v in advice.values if v.knob == "max_num_seqs")
    assert (seqs.value, seqs.written, seqs.source.line) == (None, "Max Num Seqs: Tune by concurrency", 350)
    assert advice.value("max_num_batched_tokens") is None and advice.value("prefix_caching") is None


def test_a_pd_role_takes_its_own_pages_command_for_that_role():
    """A page that runs PD role commands gives each role the settings of its own command of the plan's instance
    shape (TP, DP) on the tab; a shape the page does not run leaves the plan's settings for both roles."""
    model = type("M", (), {"tutorials": ["X.md"], "id": "x"})()

    def command(line: int, role: str, buffsize: str) -> dict:
        return {"line": line, "hardware": "A3", "hardware_families": ["A3"], "scenario": None, "pd_role": role,
                "deployment": "pd", "nodes": 1, "node_rank": 0,
                "options": {"--tensor-parallel-size": {"value": "2", "line": line + 1},
                            "--data-parallel-size": {"value": "8", "line": line + 2},
                            "--max-num-batched-tokens": {"value": "2048" if role == "decode" else "16384",
                                                         "line": line + 3}},
                "env": {"HCCL_BUFFSIZE": {"value": buffsize, "line": line - 1}}}

    page = {"tables": [], "commands": [command(30, "prefill", "1024"), command(60, "decode", "512")]}
    advice = page_rules.advice(model, "A3", "0.30.0rc2", "throughput",
                               source=_source({"0.30.0rc2": {"pages": {"models/X.md": page}}}))
    assert [(role, layout, line) for role, layout, line, _ in advice.roles] == [("prefill", (2, 8), 30),
                                                                               ("decode", (2, 8), 60)]
    decode = advice.for_role("decode", 2, 8)
    assert decode.role == "decode" and decode.layout_line == 60
    assert {s.key: (s.value, s.source.line) for s in decode.settings if not s.key.startswith("layout:")} == {
        "env:HCCL_BUFFSIZE": ("512", 59), "serve:--max-num-batched-tokens": ("2048", 63)}
    assert decode.facts()["page.command_max_num_batched_tokens"] == 2048
    assert decode.lines()[0].startswith("Page advice for the decode role (")
    assert advice.for_role("decode", 4, 4).role == "" and advice.for_role("decode", 4, 4).settings == advice.settings


def test_the_committed_data_gives_each_pd_role_its_pages_command():
    """Qwen3.5-27B-Qwen3.6-27B.md (0.30.0rc2) runs a PD pair of TP 2 × DP 8 on A3: a --pd plan of that shape gives
    the prefiller its command's settings (:638: 16384 batched tokens, 0.95 of memory) and the decoder its own (:640:
    2048, 0.91, recompute_scheduler_enable), each labelled with its line in the role's argv and the lock; explain
    shows both; the prefiller's draft runs eager because its command says so (:549)."""
    result = _committed_plan(model="qwen3.5-27b", target="910c", tp=2, dp=8, mtp=True, num_speculative_tokens=3,
                             concurrency=128, goal="throughput", quantization="w8a8", pd="1:1")
    from optkit.bundle.pd import RoleLaunch
    from optkit.cli.render import explain_report, plan_report

    workspace = load_workspace()
    launches = {role: RoleLaunch(result, workspace, role) for role in ("prefill", "decode")}

    def flag(role: str, name: str) -> tuple[str, str]:
        argv, sources = launches[role].argv, launches[role].sources
        return argv[argv.index(name) + 1], sources[argv.index(name) + 1]

    assert flag("prefill", "--max-num-batched-tokens")[0] == "16384"
    assert flag("decode", "--max-num-batched-tokens")[0] == "2048"
    assert flag("prefill", "--gpu-memory-utilization") == ("0.95", "page:Qwen3.5-27B-Qwen3.6-27B.md:547")
    assert flag("decode", "--gpu-memory-utilization") == ("0.91", "page:Qwen3.5-27B-Qwen3.6-27B.md:607")
    assert json.loads(flag("decode", "--additional-config")[0])["recompute_scheduler_enable"] is True
    assert "recompute_scheduler_enable" not in json.loads(flag("prefill", "--additional-config")[0])
    assert json.loads(flag("prefill", "--speculative-config")[0])["enforce_eager"] is True
    files = bundle_files(result, workspace)
    lock = json.loads(files["optkit.lock.json"])
    assert "--max-num-batched-tokens" in lock["launch"]["roles"]["decode"]["argv"]
    decode_argv = lock["launch"]["roles"]["decode"]["argv"]
    assert decode_argv[decode_argv.index("--max-num-batched-tokens") + 1] == "2048"
    shown = "\n".join(str(block) for block in explain_report(result, workspace.catalog, []))
    assert "Page advice for the prefill role" in shown and "Page advice for the decode role" in shown
    report = "\n".join(str(block) for block in plan_report(result, workspace.catalog))
    assert "the decode role: --max-num-batched-tokens = 2048 (sched-capacity-for-load)" in report


def test_the_pages_slots_are_carried_where_no_recipe_sizes_them_and_they_hold_the_load():
    """Qwen3-30B-A3B.md's low-latency command (0.30.0rc2, under a scenario row naming A3) runs --max-num-seqs 100
    (:533): a latency plan of its layout carries it (no recipe sizes the scheduler under that goal), labelled with
    its line; a load above 100 sequences keeps vLLM's default instead of queueing behind the page's slots."""
    def seqs(concurrency: int):
        result = _committed_plan(model="qwen3-30b-a3b", target="910c", tp=4, dp=1, concurrency=concurrency,
                                 goal="latency", quantization="w8a8", spec_method="eagle3",
                                 draft_model="your_eagle3_model_path", num_speculative_tokens=3)
        return next(((s.key, s.recipe) for s in result.serve_args if s.key.startswith("--max-num-seqs")), None)

    assert seqs(100) == ("--max-num-seqs 100", "page:Qwen3-30B-A3B.md:533")
    assert seqs(8) == ("--max-num-seqs 100", "page:Qwen3-30B-A3B.md:533")
    assert seqs(128) is None


def test_of_several_commands_of_the_layout_the_one_serving_the_requests_context_is_carried():
    """Two commands of one layout on the tab (TP 4; a short-context one and a long-context one with rope scaling): a
    plan asking for the long-context command's --max-model-len carries that command (its rope scaling with it);
    otherwise the first."""
    model = type("M", (), {"tutorials": ["X.md"], "id": "x"})()

    def command(line: int, scenario: str | None, length: str, extra: dict) -> dict:
        return {"line": line, "hardware": "A3", "scenario": scenario, "pd_role": None, "deployment": "single-node",
                "nodes": 1, "node_rank": 0,
                "options": {"--tensor-parallel-size": {"value": "4", "line": line + 1},
                            "--max-model-len": {"value": length, "line": line + 2}, **extra}, "env": {}}

    yarn = {"--hf-overrides": {"value": '{"rope_scaling": {"rope_type": "yarn", "factor": 4}}', "line": 64}}
    page = {"tables": [], "commands": [command(30, None, "37364", {}), command(60, None, "131072", yarn)]}
    advice = page_rules.advice(model, "A3", "0.30.0rc2", "throughput",
                               source=_source({"0.30.0rc2": {"pages": {"models/X.md": page}}}))
    first, asked = advice.for_layout(4, 1, 1), advice.for_layout(4, 1, 1, 131072)
    assert (first.layout_line, asked.layout_line) == (30, 60)
    assert "serve:--hf-overrides" in {s.key for s in asked.settings} - {s.key for s in first.settings}


def test_expert_parallelism_follows_the_models_own_page_unless_the_request_says():
    """Qwen3-Next.md's A3 command (0.30.0rc2, :138, TP 4) runs without --enable-expert-parallel: a plan of that
    layout leaves it off (page.expert_parallel 'off'); --ep turns it on; a MoE model without a page of its own
    keeps the article's default (on)."""
    def ep(model: str, **more) -> tuple:
        result = _committed_plan(model=model, target="910c", **more)
        return result.facts["parallel.ep"], result.facts["page.expert_parallel"]

    assert ep("qwen3-next-80b-a3b-instruct", tp=4) == (False, "off")
    assert ep("qwen3-next-80b-a3b-instruct", tp=4, ep=True) == (True, "off")
    assert ep("qwen3.5-35b-a3b") == (True, "unstated")


def test_another_scenarios_command_of_the_layout_does_not_size_the_step():
    """Qwen3.6-35B-A3B.md's TP 2 × DP 1 command (0.30.0rc2 :191) is its long-context row's: a throughput plan of
    that layout carries its settings but takes the high-throughput row's 8192 batched tokens, not its 16384."""
    result = _committed_plan(model="qwen3.6-35b-a3b", target="910c", tp=2, dp=1, concurrency=64, goal="throughput")
    advice = result.page_advice
    assert (advice.layout_line, advice.layout_scenario) == (191, "long context")
    assert result.facts["page.command_max_num_batched_tokens"] == 0
    assert any(s.key == "--max-num-batched-tokens 8192" for s in result.serve_args)


def test_a_page_about_two_models_gives_each_its_own_command():
    """Qwen3.5-27B-Qwen3.6-27B.md (0.30.0rc2) runs a TP 2 command for each model ('Atlas 800 A3 / Atlas 800 A2 ›
    Qwen3.5-27B-w8a8' with --max-model-len 133000 at :255, then the Qwen3.6-27B one with 262144): a Qwen3.6-27B plan
    of that layout carries its own model's command, a Qwen3.5-27B plan the other."""
    def context(model: str) -> str:
        result = _committed_plan(model=model, target="910c", tp=2, dp=1, concurrency=8)
        return next(s.key for s in result.serve_args if s.key.startswith("--max-model-len"))

    assert context("qwen3.5-27b") == "--max-model-len 133000"
    assert context("qwen3.6-27b") == "--max-model-len 262144"


def test_the_pages_capture_sizes_for_the_plans_layout_are_carried_where_they_reach_the_load():
    """gpt-oss-120b.md:117 (0.30.0rc2) captures [1, 2, 3, 4] for its TP 4 command: a plan of that layout at c4 carries
    the page's list (page.command_capture_sizes_max 4 reaches its 4 decode rows) and neither capture recipe is
    selected; at c8 the page's list stops short of the load, so optkit's own sizes apply."""
    request = dict(model="gpt-oss-120b", target="910b", tp=4)
    at_page = _committed_plan(**request, concurrency=[4])
    assert at_page.facts["page.command_capture_sizes_max"] == 4
    assert at_page.compilation_config["cudagraph_capture_sizes"] == [1, 2, 3, 4]
    assert at_page.config_sources["compilation_config.cudagraph_capture_sizes"] == "page:gpt-oss-120b.md:127"
    assert not {"cudagraph-capture-sizes-spec-aware", "cudagraph-capture-sizes-for-load"} & set(at_page.selected)
    beyond = _committed_plan(**request, concurrency=[8])
    assert "cudagraph-capture-sizes-spec-aware" in beyond.selected
    assert beyond.compilation_config["cudagraph_capture_sizes"] == [8]
    # a model with no page of its own (the article's flagship) never reads another page's list
    flagship = _committed_plan(model="qwen3.5-35b", target="910c", mtp=True, concurrency=[1, 4, 8])
    assert flagship.facts["page.command_capture_sizes_max"] == 0
    assert "cudagraph-capture-sizes-spec-aware" in flagship.selected


def test_a_page_that_turns_fused_mc2_off_for_the_layout_keeps_it_off():
    """GLM5.2.md:137 (0.30.0rc2) runs its single-node TP 8 × DP 2 W4A8C8 command with "enable_fused_mc2": 0 (:157;
    its two-node commands set 1): a plan of that layout does not select moe-fused-mc2-enable."""
    result = _committed_plan(model="glm-5.2", target="910c", tp=8, dp=2, quantization="w4a8c8", mtp=True,
                             num_speculative_tokens=3, concurrency=[24])
    assert result.facts["page.fused_mc2"] == "off"
    assert "moe-fused-mc2-enable" not in result.selected
    assert "turns fused MC2 off" in result.resolution.decisions["moe-fused-mc2-enable"].reason


def test_whose_command_it_is_is_read_from_its_model_path():
    """One reader for page rules, the fit and the catalog harness (optkit.resolve.page_commands): the model a
    shared page's command serves, by the longest name its model path starts with, and the weights it serves."""
    from types import SimpleNamespace

    from optkit.resolve.page_commands import best_owners, command_weights, serves

    q35 = SimpleNamespace(id="qwen3.5-27b", aliases=(), hf_id="Qwen/Qwen3.5-27B", checkpoints=())
    q36 = SimpleNamespace(id="qwen3.6-27b", aliases=(), hf_id="Qwen/Qwen3.6-27B",
                          checkpoints=(SimpleNamespace(id="Eco-Tech/Qwen3.6-27B-w8a8"),))
    command = {"model": "/root/.cache/Eco-Tech/Qwen3.6-27B-w8a8/", "options": {}}
    assert best_owners(command, [q35, q36]) == [q36]
    assert serves(command, q36, [q35, q36]) and not serves(command, q35, [q35, q36])
    assert best_owners({"model": "your_model_path"}, [q35, q36]) == [q35, q36]  # names none: every owner
    # names none, but serves a quantized format one owner alone has a checkpoint of (Qwen3-Dense.md's tuned
    # commands: your_model_path with --quantization ascend, W8A8, which only Qwen3-32B's checkpoints are)
    q8 = SimpleNamespace(id="qwen3-8b", aliases=(), hf_id="Qwen/Qwen3-8B",
                         checkpoints=(SimpleNamespace(id="Eco-Tech/Qwen3-8B-w8a8sc-310-vllm", quantization="w8a8sc"),))
    q32 = SimpleNamespace(id="qwen3-32b", aliases=(), hf_id="Qwen/Qwen3-32B",
                          checkpoints=(SimpleNamespace(id="vllm-ascend/Qwen3-32B-W8A8", quantization="w8a8"),))
    quantized = {"model": "your_model_path", "options": {"--quantization": {"value": "ascend"}}}
    assert best_owners(quantized, [q8, q32]) == [q32]
    assert best_owners({"model": "your_model_path", "options": {}}, [q8, q32]) == [q8, q32]  # bf16: every owner
    assert command_weights(command, [{"id": "Eco-Tech/Qwen3.6-27B-w8a8", "quantization": "w8a8"}]) == \
        ("w8a8", "checkpoint Eco-Tech/Qwen3.6-27B-w8a8")
    assert command_weights({"model": "x/GLM-5.2-w4a8c8"})[0] == "w4a8c8"
    assert command_weights({"model": "<MODEL_PATH>", "options": {"--quantization": {"value": "ascend"}}})[0] == "w8a8"
    assert command_weights({"model": "unsloth/gpt-oss-120b-BF16", "options": {}}) == ("bf16", "no quantization named")


def test_a_request_for_the_context_a_long_context_command_serves_follows_that_command(workspace):
    """Qwen3.5-397B-A17B.md (0.23.0) has a throughput row only on its A2 tab; on its 950 tab it runs one TP 8 command,
    :220, which its numbers place under the long-context row (133000 tokens, 8192 batched). A throughput plan of that
    layout asking for that context is that command's load: its settings and its batched tokens are carried; without
    the context the command stays the long-context scenario's and the generalized row's 4096 holds."""
    fields = {"model": "qwen3.5-397b-a17b", "target": "950", "vllm_ascend_version": "0.23.0", "tp": 8,
              "quantization": "w4a4-mxfp4", "mtp": True, "num_speculative_tokens": 3, "concurrency": [128],
              "goal": "throughput"}
    served = plan(parse_request({**fields, "max_model_len": 133000}), workspace)
    assert served.page_advice.layout_line == 220 and "serves the request's --max-model-len 133000" in \
        served.page_advice.note
    assert served.facts["page.command_max_num_batched_tokens"] == 8192
    assert any(s.key == "--max-num-batched-tokens 8192" for s in served.serve_args)
    assert any(s.key == "--gpu-memory-utilization 0.95" and s.recipe.startswith("page:") for s in served.serve_args)
    other = plan(parse_request(fields), workspace)
    assert other.page_advice.layout_line == 0 and other.facts["page.command_max_num_batched_tokens"] == 0
    assert any(s.key == "--max-num-batched-tokens 4096" for s in other.serve_args)


def test_a_placeholder_path_is_named_by_the_label_above_its_block():
    """Qwen3-Dense.md writes `vllm serve your_model_path` under a "Qwen3-32B-W8A8:" label: the label names the model
    and its weights (optkit.resolve.page_commands.model_path); a label that is no name leaves the path as it is."""
    from optkit.resolve.page_commands import command_weights, model_path

    labelled = {"model": "your_model_path", "label": "Qwen3-32B-W8A8:"}
    assert model_path(labelled) == "Qwen3-32B-W8A8"
    assert command_weights(labelled)[0] == "w8a8"
    assert model_path({"model": "your_model_path", "label": "<u>High Throughput Configuration:</u>"}) == "your_model_path"
    assert model_path({"model": "/path/to/DeepSeek-V4-Pro-0813-w4a8", "label": "Node0:"}) == \
        "/path/to/DeepSeek-V4-Pro-0813-w4a8"


def test_a_page_command_turning_npugraph_ex_off_keeps_static_kernels_out():
    """Qwen3-Dense.md (0.23.0) :299 serves Qwen3-8B-W4A8 with enable_npugraph_ex false; static kernels compile under
    npugraph_ex only, so waterfall-static-kernel leaves the plan of that command's layout."""
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    result = plan(Request(model="qwen3-8b", target="910c", vllm_ascend_version="0.23.0", tp=1, quantization="w4a8"),
                  load_workspace())
    assert result.facts["page.npugraph_ex"] == "off"
    assert "waterfall-static-kernel" not in result.selected


def test_a_command_the_page_states_alike_for_several_families_implements_no_row_by_agreeing():
    """Qwen3.5-27B-Qwen3.6-27B.md 0.30.0rc2: the accuracy command (:823: TP 2, no DP, 32 sequences, 133000) holds
    for A2 and A3 alike (its checkpoint's weights row, :24), but it is no A2 high-throughput row's command (:900,
    TP 2 × DP 4): the page's advice on A2 carries no setting of it; the A3/A2 tab's own startup command (:246) stays
    the plan's command of its layout."""
    advice = _committed_advice("qwen3.5-27b", "A2", "throughput")
    assert not [v for v in advice.values if 823 <= v.source.line <= 831] and advice.settings == ()
    assert [line for _, line, _, _ in advice.by_layout][:1] == [246]


def test_a_page_written_for_several_families_alike_advises_each():
    """Gemma4.md 0.30.0rc2 writes its commands for "Atlas A2, Atlas A3, and 950PR&950DT Products" alike (:7) and for
    its dense and MoE models alike: a plan of either model on any of the three reads the page's first command
    (:80), labelled so; before, the page advised no plan."""
    for model in ("gemma-4-31b-it", "gemma-4-26b-a4b-it"):
        for family in ("A2", "A3", "A5"):
            advice = _committed_advice(model, family, "latency")
            assert _values(advice)["max_model_len"] == (32768, "models/Gemma4.md", 84), (model, family)
            assert "its first command on the tab" in advice.note
    assert _committed_advice("gemma-4-31b-it", "310P", "latency").values == ()
