"""One role of a PD plan leaves out a recipe its own page command turns off (``role_plans.left_out_in_role``):
the role's page facts gate the selection's settings for that role alone, the page's value is carried there, the
other role keeps the recipe, and the report, the lock and the launch say the same."""

from __future__ import annotations

import json

from optkit.bundle.pd import role_launches
from optkit.cli.render import _page_advice
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WORKSPACE = load_workspace()
GLM52_A2 = {"model": "glm-5.2", "target": "910b", "vllm_ascend_version": "0.30.0rc2", "tp": 4, "dp": 8,
            "prefix_caching": True, "flashcomm1": False, "quantization": "w8a8c8", "spec_method": "mtp",
            "num_speculative_tokens": 3, "concurrency": [2048], "pd": "1:1", "prefill_tp": 8, "prefill_dp": 4}
"""GLM5.2.md's A2 PD deployment (0.30.0rc2): TP 8 × DP 4 prefillers, TP 4 × DP 8 decoders; both role commands
keep static kernels off (:869, :968), where its single-node and two-node commands do not say."""
QWEN235_PD = {"model": "qwen3-235b-a22b", "target": "910c", "vllm_ascend_version": "0.23.0", "tp": 4, "dp": 8,
              "prefix_caching": False, "flashcomm1": True, "quantization": "w8a8", "concurrency": [1024],
              "pd": "1:1", "prefill_tp": 8, "prefill_dp": 2}
"""Qwen3-235B-A22B.md's PD deployment in 0.23.0: prefill fused MC2 level 1 (:379), decode level 2 (:444, :509)."""


def test_role_commands_that_keep_static_kernels_off_leave_the_recipe_out_of_both_roles():
    result = plan(Request(**GLM52_A2), WORKSPACE)
    decode, prefill = result.roles["decode"], result.roles["prefill"]
    assert "waterfall-static-kernel" in result.selected and result.facts["page.static_kernel"] != "off"
    for role, line in ((decode, 968), (prefill, 869)):
        assert "page.static_kernel = 'off'" in role.role_left_out["waterfall-static-kernel"]
        assert role.additional_config["ascend_compilation_config"]["enable_static_kernel"] is False
        assert role.config_sources["additional_config.ascend_compilation_config.enable_static_kernel"] \
            == f"page:GLM5.2.md:{line}"
    for rid in decode.role_left_out:  # what a role leaves out is a settings recipe: one tree serves both roles
        recipe = WORKSPACE.catalog[rid]
        assert not recipe.patches and not recipe.kernels
    report = "\n".join(str(line) for line in _page_advice(result))
    assert "  not in the decode role: waterfall-static-kernel: " in report
    argv = role_launches(result, WORKSPACE)["decode"].argv
    additional = json.loads(argv[argv.index("--additional-config") + 1])
    assert additional["ascend_compilation_config"] == {"enable_npugraph_ex": True, "enable_static_kernel": False}


def test_the_lock_records_what_a_role_leaves_out(tmp_path):
    from click.testing import CliRunner

    from optkit.cli.main import cli

    out = tmp_path / "bundle"
    args = ["plan", "glm-5.2", "--target", "910b", "--vllm-ascend-version", "0.30.0rc2", "--tp", "4", "--dp", "8",
            "--quantization", "w8a8c8", "--mtp", "-k", "3", "--concurrency", "2048", "--pd", "1:1",
            "--prefill-tp", "8", "--prefill-dp", "4", "-o", str(out)]
    run = CliRunner().invoke(cli, args)
    assert run.exit_code == 0, run.output
    roles = json.loads((out / "optkit.lock.json").read_text(encoding="utf-8"))["launch"]["roles"]
    assert set(roles["decode"]["recipes_left_out"]) >= {"waterfall-static-kernel"}


def test_a_decoder_carries_its_pages_fused_mc2_level_and_each_knob_is_set_once():
    result = plan(Request(**QWEN235_PD), WORKSPACE)
    decode, prefill = result.roles["decode"], result.roles["prefill"]
    assert decode.facts["page.fused_mc2_level"] == 2 and prefill.facts["page.fused_mc2_level"] == 1
    assert "moe-fused-mc2-enable" in decode.role_left_out and "moe-fused-mc2-enable" not in prefill.role_left_out
    assert decode.additional_config["enable_fused_mc2"] == 2
    # the decoders' first node runs its own script (:444; the second node's, :509, sets the same level): the page
    # writes one run_dp_template.sh per node and its launch lines start them in order
    assert decode.config_sources["additional_config.enable_fused_mc2"] == "page:Qwen3-235B-A22B.md:444"
    assert not any(s.key == "VLLM_ASCEND_ENABLE_FUSED_MC2" for s in decode.env)
    # the prefiller: the recipe's env var, and not the page's additional_config key for the same switch besides
    assert [(s.key, s.value) for s in prefill.env if "FUSED_MC2" in s.key] == [("VLLM_ASCEND_ENABLE_FUSED_MC2", "1")]
    assert "enable_fused_mc2" not in prefill.additional_config


def test_a_forced_recipe_stays_in_every_role():
    result = plan(Request(**{**GLM52_A2, "with": ["waterfall-static-kernel"]}), WORKSPACE)
    assert "waterfall-static-kernel" not in result.roles["decode"].role_left_out
