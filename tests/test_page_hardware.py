"""A page command no tab names is placed by what the page states about its hardware (optkit.resolve.page_hardware,
optkit.versions.tutorial_hardware), and only where that statement decides; the extraction fixes of the same change."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from optkit.resolve.page_hardware import NODE_DEVICES, SERVING_DTYPES, placement, placements, ranks_per_node
from optkit.resolve.page_tables import command_tabs
from optkit.versions.tutorial_commands import options
from optkit.versions.tutorial_data import load
from optkit.versions.tutorial_pages import read_page

ROOT = Path(__file__).resolve().parents[1]
SERVE = "```bash\nvllm serve org/Model \\\n  --tensor-parallel-size {tp}{more}\n```\n"


def page(text: str) -> dict:
    return read_page("models/Example.md", text)


def serve(tp: int, more: str = "") -> str:
    return SERVE.format(tp=tp, more=more)


def test_a_hardware_section_places_an_untabbed_command():
    data = page("# Example\n\n## Hardware\n\nThe verified configuration uses one Atlas A3 node with 16 NPUs.\n\n"
                "## Deployment\n\n" + serve(16))
    [command] = data["commands"]
    assert command["hardware"] is None and not command["hardware_families"]
    assert data["hardware"][0]["families"] == ["A3"] and data["hardware"][0]["line"] == 5
    placed = placement(data, command)
    assert (placed.family, placed.line) == ("A3", 5)
    assert command_tabs(data, command) == ("A3",)


def test_a_negated_sentence_states_nothing():
    data = page("# Example\n\nOnly Atlas A3 is supported now. Other Ascend hardware (e.g., Atlas A2 Products) is not "
                "supported.\n\n## Deployment\n\n" + serve(16))
    assert [s["families"] for s in data["hardware"]] == [["A3"]]
    assert command_tabs(data, data["commands"][0]) == ("A3",)


def test_the_devices_a_node_holds_rule_out_a_family():
    text = ("# Example\n\nThe model can be deployed on 1 Atlas 800 A3 (64GB × 16) or 1 Atlas 800 A2 (64GB × 8).\n\n"
            "## Deployment\n\n")
    sixteen = page(text + serve(16))
    placed = placement(sixteen, sixteen["commands"][0])
    assert placed.family == "A3" and "16 devices per node exceed a A2 node" in placed.why
    assert placement(page(text + serve(8)), page(text + serve(8))["commands"][0]) is None  # both hold 8: no guess


def test_a_command_the_page_states_several_families_alike_for_holds_for_each():
    """No family is picked: a TP 8 command under "1 Atlas 800 A3 or 1 Atlas 800 A2" holds for both, each named with
    the line it rests on, as a command under an 'Atlas 800 A3 / Atlas 800 A2' tab does."""
    text = ("# Example\n\nThe model can be deployed on 1 Atlas 800 A3 (64GB × 16) or 1 Atlas 800 A2 (64GB × 8).\n\n"
            "## Deployment\n\n")
    data = page(text + serve(8))
    found = placements(data, data["commands"][0])
    assert [(p.family, p.line) for p in found] == [("A2", 3), ("A3", 3)]
    assert "the page states A2 and A3 alike" in found[0].why
    assert command_tabs(data, data["commands"][0]) == ("A2", "A3")


def test_the_weights_row_of_the_served_checkpoint_names_its_families_and_300i_needs_float16():
    """Qwen3.5-27B-Qwen3.6-27B.md 0.30.0rc2 :823, an accuracy command outside every tab, serves the checkpoint its
    weights table offers on "1 Atlas 800 A3 … or 1 Atlas 800 A2 … or Atlas 300I DUO" (:24): it leaves --dtype to the
    checkpoint's bfloat16, which an Atlas 300I DUO does not serve, so it holds for A2 and A3; with --dtype float16
    for all three."""
    text = ("# Example\n\n## Weights\n\n| Weight Version | Hardware Requirements | Download Links |\n| --- | --- | --- |\n"
            "| `M-w8a8` | 1 Atlas 800 A3 (64GB × 16) node or 1 Atlas 800 A2 (64GB × 8) node or Atlas 300I DUO | "
            "[ModelScope](https://www.modelscope.cn/models/org/M-w8a8) |\n\n## Accuracy\n\n")
    more = " \\\n  --quantization ascend"
    data = page(text + SERVE.format(tp=2, more=more).replace("org/Model", "org/M-w8a8"))
    assert [p.family for p in placements(data, data["commands"][0])] == ["A2", "A3"]
    assert "weights table offers M-w8a8" in placements(data, data["commands"][0])[0].why
    half = page(text + SERVE.format(tp=2, more=more + " \\\n  --dtype float16").replace("org/Model", "org/M-w8a8"))
    assert command_tabs(half, half["commands"][0]) == ("310P", "A2", "A3")


def test_the_serving_dtypes_are_the_targets():
    by_family = {}
    for path in sorted((ROOT / "targets").glob("*.yaml")):
        target = yaml.safe_load(path.read_text(encoding="utf-8"))
        if target.get("serving_dtypes"):
            by_family.setdefault(target["device_generation"], set()).update(target["serving_dtypes"])
    assert {f: set(d) - {"half"} for f, d in SERVING_DTYPES.items()} == by_family


def test_alternatives_give_the_family_of_the_commands_node_count():
    text = ("# Example\n\nThe model can be deployed on 1 Atlas 800 A3 (64GB × 16) or 2 Atlas 800 A2 (64GB × 8).\n\n"
            "## Multi-node Deployment\n\n")
    two_nodes = page(text + serve(4, " \\\n  --data-parallel-size 4 \\\n  --data-parallel-size-local 2 \\\n"
                                   "  --data-parallel-address 10.0.0.1"))
    command = two_nodes["commands"][0]
    assert command["nodes"] == 2 and ranks_per_node(command) == 8
    placed = placement(two_nodes, command)
    assert placed.family == "A2" and "2 A2 nodes" in placed.why


def test_a_group_over_nnodes_nodes_runs_its_share_on_each():
    """GLM5.3.md (0.30.0rc2 :552): a TP 16 × PP 2 prefiller with --nnodes 2 runs 16 devices a node, which only an A3
    node holds; before, its 32 ranks were counted on one node and no family fitted."""
    text = ("# Example\n\nRequires 2 Atlas 800 A3 (64GB × 16) nodes or 4 Atlas 800 A2 (64GB × 8) nodes.\n\n"
            "## Deployment\n\n")
    data = page(text + serve(16, " \\\n  --pipeline-parallel-size 2 \\\n  --nnodes 2 \\\n  --node-rank 0"))
    command = data["commands"][0]
    assert ranks_per_node(command) == 16
    assert placement(data, command).family == "A3"


def test_the_enclosing_section_decides_before_the_page():
    data = page("# Example\n\nRecommended for Atlas 800 A3 (64GB × 16) and Atlas 800 A2 (64GB × 8).\n\n"
                "## PD Deployment\n\n- 1 Prefill node: 1 Atlas 800 A3 (64G x 16), DP2 + TP8.\n\n### Prefill Node\n\n"
                + serve(8))
    placed = placement(data, data["commands"][0])
    assert (placed.family, placed.line) == ("A3", 7)


def test_a_page_that_states_nothing_places_nothing():
    data = page("# Example\n\n## Deployment\n\n" + serve(4))
    assert data["hardware"] == [] and command_tabs(data, data["commands"][0]) == ()


def test_the_a3_switch_of_a_command_environment_names_its_family():
    data = page("# Example\n\n## PD\n\n```bash\nexport ASCEND_A3_ENABLE=1\nvllm serve org/Model \\\n"
                "  --tensor-parallel-size 8\n```\n")
    assert data["commands"][0]["hardware"] == "A3"


def test_the_heading_separator_is_the_extractions():
    from optkit.resolve import page_hardware
    from optkit.versions import tutorial_commands

    assert page_hardware.SEPARATOR == tutorial_commands.SEPARATOR


def test_node_devices_are_the_targets():
    by_family = {}
    for path in sorted((ROOT / "targets").glob("*.yaml")):
        target = yaml.safe_load(path.read_text(encoding="utf-8"))
        by_family[target["device_generation"]] = target["devices_per_node"]
    assert NODE_DEVICES == by_family


def test_a_dotted_flag_keeps_its_keys_as_vllm_reads_them():
    words = ["--speculative_config.num_speculative_tokens", "1", "--max_num_seqs", "8"]
    assert [flag for flag, _, _ in options(words)] == ["--speculative-config.num_speculative_tokens", "--max-num-seqs"]


def test_dp_flags_give_the_node_rank_before_the_words():
    text = ("# Example\n\n## Multi-Node Deployment\n\n**Node 1 script:**\n\n```bash\nvllm serve org/Model \\\n"
            "  --tensor-parallel-size 16 \\\n  --data-parallel-size 2 \\\n  --data-parallel-size-local 1 \\\n"
            "  --data-parallel-address 10.0.0.1\n```\n\n**Node 2 script:**\n\n```bash\nvllm serve org/Model \\\n"
            "  --headless \\\n  --data-parallel-start-rank 1 \\\n  --tensor-parallel-size 16 \\\n"
            "  --data-parallel-size 2 \\\n  --data-parallel-size-local 1 \\\n  --data-parallel-address 10.0.0.1\n```\n")
    assert [c["node_rank"] for c in page(text)["commands"]] == [0, 1]


@pytest.mark.parametrize("release, name, line, family", [
    ("0.30.0rc2", "models/Hy3-preview.md", 91, "A3"),
    ("0.30.0rc2", "models/DeepSeek-R1.md", 252, "A2"),
    ("0.30.0rc2", "models/Qwen3-VL-235B-A22B-Instruct.md", 451, "A3"),
    ("0.30.0rc2", "models/GLM5.3.md", 871, "A3"),
    ("0.23.0", "models/Minitron-8B-Base.md", 52, "A2"),
    ("0.30.0rc2", "models/Qwen3.5-27B-Qwen3.6-27B.md", 823, "A2 A3"),
    ("0.23.0", "models/Qwen3.5-27B-Qwen3.6-27B.md", 852, "A2 A3"),
    ("0.30.0rc2", "models/Gemma4.md", 80, "A2 A3 A5"),
])
def test_the_committed_pages_place_their_untabbed_commands(release, name, line, family):
    data = load(release).pages[name]
    command = next(c for c in data["commands"] if c["line"] == line)
    assert command_tabs(data, command) == tuple(family.split())


def test_hunyuan_states_no_hardware_and_stays_untabbed():
    data = load("0.30.0rc2").pages["models/Hunyuan-A13B-Instruct.md"]
    assert all(command_tabs(data, c) == () for c in data["commands"])


GLM52_PD = {"model": "glm-5.2", "target": "910c", "vllm_ascend_version": "0.23.0", "pd": "1:1", "quantization": "w4a8c8",
            "spec_method": "mtp", "num_speculative_tokens": 1, "concurrency": [256], "goal": "throughput",
            "prefix_caching": False, "async_scheduling": True, "enforce_eager": True, "flashcomm1": True}
"""GLM5.2.md's 0.23.0 A3 W4A8C8 PD pair (:729 prefill TP8 DP4, :743 decode TP1 DP32) as the catalog harness asks it."""


