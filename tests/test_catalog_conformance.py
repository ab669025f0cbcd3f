"""Conformance at catalog scale (tests/conformance_catalog.py): every LLM command of upstream's tutorials, read from
the committed extraction, against optkit's plan for the request the page and the command imply.

The coverage table in docs/models.md is generated and must be current; every command ends in exactly one outcome
with its reason; the throughput and scenario rows the issue names, where optkit has their model and tab, are
reproduced or explained; and one of them writes a bundle the paired vLLM's own parser and engine config accept.
"""

from __future__ import annotations

import re

import pytest

import conformance_catalog as cc
import conformance_support as cs

OUTCOMES = ("reproduced", "explained", "unexplained", "not comparable")


def test_the_coverage_table_in_the_docs_is_current():
    from optkit.versions.tutorial_data import releases

    documented = cs.doc_section(cc.DOC.read_text(encoding="utf-8"), cc.BEGIN, cc.END)
    assert documented == cc.coverage_table(releases()), "run: python tests/conformance_catalog.py --write"


@pytest.mark.parametrize("release", cc.COMPARED_RELEASES)
def test_every_llm_command_has_one_outcome_and_every_skip_a_reason(release):
    rows = cc.release_rows(release)
    models = cc._models()
    tabs = [(name, command["line"], tab, getattr(profile, "id", "")) for name, page, command in cc.llm_commands(release)
            for tab in cc.tabs_of(page, command) for profile in cc.profiles_of(name, command, models)]
    assert [(r.page, r.command["line"], r.tab, r.profile) for r in rows] == tabs and tabs
    assert all(r.tab is None for r in rows if r.reason == "no hardware tab")
    assert all(r.outcome in OUTCOMES for r in rows)
    assert all(r.reason for r in rows if r.outcome == "not comparable")
    assert all(not r.unexplained for r in rows if r.outcome in ("reproduced", "explained"))
    assert all(r.unexplained for r in rows if r.outcome == "unexplained")


