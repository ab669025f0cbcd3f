"""A checkpoint that stores its own weights in fp8 (and fp4 experts) is weighed so where it is served as published
(the A5 tabs), and DeepSeek-V4's low-rank attention is counted from its ranks."""

from __future__ import annotations

from pathlib import Path

import pytest

from optkit.resolve.profile_catalog import load_models
from optkit.resolve.weights import count_parameters, weight_bytes_per_device, weight_format

ROOT = Path(__file__).resolve().parents[1]
MODELS = load_models(ROOT / "models")


def test_the_native_format_is_read_off_the_config():
    assert MODELS["deepseek-v4-pro"].native_weights == "fp8-fp4"  # quant_method fp8, expert_dtype fp4
    assert MODELS["deepseek-r1"].native_weights == "fp8"
    assert MODELS["qwen3.5-35b-a3b"].native_weights is None


@pytest.mark.parametrize("generation, expected", [("A5", "fp8-fp4"), ("A3", "bf16"), ("A2", "bf16")])
def test_weights_served_as_published_are_native_only_on_a5(generation, expected):
    assert weight_format(MODELS["deepseek-v4-flash"], "bf16", generation) == expected
    assert weight_format(MODELS["deepseek-v4-flash"], "w8a8", generation) == "w8a8"  # a quantized checkpoint is its own


def test_fp8_fp4_weighs_less_than_bf16_and_more_than_w4a8():
    m = MODELS["deepseek-v4-pro"]
    native, _ = weight_bytes_per_device(m, "fp8-fp4", 1, 32)
    bf16, _ = weight_bytes_per_device(m, "bf16", 1, 32)
    w4a8, _ = weight_bytes_per_device(m, "w4a8", 1, 32)
    assert w4a8 < native < bf16 / 1.9


@pytest.mark.parametrize("model", ["deepseek-v4-pro", "deepseek-v4-flash"])
def test_v4_count_meets_the_published_total(model):
    """DeepSeek-V4-Pro is published as 1.6 T parameters and V4-Flash as 284 B (params_b): the low-rank attention
    (q_lora_rank, o_lora_rank × o_groups, the indexer) counts within 3 % of that; read as full heads × head_dim
    projections it came to 1637.7 B for Pro, its attention three times its size."""
    m = MODELS[model]
    count = count_parameters(m)
    assert abs(count.total / 1e9 - m.params_b) / m.params_b < 0.03


def test_a_950_row_of_v4_pro_now_fits():
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    result = plan(Request(model="deepseek-v4-pro", target="950", vllm_ascend_version="0.23.0", tp=1, dp=32,
                          pd="1:1", spec_method="mtp", num_speculative_tokens=1, concurrency=[256],
                          prefix_caching=False, enforce_eager=True), load_workspace())
    assert result.fit.fits and result.fit.inputs.quantization == "fp8-fp4"
    assert "fp8-fp4" in result.fit.line()


def test_the_profiles_native_formats_are_the_ones_weighed():
    from typing import get_args

    from optkit.resolve.profiles import ModelProfile
    from optkit.resolve.weights import EXPERT_BYTES, LINEAR_BYTES, NATIVE_FORMATS

    annotation = ModelProfile.model_fields["native_weights"].annotation
    literal = next(a for a in get_args(annotation) if a is not type(None))
    assert get_args(literal) == NATIVE_FORMATS
    assert all(f in LINEAR_BYTES and f in EXPERT_BYTES for f in NATIVE_FORMATS)