def test_a_role_command_of_another_deployment_is_not_the_roles():
    """GLM5.2.md (0.23.0) places its 1M-context PD decoder (TP8 DP4 DCP 8, :1501; W4A8C8 as its section states,
    :1263) on A3 by its section's statement; a plan of that shape without DCP does not take it for its decode role
    (it would serve a 1M context that does not fit), and an asymmetric plan whose prefill shape is TP8 DP4 is
    planned."""
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    workspace = load_workspace()
    symmetric = plan(Request(**GLM52_PD, tp=8, dp=4), workspace)
    assert all(role.page_advice.layout_line != 1501 for role in symmetric.roles.values())
    asymmetric = plan(Request(**GLM52_PD, tp=1, dp=32, prefill_tp=8, prefill_dp=4), workspace)
    assert {role: p.page_advice.layout_line for role, p in asymmetric.roles.items()} == {"prefill": 729, "decode": 743}


def test_a_pd_plan_whose_roles_run_their_own_plans_fits_by_them():
    """GLM5.2.md (0.23.0) A2 1M-context PD pair (:1179 prefill TP8 DP4, :1188 decode TP4 DP8, 256000 tokens): the
    plan's own settings (no page command of the decode shape outside PD: vLLM's 1M default context) run in neither
    role, so its fit is the decode role's, and the plan is not refused for a launch nobody runs."""
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    result = plan(Request(model="glm-5.2", target="910b", vllm_ascend_version="0.23.0", tp=4, dp=8, pd="1:1",
                          prefill_tp=8, prefill_dp=4, quantization="w4a8c8", spec_method="mtp",
                          num_speculative_tokens=5, concurrency=[1024], prefix_caching=True, async_scheduling=True,
                          enforce_eager=False, flashcomm1=False), load_workspace())
    assert result.fit is result.roles["decode"].fit and result.fit.fits
    assert result.fit.inputs.max_model_len == 256000


def test_a_tab_that_cannot_hold_its_command_yields_to_the_statement_above_it():
    """GLM5.md (0.23.0) writes its W8A8 TP 16 × DP 2 scripts, one DP rank a node, inside its A2 tab, under
    "`glm-5-w8a8`: require 2 Atlas 800 A3 (64GB × 16)" (:677): 16 devices a node, which an A2 node does not hold.
    Before, the harness compared them on A2 and optkit refused the layout."""
    from optkit.resolve.page_hardware import tab_overruled

    data = load("0.23.0").pages["models/GLM5.md"]
    command = next(c for c in data["commands"] if c["line"] == 706)
    assert command["hardware"] == "A2" and ranks_per_node(command) == 16
    overruled = tab_overruled(data, command)
    assert (overruled.family, overruled.line) == ("A3", 677)
    assert command_tabs(data, command) == ("A3",)
    fitting = next(c for c in data["commands"] if c.get("hardware") == "A2" and ranks_per_node(c) == 8)
    assert tab_overruled(data, fitting) is None and command_tabs(data, fitting) == ("A2",)