# The rows of the issue's models that optkit reproduces or explains flag by flag today (release, page, line): the
# tuned command of the page's tab, planned from the page and the command alone.
HELD = [
    ("0.30.0rc2", "Qwen3-235B-A22B.md", 754),  # A3, the scenario table's high-throughput configuration (TP4 DP4)
    ("0.30.0rc2", "Qwen3-235B-A22B.md", 837),  # A3, long context with context parallelism and yarn rope scaling
    ("0.30.0rc2", "DeepSeek-V3.2.md", 139),  # A3 single node, W8A8
    ("0.30.0rc2", "DeepSeek-V3.2.md", 191),  # A3, two nodes, node 0
    ("0.30.0rc2", "Kimi-K2.5.md", 150),  # A3
    ("0.23.0", "DeepSeek-V3.2.md", 149),
    ("0.23.0", "Kimi-K2.5.md", 163),
    # the page's command of the plan's layout where the page states no scenario (its batched tokens, its settings)
    ("0.30.0rc2", "DeepSeek-V3.1.md", 190),  # 950 single node: 16384 from :194, not the generic 8192
    ("0.30.0rc2", "DeepSeek-V4-Flash.md", 164),  # A2: the page keeps static kernels off (:185)
    ("0.30.0rc2", "MiniMax-M3.md", 163),  # A3: enable_flashcomm1 is optkit's VLLM_ASCEND_ENABLE_FLASHCOMM1 (one knob)
    ("0.30.0rc2", "GLM5.md", 251),  # A3 single node
    ("0.30.0rc2", "GLM5.md", 364),  # A3 two nodes, node 0: the high-throughput row's command
    ("0.30.0rc2", "GLM5.md", 409),  # node 1, whose scenario is its leader's (int8 KV, DSA-CP, MLAPO from its page)
    ("0.30.0rc2", "Qwen3.5-397B-A17B.md", 451),  # a PD prefill role, against the --pd plan's prefill launch
    # PD roles with their own commands' settings (HCCL buffer, context length, memory share, batched tokens per role)
    ("0.30.0rc2", "Qwen3.5-27B-Qwen3.6-27B.md", 638),  # prefill
    ("0.30.0rc2", "Qwen3.5-27B-Qwen3.6-27B.md", 640),  # decode
    ("0.23.0", "Qwen3.5-27B-Qwen3.6-27B.md", 706),  # decode
    # scenario commands under rows naming A3: low latency carries the page's slots (--max-num-seqs 100), long
    # context the command serving the request's context (131072 with its yarn rope scaling)
    ("0.30.0rc2", "Qwen3-30B-A3B.md", 530),
    ("0.30.0rc2", "Qwen3-30B-A3B.md", 597),
    ("0.30.0rc2", "Qwen3-235B-A22B.md", 795),  # low latency (TP 16, MTP 3): the page's 128 slots
    # a command the page writes for A2 and A3 ('Atlas A2 inference products / Atlas A3 inference products'), on each
    ("0.30.0rc2", "Qwen3.6-35B-A3B.md", 191),
    ("0.30.0rc2", "Qwen3.5-27B-Qwen3.6-27B.md", 246),
    ("0.30.0rc2", "DeepSeek-R1.md", 148),
    # the page bounds the fit's activation reserve where it runs the layout (TP 4 bf16, on A2 and A3), and its capture
    # list for the layout is carried where it reaches the load; DeepSeek-V3.2's A2 list stops short (catalog.yaml)
    ("0.30.0rc2", "gpt-oss-120b.md", 117),
    ("0.23.0", "gpt-oss-120b.md", 114),
    ("0.30.0rc2", "DeepSeek-V3.2.md", 290),
    ("0.23.0", "DeepSeek-V3.2.md", 312),
    # PD roles run with the page's own connector and its keys (optkit.versions.pd PAGE_CONNECTORS, BY_MODULE)
    ("0.30.0rc2", "DeepSeek-V4-Pro.md", 1336),  # MooncakeHybridConnector, --no-disable-hybrid-kv-cache-manager
    ("0.23.0", "DeepSeek-V4-Flash.md", 649),
    ("0.30.0rc2", "GLM5.3-Flash.md", 473),  # MooncakeConnectorV2: no shapes
    ("0.30.0rc2", "GLM5.3-Flash.md", 408),  # its prefiller drafts 5, as the page's prefill command says
    ("0.30.0rc2", "Qwen3.5-397B-A17B.md", 620),  # MooncakeConnector by module path, the 950's endpoint directory
    # a command under no scenario whose numbers are the long-context row's: planned for its context, it is carried
    ("0.23.0", "Qwen3.5-397B-A17B.md", 220),  # 950, TP 8: 133000 tokens, 8192 batched, 0.95 of memory
    ("0.23.0", "Qwen3-235B-A22B.md", 224),
    # the page command's model-specific serving flags (Mamba cache mode, long-prefill threshold, engram offload)
    ("0.23.0", "Kimi-K3.md", 527),
    ("0.30.0rc2", "MiniMax-M3.md", 196),
    ("0.30.0rc2", "DeepSeek-V4.1-Flash.md", 207),
    ("0.30.0rc2", "GLM5.2.md", 977),  # an eager PD prefiller's graph keys, with its KV pool connector not written
    # a PD decoder whose page caps its step below its sequences' tokens: optkit keeps the full step, said so
    ("0.30.0rc2", "Qwen3.5-397B-A17B.md", 695),
    ("0.23.0", "Kimi-K2.6.md", 634),
]


@pytest.mark.parametrize("release, page, line", HELD, ids=[f"{r}-{p}:{n}" for r, p, n in HELD])
def test_the_issues_rows_are_reproduced_or_explained(release, page, line):
    rows = [r for r in cc.release_rows(release) if r.page == f"models/{page}" and r.command["line"] == line]
    assert rows
    for row in rows:  # one per tab the command holds for
        assert row.outcome in ("reproduced", "explained"), \
            (row.tab, [(d.key, d.tutorial_value, d.optkit_value) for d in row.unexplained])
        for d in row.differences:
            assert cc.explained_by(d, row.siblings, row.command), d


def test_a_command_written_for_several_tabs_is_compared_on_each():
    """Qwen3.6-35B-A3B.md writes its single-node command for 'Atlas A2 inference products / Atlas A3 inference
    products': it is planned on the A2 target and on the A3 target, and a command under a scenario whose rows
    name one tab (Qwen3-30B-A3B.md's 'Table 2' commands, rows '1 (A3)') on that tab."""
    rows = [r for r in cc.release_rows("0.30.0rc2")
            if r.page == "models/Qwen3.6-35B-A3B.md" and r.command["line"] == 191]
    assert [(r.tab, r.request["target"]) for r in rows] == [("A2", "910b"), ("A3", "910c")]
    scenario = [r for r in cc.release_rows("0.30.0rc2")
                if r.page == "models/Qwen3-30B-A3B.md" and r.command.get("scenario")]
    assert scenario and all(r.tab == "A3" and r.outcome != "not comparable" for r in scenario)


