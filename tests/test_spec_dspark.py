"""DSpark speculative decoding (recipes/spec-dspark): the draft stages a DeepSeek-V4 checkpoint ships, planned where
the served weights carry them, on the releases that route the method."""

from __future__ import annotations

import pytest

from optkit.errors import OptkitError
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WORKSPACE = load_workspace()
PRO = dict(model="deepseek-v4-pro", target="910c", vllm_ascend_version="0.30.0rc2", tp=16, dp=2, nodes=2,
           spec_method="dspark", concurrency=[64])


def test_dspark_serves_the_checkpoint_that_ships_its_draft_stages():
    result = plan(Request(**PRO, quantization="w4a8"), WORKSPACE)
    assert result.weights.checkpoint.id == "Eco-Tech/DeepSeek-V4-Pro-0813-w4a8"  # not the -w4a8-mtp listed first
    assert result.weights.warning == ""
    assert result.facts["spec.dspark_weights"] == "present"
    assert "spec-dspark" in result.selected and "mtp-enable-k4" not in result.selected
    assert result.speculative_config == {"method": "dspark", "num_speculative_tokens": 5, "enforce_eager": True}
    assert result.page_advice.layout_line == 454  # the page's DSpark command of the layout, not its MTP one (:350)


def test_weights_without_draft_stages_are_refused_with_the_checkpoint_to_name():
    with pytest.raises(OptkitError) as refused:
        plan(Request(**PRO), WORKSPACE)  # bf16: the profile's own config declares no dspark_block_size
    assert "carry no DSpark draft stages" in str(refused.value)
    assert "Eco-Tech/DeepSeek-V4-Pro-0813-w4a8" in str(refused.value)


def test_the_profiles_own_config_declares_them_for_v4_flash():
    result = plan(Request(model="deepseek-v4-flash", target="910b", vllm_ascend_version="0.30.0rc2", tp=1, dp=8,
                          quantization="w8a8", spec_method="dspark", num_speculative_tokens=7, concurrency=[64]),
                  WORKSPACE)
    assert result.weights.checkpoint.id == "Eco-Tech/DeepSeek-V4-Flash-0731-w8a8"
    assert result.speculative_config["num_speculative_tokens"] == 7


@pytest.mark.parametrize("fields, reason", [
    (dict(PRO, quantization="w4a8", vllm_ascend_version="0.23.0"), "applies to vllm-ascend >=0.24.0rc1"),
    (dict(model="qwen3.5-35b", target="910c", vllm_ascend_version="0.30.0rc2", spec_method="dspark"),
     "inside a DeepSeek-V4 or V4.1 checkpoint"),
    (dict(PRO, quantization="w4a8", target="950", tp=8, dp=4, nodes=4), "upstream's pages run DSpark on A2 and A3"),
])
def test_dspark_is_refused_where_upstream_does_not_run_it(fields, reason):
    with pytest.raises(OptkitError) as refused:
        plan(Request(**fields), WORKSPACE)
    assert reason in str(refused.value)


def test_the_fact_reads_the_checkpoint_the_plan_serves():
    """MODEL naming the checkpoint without the stages: the plan serves it, and the fact is of it (refused)."""
    from optkit.resolve.plan import request_facts

    named = dict(PRO, model="Eco-Tech/DeepSeek-V4-Pro-w4a8-mtp")
    assert request_facts(Request(**named), WORKSPACE)["spec.dspark_weights"] == "absent"
    with pytest.raises(OptkitError, match="carry no DSpark draft stages"):
        plan(Request(**named), WORKSPACE)