def test_a_plan_follows_its_own_pages_command_for_its_layout():
    """The page settings: a plan of the page's layout carries that command's own env, config and context length,
    each labelled with the page line (Qwen3-235B-A22B.md's long-context command, :837 of 0.30.0rc2)."""
    row = next(r for r in cc.release_rows("0.30.0rc2") if r.page == "models/Qwen3-235B-A22B.md" and r.command["line"] == 837)
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    result = plan(Request(**row.request), load_workspace())
    labels = {s.recipe for s in [*result.serve_args, *result.env]}
    assert any(re.fullmatch(r"page:Qwen3-235B-A22B\.md:\d+", label) for label in labels)
    # the long-context scenario's context is the request's (conformance_catalog.request_for); its command's rope
    # scaling comes with it from the page
    assert any(s.key.startswith("--max-model-len 135000") for s in [*result.serve_args, *result.launch_flags])
    assert any(s.key.startswith("--hf-overrides") and s.recipe.startswith("page:") for s in result.serve_args)
    assert "its command at :837" in result.page_advice.note or result.page_advice.settings


CHECKED = [
    ("0.30.0rc2", "Qwen3-235B-A22B.md", 754),  # high throughput, W8A8
    ("0.30.0rc2", "Qwen3-235B-A22B.md", 837),  # long context: the YaRN override with its length (vLLM 0.30.0)
    ("0.30.0rc2", "DeepSeek-V3.2.md", 191),  # two nodes; W8A8 of a model whose original config is fp8
    ("0.30.0rc2", "Kimi-K2.5.md", 150),  # a reconstructed config.json without max_position_embeddings
    ("0.30.0rc2", "DeepSeek-V4-Pro.md", 1336),  # PD over 4-node instances, hybrid connector, the int8 indexer cache
    ("0.30.0rc2", "GLM5.md", 364),  # --kv-cache-dtype int8 (a widened choice); a top-level key 0.30.0rc2 rejects
    ("0.30.0rc2", "DeepSeek-V4.1-Flash.md", 207),  # --engram-config: parsed; its model check is vllm-ascend's
    ("0.23.0", "DeepSeek-V3.2.md", 149),
    ("0.23.0", "Qwen3-235B-A22B.md", 871),  # prefill context parallelism: TP 8 x PCP 2 ranks, DCP 2, YaRN
    ("0.30.0rc2", "GLM5.2.md", 986),  # a PD pair of two shapes whose decoder leaves static kernels out
    ("0.30.0rc2", "gpt-oss-120b.md", 117),  # the page's own command bounds the fit's activation reserve
    ("0.30.0rc2", "Qwen3-30B-A3B.md", 530),  # a scenario command under a row naming A3
    ("0.30.0rc2", "Qwen3-Next.md", 138),  # Gated DeltaNet hybrid with MTP
    ("0.30.0rc2", "DeepSeek-V3.1.md", 235),  # --trust-remote-code: transformers' DeepseekV3Config for the checkpoint's
    ("0.30.0rc2", "Kimi-K3.md", 171),  # --trust-remote-code (vLLM 0.30.0's own kimi_k3 class); MLA + KDA with
    # prefix caching, which vLLM's CPU platform turns off for MLA and an NPU keeps (--mamba-block-size needs it)
]
"""Rows of the issue's models whose bundles ``bundle check`` runs through the paired vLLM, one per trap met."""


@pytest.mark.slow
@pytest.mark.tree
@pytest.mark.vllm
@pytest.mark.parametrize("release, page, line", CHECKED, ids=[f"{r}-{p}:{n}" for r, p, n in CHECKED])
def test_the_issues_rows_write_bundles_the_paired_vllm_accepts(tmp_path, release, page, line):
    from vllm_support import paired_python

    from optkit.bundle.check import check_bundle
    from optkit.bundle.writer import write_bundle
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    row = next(r for r in cc.release_rows(release) if r.page == f"models/{page}" and r.command["line"] == line)
    workspace = load_workspace()
    result = plan(Request(**row.request), workspace)
    write_bundle(result, workspace, tmp_path / "bundle")
    report = check_bundle(tmp_path / "bundle", vllm_python=paired_python(str(result.facts["versions.vllm"])))
    assert report.problems == [], report.problems
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["vllm"] == statuses["engine"] == "pass", statuses


def test_a_pd_roles_command_is_compared_with_that_roles_launch():
    """A PD role's command is planned as ``--pd 1:1`` of its own instance shape and compared with the role's launch
    (its --kv-transfer-config, the prefiller's eager mode), not set aside."""
    rows = [r for r in cc.release_rows("0.30.0rc2") if r.command.get("pd_role")]
    compared = [r for r in rows if r.outcome != "not comparable"]
    assert compared and all(r.request["pd"] == "1:1" and "nodes" not in r.request for r in compared)
    prefill = next(r for r in compared if r.page == "models/Qwen3.5-397B-A17B.md" and r.command["line"] == 451)
    assert prefill.command["pd_role"] == "prefill" and prefill.outcome == "explained"


def test_a_command_whose_layout_is_a_scripts_argument_is_not_compared():
    """Per-rank scripts write --tensor-parallel-size $7: the layout is what launch_online_dp.py passes, so the
    script is not planned with TP 1 (the launch_online_dp.py command is compared), unless its section says the
    server runs on one NPU (Qwen-VL-Dense.md 0.30.0rc2 :199, "on single-NPU": TP × DP is 1, both filled in)."""
    from optkit.versions.tutorial_data import load

    command = next(c for c in load("0.30.0rc2").pages["models/Qwen-VL-Dense.md"]["commands"] if c["line"] == 235)
    assert command["devices"] == 1
    filled = cc.on_one_device(command)["options"]
    assert filled["--tensor-parallel-size"]["value"] == filled["--data-parallel-size"]["value"] == "1"
    unstated = {k: v for k, v in command.items() if k != "devices"}
    assert cc.on_one_device(unstated) is unstated
    profile, _ = cc.profile_for("models/Qwen-VL-Dense.md", unstated, cc._models())
    with pytest.raises(cc.NotComparable, match=r"positional argument \(\$N\)"):
        cc.request_for("0.30.0rc2", "models/Qwen-VL-Dense.md", unstated, profile, "910c", "bf16")
    rows = [r for r in cc.release_rows("0.30.0rc2") if r.page == "models/Qwen-VL-Dense.md"]
    assert rows and all(r.outcome == "explained" for r in rows)
    row = next(r for r in rows if r.tab == "A3")  # 128 sequences, graphs captured up to 32 rows: the full step kept
    capture = next(d for d in row.differences if d.key == "--compilation-config.cudagraph_capture_sizes")
    assert cc.explained_by(capture, row.siblings, row.command).startswith(
        "the page's server captures graphs up to 32 rows; optkit keeps the full step, 128 rows")


def test_a_script_takes_the_outcome_of_the_runs_that_start_it():
    """DeepSeek-V3.2.md (0.23.0) writes one run_dp_template.sh per node ("Node 0(Prefill)" :462, "Node 1(Prefill)"
    :537) and starts them with two prefill launch lines (:745, :747), in that order: each script is compared through
    its own run and takes its outcome; a run that is unexplained would make its script unexplained."""
    rows = {r.command["line"]: r for r in cc.release_rows("0.23.0") if r.page == "models/DeepSeek-V3.2.md"}
    assert rows[745].command["template_line"] == 462 and rows[747].command["template_line"] == 537
    for script, run in ((462, 745), (537, 747)):
        assert rows[script].outcome == rows[run].outcome == "explained"
        assert rows[script].reason == f"through the launch_online_dp.py runs that start it (:{run})"
    run = rows[745]
    worse = cc.Row(run.release, run.page, run.command, "unexplained", tab=run.tab, unexplained=["x"])
    script = cc.Row(run.release, run.page, rows[462].command, "not comparable", cc.POSITIONAL + " ($N)", tab=run.tab)
    assert cc.through_runs(script, [worse]).outcome == "unexplained"
    assert cc.through_runs(script, []).outcome == "not comparable"  # no run starts it: not compared


def test_a_pd_role_with_its_own_page_command_follows_it_not_the_pd_tutorial():
    """Kimi-K2.5.md's prefiller (:779 in 0.30.0rc2) runs its MTP draft without "enforce_eager" and sets no OMP
    threads: the role's launch follows its own page's command, not the PD tutorial's prefiller rule or env
    (optkit.versions.pd_roles, optkit.versions.pd); its environment is the command's (HCCL_BUFFSIZE and timeouts)."""
    row = next(r for r in cc.release_rows("0.30.0rc2") if r.page == "models/Kimi-K2.5.md" and r.command["line"] == 779)
    assert row.command["pd_role"] == "prefill" and row.outcome != "not comparable"
    keys = {d.key for d in row.differences}
    assert not keys & {"--speculative-config.enforce_eager", "env.OMP_NUM_THREADS", "env.OMP_PROC_BIND",
                       "env.HCCL_BUFFSIZE", "env.VLLM_RPC_TIMEOUT"}, keys


def test_a_value_from_the_pages_other_command_of_the_layout_is_named_as_such():
    """Qwen3-30B-A3B.md (0.30.0rc2) runs TP 1 on A3 twice: the deployment example (:237, --max-model-len 40960) and
    the scenario table's command (:530, 37364 at :534). optkit carries the scenario's; the example's row differs from
    the page's own other command, which explains it (and only a line of such a command does)."""
    row = next(r for r in cc.release_rows("0.30.0rc2")
               if r.page == "models/Qwen3-30B-A3B.md" and r.command["line"] == 237 and r.tab == "A3")
    d = next(d for d in row.differences if d.key == "--max-model-len")
    assert (d.tutorial_value, d.optkit_value, d.source) == ("40960", "37364", "page:Qwen3-30B-A3B.md:534")
    assert 534 in row.siblings and 237 not in row.siblings
    assert "the page's own command of this layout at :534" in cc.explained_by(d, row.siblings)
    assert cc.explained_by(d) == ""  # without the sibling lines nothing explains it


def test_a_page_key_its_release_does_not_read_is_left_out_and_said():
    """GLM5.md's 0.30.0rc2 commands write fuse_muls_add at the top of --additional-config; vllm-ascend reads it only
    under ascend_compilation_config, and 0.30.0rc2 rejects unknown keys: carried, the page's own command would stop
    the server. The plan leaves it out, says why under the page advice, and the row explains it the same way."""
    from optkit.cli.render import _page_advice
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request
    from optkit.versions.knobs import unread_at
    from optkit.versions.onrelease import release_view

    row = next(r for r in cc.release_rows("0.30.0rc2") if r.page == "models/GLM5.md" and r.command["line"] == 364)
    result = plan(Request(**row.request), load_workspace())
    assert "fuse_muls_add" not in result.additional_config
    (why,) = [w for w in result.page_unread if "fuse_muls_add" in w]
    assert why.startswith("--additional-config fuse_muls_add (page:GLM5.md:") and "rejects unknown keys" in why
    assert any(line == f"  left out: {why}" for line in _page_advice(result))
    (d,) = [d for d in row.differences if d.key == "--additional-config.fuse_muls_add"]
    assert "does not read it there (unknown keys rejected)" in cc.explained_by(d, row.siblings, row.command)
    top = release_view("0.30.0rc2").data.knobs.additional_config
    assert unread_at(top, "ascend_compilation_config.fuse_muls_add") is None
    assert unread_at(top, "ascend_compilation_config.enable_npu_graph_ex")[0] == 1  # a page's typo, one level down


def test_a_decoders_step_the_page_caps_below_its_sequences_is_explained_with_its_numbers():
    row = next(r for r in cc.release_rows("0.30.0rc2") if r.page == "models/Qwen3.5-397B-A17B.md"
               and r.command["line"] == 695)
    (d,) = [d for d in row.differences if d.key == "--max-num-batched-tokens"]
    assert (d.tutorial_value, d.optkit_value) == ("240", "256")
    why = cc.explained_by(d, row.siblings, row.command)
    assert "caps its decoder's step at 240 tokens, below its 256" in why and "at most 60 of its sequences" in why
    assert cc.explained_by(d, row.siblings, {**row.command, "pd_role": "prefill"}) == ""  # a decoder's only


def test_a_single_node_command_whose_ranks_outgrow_the_tabs_node_follows_the_pages_command_of_the_nodes_it_needs():
    """GLM4.x.md (0.30.0rc2) writes TP 8 DP 2 for 'one Atlas 800 A3 or one A2' (:141): 16 ranks, and an A2 node has
    8 devices. On A2 optkit's plan spans two nodes and carries the page's two-node command (:201, 140000 tokens); the
    row names that command, and only where the ranks outgrow the node (on A3 the command is the plan's own)."""
    rows = {r.tab: r for r in cc.release_rows("0.30.0rc2") if r.page == "models/GLM4.x.md" and r.command["line"] == 141}
    assert rows["A3"].spanned == (1, frozenset())
    nodes, lines = rows["A2"].spanned
    assert nodes == 2 and 201 in lines and 141 not in lines
    (d,) = [d for d in rows["A2"].differences if d.key == "--max-model-len"]
    assert (d.tutorial_value, d.optkit_value, d.source) == ("133000", "140000", "page:GLM4.x.md:201")
    assert "spans 2 nodes and carries the page's own command of that layout at :201" in cc.explained_by(
        d, rows["A2"].siblings, rows["A2"].command, rows["A2"].spanned)
    assert cc.explained_by(d, rows["A2"].siblings, rows["A2"].command) == ""


def test_a_decoders_capture_list_below_the_full_step_it_keeps_is_explained_with_its_numbers():
    """GLM5.2.md's A2 decoder (0.30.0rc2 :986) caps its step at 256 tokens and captures up to 384 rows; optkit keeps
    the full step (256 sequences × 4 rows) and its capture ladder reaches it: the difference is named with its
    numbers, and only for a decoder."""
    row = next(r for r in cc.release_rows("0.30.0rc2") if r.page == "models/GLM5.2.md" and r.command["line"] == 986)
    assert row.request["prefill_tp"] == 8 and row.request["prefill_dp"] == 4  # read in the MultiConnector's entry
    (d,) = [d for d in row.differences if d.key == "--compilation-config.cudagraph_capture_sizes"]
    assert max(d.tutorial_value) == 384 and max(d.optkit_value) == 1024
    why = cc.explained_by(d, row.siblings, row.command)
    assert "caps its step at 256 tokens and captures graphs up to 384 rows" in why and "full step, 1024 rows" in why
    assert cc.explained_by(d, row.siblings, {**row.command, "pd_role": "prefill"}) == ""


def test_a_pd_prefiller_of_its_own_pipeline_and_its_decoders_are_compared():
    """GLM5.md's PD prefillers run PP 2 × TP 16 over two A3 nodes (0.30.0rc2 :1066, :1128); its decoders' connector
    names that partner (prefill.pp_size 2, the launch_online_dp.py commands at :1314 and :1321). Before, none was
    compared (no request had their ranks); the pair is --pd with --prefill-pp 2 now, and each is explained."""
    rows = {r.command["line"]: r for r in cc.release_rows("0.30.0rc2") if r.page == "models/GLM5.md"
            and r.command["line"] in (1066, 1128, 1314, 1321)}
    assert sorted(rows) == [1066, 1128, 1314, 1321] and all(r.outcome == "explained" for r in rows.values())
    assert {line: (r.request["prefill_tp"], r.request["prefill_dp"], r.request["prefill_pp"], r.request["tp"],
                   r.request["dp"]) for line, r in rows.items()} == dict.fromkeys(rows, (16, 1, 2, 4, 8))
    keys = {d.key for d in rows[1066].differences}
    assert not keys & {"--pipeline-parallel-size", "--nnodes", "--node-rank", "--master-addr",
                       "--kv-transfer-config.kv_connector_extra_config.prefill.pp_size",
                       "--kv-transfer-config.kv_connector_extra_config.prefill.pp_layer_partition",
                       "env.VLLM_PP_LAYER_PARTITION"}  # the plan writes each as the page does


def test_a_pd_pair_of_two_shapes_sizes_dcp_per_role():
    """GLM5.2.md's A3 PD (0.30.0rc2): TP 16 prefillers with DCP 16 (:1496), TP 8 decoders with DCP 8 (:1510). Each
    role command's own DCP is its role's, its partner's the page's command of that role and shape; before, a request
    had one --dcp for both roles and neither was compared. Both roles are explained (the pair serves the W8A8C8
    weights its section states, :1129)."""
    rows = {r.command["line"]: r for r in cc.release_rows("0.30.0rc2") if r.page == "models/GLM5.2.md"
            and r.command["line"] in (1496, 1510)}
    assert [(rows[line].request["dcp"], rows[line].request["prefill_dcp"]) for line in (1496, 1510)] == [(8, 16)] * 2
    assert [rows[line].request["quantization"] for line in (1496, 1510)] == ["w8a8c8"] * 2
    assert rows[1496].outcome == rows[1510].outcome == "explained"


def test_a_kv_pool_is_compared_through_its_p2p_connector():
    """MiniMax-M3.md (0.30.0rc2) §5.4's KV-pool scripts run a MultiConnector of MooncakeConnectorV1 and an
    AscendStoreConnector, started by §5.3's runs (:1069 "Reuse Section 5.3 launch_online_dp.py"). The P2P entry is
    compared key by key with optkit's connector (its shapes, port, engine and buffer device agree); the pool entry is
    the one connector difference, explained by the catalog's KV-pool class."""
    rows = [r for r in cc.release_rows("0.30.0rc2") if r.page == "models/MiniMax-M3.md"]
    script = next(r for r in rows if r.command["line"] == 1104)
    assert script.outcome == "explained" and script.reason.endswith("(:699)")
    run = next(r for r in rows if r.command["line"] == 699 and r.command.get("template_line") == 1104)
    plain = next(r for r in rows if r.command["line"] == 699 and r.command.get("template_line") == 591)

    def connector(row) -> dict:
        return {d.key: d for d in row.differences if d.key.startswith("--kv-transfer-config.")}

    pool = set(connector(run)) - set(connector(plain))  # what the pool adds to §5.3's own pair
    assert pool == {"--kv-transfer-config.kv_connector_extra_config.connectors"}
    key = pool.pop()
    assert [e["kv_connector"] for e in connector(run)[key].tutorial_value] == ["AscendStoreConnector"]
    options = {k: (v["value"], v["line"]) for k, v in run.command["options"].items()}
    unwrapped = cc._p2p_unwrapped(options)
    assert unwrapped["--kv-transfer-config.kv_connector"][0] == "MooncakeConnectorV1"
    assert unwrapped["--kv-transfer-config.kv_connector_extra_config.prefill.pp_size"][0] == 2
    assert cc._p2p_unwrapped({"--x": ("1", 3)}) == {"--x": ("1", 3)}  # no MultiConnector: as written


def test_a_command_for_every_profile_of_its_page_is_compared_for_each():
    """Gemma4.md (0.30.0rc2) serves ``/root/.cache/path/to/gemma4`` for its dense and its MoE model alike, on the A2,
    A3 and 950 it states alike (:7): each command is compared for each profile on each family, as plans read it
    (``page_commands.serves``); before, both commands were not comparable."""
    rows = [r for r in cc.release_rows("0.30.0rc2") if r.page == "models/Gemma4.md"]
    assert sorted((r.command["line"], r.tab, r.profile) for r in rows) == sorted(
        (line, tab, profile) for line in (80, 96) for tab in ("A2", "A3", "A5")
        for profile in ("gemma-4-26b-a4b-it", "gemma-4-31b-it"))
    assert all(r.outcome == "explained" and r.request["model"] == r.profile for r in rows)
    named = next(c for c in cc.llm_commands("0.30.0rc2") if c[0] == "models/Qwen3-Dense.md")
    assert cc.profiles_of(named[0], named[2], cc._models()) == (None,)  # a command naming its model: one row


def test_a_template_its_wrappers_complete_is_compared_through_their_runs():
    """GLM5.3-Flash.md (0.30.0rc2) :591 passes ``${SERVER_ROLE_ARGS:-}``, which its P0 and P1 wrappers set: alone it
    is not read; through the runs that start it by their wrappers (:658 with --api-server-count 1, :669 with
    --headless) it is compared."""
    rows = {r.command["line"]: r for r in cc.release_rows("0.30.0rc2") if r.page == "models/GLM5.3-Flash.md"
            and r.command["line"] in (591, 658, 669)}
    assert rows[591].outcome == "explained" and rows[591].reason.endswith("(:658, :669)")
    assert rows[658].command["options"]["--api-server-count"]["value"] == "1"
    assert rows[669].command["options"]["--headless"]["value"] is True
