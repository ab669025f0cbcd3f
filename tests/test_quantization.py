"""Quantized weights: ``--quantization`` and checkpoint ids as MODEL (optkit.resolve.quantization), the launch's
``--quantization ascend``, the lock's weights, the bf16-only recipes left out, and refusals naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from argv_support import flag_value
from optkit.bundle.launch import Launch
from optkit.bundle.lock import lock_data
from optkit.catalog.factspec import FACTS, QUANTIZATION_CHOICES
from optkit.cli.main import cli
from optkit.errors import RequestError
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.profiles import QUANTIZATIONS
from optkit.resolve.request_record import parse_request

ROOT = Path(__file__).resolve().parents[1]
W8A8_397B = "Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp"
W4A8_397B = "Eco-Tech/Qwen3.5-397B-A17B-w4a8-mtp"
SOURCE_397B = "vllm-ascend 0.30.0rc2 docs/source/tutorials/models/Qwen3.5-397B-A17B.md:{}"


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def _plan(workspace, **fields):
    return plan(parse_request({"target": "910c", **fields}), workspace)


def _argv(workspace, **fields) -> list[str]:
    return Launch(_plan(workspace, **fields), workspace).argv


# (id, request fields, quantization served, checkpoint served (MODEL of serve.sh), its source line or None)
SERVED = [
    ("bf16-by-default", dict(model="qwen3.5-397b-a17b", tp=16, dp=2, nodes=2), "bf16", "Qwen/Qwen3.5-397B-A17B", None),
    ("checkpoint-id-as-model", dict(model=W4A8_397B, tp=16), "w4a8", W4A8_397B, 29),
    ("checkpoint-id-any-case", dict(model=W8A8_397B.lower(), tp=16), "w8a8", W8A8_397B, 28),
    ("checkpoint-id-agreeing-flag", dict(model=W8A8_397B, tp=16, quantization="w8a8"), "w8a8", W8A8_397B, 28),
    ("format-of-a-listed-checkpoint", dict(model="qwen3.5-397b-a17b", tp=16, quantization="w8a8"), "w8a8",
     W8A8_397B, 28),
    ("a5-microscaling-format", dict(model="qwen3.5-397b-a17b", tp=16, quantization="w8a8-mxfp8"), "w8a8-mxfp8",
     "Eco-Tech/Qwen3.5-397B-A17B-w8a8-mxfp8", 30),
    ("own-weights-of-an-unlisted-format", dict(model="qwen3.6-35b-a3b", quantization="w4a8"), "w4a8",
     "Qwen/Qwen3.6-35B-A3B", None),
]


@pytest.mark.parametrize("fields, quantization, served, line", [c[1:] for c in SERVED], ids=[c[0] for c in SERVED])
def test_the_weights_served_and_their_launch(workspace, fields, quantization, served, line):
    result = _plan(workspace, **fields)
    launch = Launch(result, workspace)
    assert result.facts["runtime.quantization"] == quantization
    assert result.facts["runtime.quantized"] is (quantization != "bf16")
    assert launch.model_default == served
    assert flag_value(launch.argv, "--quantization") == (None if quantization == "bf16" else "ascend")
    assert flag_value(launch.argv, "--dtype") == "bfloat16"  # ModelSlim takes bf16 activations: no contradiction
    weights = lock_data(result, workspace, launch).get("weights")
    if quantization == "bf16":
        assert weights is None  # the profile's own weights: the lock is as it was
        return
    checkpoint = weights["checkpoint"]
    assert weights["quantization"] == quantization
    assert (checkpoint and checkpoint["id"], checkpoint and checkpoint["source"]) == \
        ((served, SOURCE_397B.format(line)) if line else (None, None))


def test_a_format_no_checkpoint_of_the_profile_has_is_planned_with_a_warning_naming_the_listed_ones(workspace):
    result = _plan(workspace, model="qwen3.6-35b-a3b", quantization="w8a8c8")
    assert result.weights.warning == (
        "qwen3.6-35b-a3b lists no w8a8c8 checkpoint (Qwen/Qwen3.6-35B-A3B (bf16), Eco-Tech/Qwen3.6-35B-A3B-w8a8 "
        "(w8a8)): the plan assumes your own w8a8c8 weights; serve.sh loads Qwen/Qwen3.6-35B-A3B unless given their "
        "path as MODEL")
    assert result.facts["runtime.kv_cache_quantized"] is True


def test_several_checkpoints_of_the_format_serve_the_first_the_page_lists_with_a_warning(workspace):
    result = _plan(workspace, model="qwen3.6-27b", quantization="w8a8")
    assert Launch(result, workspace).model_default == "Eco-Tech/Qwen3.6-27B-w8a8"
    assert result.weights.warning == (
        "qwen3.6-27b lists several w8a8 checkpoints (Eco-Tech/Qwen3.6-27B-w8a8, Eco-Tech/Qwen3.6-27B-W8A8-310P): the "
        "plan serves the first its page lists, Eco-Tech/Qwen3.6-27B-w8a8; name another as MODEL to serve it")


def test_own_weights_given_by_config_json_take_any_format_without_a_warning(workspace):
    config = ROOT / "tests" / "fixtures" / "hf" / "qwen3.6-35b-a3b" / "config.json"
    result = _plan(workspace, model_config=str(config), model_id="me/my-w4a8", quantization="w4a8")
    assert (result.weights.warning, flag_value(Launch(result, workspace).argv, "--quantization")) == ("", "ascend")


@pytest.mark.parametrize("fields, message", [
    pytest.param(dict(model=W4A8_397B, quantization="w8a8"),
                 f"--quantization w8a8 but MODEL {W4A8_397B} is a w4a8 checkpoint ({SOURCE_397B.format(29)}); drop "
                 "--quantization, or name the qwen3.5-397b-a17b checkpoint of that format (", id="contradicting-flag"),
    pytest.param(dict(model="Qwen/Qwen3.5-397B-A17B", quantization="w8a8"),
                 "--quantization w8a8 but MODEL Qwen/Qwen3.5-397B-A17B is a bf16 checkpoint", id="bf16-hub-id-quantized"),
])
def test_a_quantization_that_contradicts_the_checkpoint_is_refused_naming_both(workspace, fields, message):
    with pytest.raises(RequestError) as caught:
        _plan(workspace, tp=16, **fields)
    assert str(caught.value).startswith(message)


def test_the_bf16_only_recipes_are_left_out_on_quantized_weights_with_their_reason(workspace):
    """Each recipe whose rule reads the quantization says why it is left out; the same request in bf16 keeps them."""
    bf16 = _plan(workspace, model="qwen3.5-35b")
    w8a8 = _plan(workspace, model="qwen3.5-35b", quantization="w8a8")
    reading = sorted(r.id for r in workspace.catalog
                     if any("runtime.quantized" in rule.when for rule in [*r.preconditions, *r.effective_when]))
    assert reading == ["moe-fusedmc2-overlap-coexist", "moe-shared-expert-sidestream-ar",
                       "moe-shared-expert-weight-prefetch", "op-matmul-allreduce-add-rmsnorm-910c"]
    assert {"moe-shared-expert-sidestream-ar", "moe-shared-expert-weight-prefetch"} <= set(bf16.selected)
    for rid in reading:
        assert rid not in w8a8.selected
    decision = w8a8.resolution.decisions["moe-shared-expert-sidestream-ar"]
    assert "bf16 (non-quantized) shared-expert path" in decision.reason


def test_quantized_is_gone_from_requests_with_the_field_that_replaced_it(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: qwen3.5-35b\nquantized: true\n")
    result = CliRunner().invoke(cli, ["plan", "--request", str(path)])
    assert result.exit_code == 1
    assert f"{path}:2: quantized: quantized was replaced by quantization: give the weight format (quantization: " \
           "w8a8 for what quantized: true meant;" in result.output


def test_the_deprecated_flag_means_w8a8_and_says_so():
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--quantized", "--json"])
    assert result.exit_code == 0, result.output
    assert "--quantized is deprecated: it means --quantization w8a8" in result.stderr
    assert json.loads(result.stdout)["facts"]["runtime.quantization"] == "w8a8"
    both = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--quantized", "--quantization", "w4a8"])
    assert both.exit_code == 2 and "--quantized means --quantization w8a8, but --quantization w4a8" in both.output


def test_an_unknown_format_is_refused_by_the_flag_with_the_formats():
    result = CliRunner().invoke(cli, ["plan", "qwen3.5-35b", "--quantization", "int4"])
    assert result.exit_code == 2
    assert "Invalid value for '--quantization': Input should be 'bf16', 'w8a8', 'w8a8c8'," in result.output


def test_the_flags_help_lists_every_format():
    from optkit.cli.options import _OPTIONS

    help_text = next(kwargs["help"] for _, field, kwargs in _OPTIONS if field == "quantization")
    assert help_text.startswith("Weight format: " + ", ".join(QUANTIZATIONS) + " (default")


def test_the_fact_choices_are_the_profiles_formats():
    assert QUANTIZATION_CHOICES == QUANTIZATIONS
    assert FACTS["runtime.quantization"].choices == QUANTIZATIONS


def test_the_request_file_and_the_lock_replay_a_checkpoint_plan(workspace, tmp_path):
    """``plan --from-lock`` plans the lock's request again: the checkpoint and its format come back."""
    out = tmp_path / "bundle"
    result = CliRunner().invoke(cli, ["plan", W8A8_397B, "--tp", "16", "-o", str(out)])
    assert result.exit_code == 0, result.output
    lock = json.loads((out / "optkit.lock.json").read_text())
    assert (lock["request"]["model"], lock["request"]["quantization"]) == (W8A8_397B, None)
    assert lock["weights"]["checkpoint"]["id"] == W8A8_397B
    assert f'MODEL="${{MODEL:-{W8A8_397B}}}"' in (out / "serve.sh").read_text()
    again = CliRunner().invoke(cli, ["plan", "--from-lock", str(out / "optkit.lock.json"), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["weights"] == lock["weights"]


@pytest.mark.parametrize("quantization", ["bf16", "w8a8"])
def test_a_request_file_names_the_format(tmp_path, quantization):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "qwen3.5-35b", "quantization": quantization}))
    result = CliRunner().invoke(cli, ["facts", "--request", str(path)])
    assert result.exit_code == 0, result.output
    assert f"runtime.quantization = '{quantization}'" in result.output


def test_the_ladder_serves_the_checkpoint_too(tmp_path):
    out = tmp_path / "ladder"
    result = CliRunner().invoke(cli, ["ladder", "Eco-Tech/Qwen3.6-35B-A3B-w8a8", "-o", str(out), "--k8s"])
    assert result.exit_code == 0, result.output
    assert 'MODEL="${MODEL:-Eco-Tech/Qwen3.6-35B-A3B-w8a8}"' in (out / "run-ladder.sh").read_text()
    assert "- Eco-Tech/Qwen3.6-35B-A3B-w8a8\n" in (out / "k8s" / "ladder-job.yaml").read_text()


def test_a_placeholder_model_path_serves_the_one_weight_format_the_page_lists():
    """Kimi-K3.md in 0.23.0 serves <KIMI_K3_MODEL_PATH> without --quantization, its weights table W4A8 alone."""
    from optkit.resolve.page_commands import command_weights

    command = {"model": "<KIMI_K3_MODEL_PATH>", "options": {}}
    assert command_weights(command, [{"id": None, "quantization": "w4a8"}])[0] == "w4a8"
    assert command_weights(command, [{"id": "a", "quantization": "w4a8"}, {"id": "b", "quantization": "bf16"}])[0] \
        == "bf16"  # two formats: the page does not say which
    assert command_weights({"model": "org/Model", "options": {}}, [{"id": None, "quantization": "w4a8"}])[0] == "bf16"


def test_a_modelopt_mxfp8_checkpoint_loads_with_its_own_method(workspace):
    """MiniMax-M3.md (0.30.0rc2 :152): "MXFP8 weights (MiniMax-M3-MXFP8): use --quantization mxfp8"; vllm-ascend
    registers that method from 0.27.1rc1 (AscendModelOptMxFp8Config). Before, every quantized plan passed
    --quantization ascend, which loads msModelSlim weights only. The msModelSlim mxfp8 checkpoints (Eco-Tech's) keep
    ascend."""
    fields = dict(model="minimax-m3", target="950", tp=4, dp=2, quantization="w8a8-mxfp8",
                  vllm_ascend_version="0.30.0rc2")
    result = _plan(workspace, **fields)
    assert result.facts["runtime.quantization_method"] == "mxfp8"
    assert flag_value(Launch(result, workspace).argv, "--quantization") == "mxfp8"
    eco = _plan(workspace, model="qwen3.5-397b-a17b", target="950", tp=8, quantization="w8a8-mxfp8",
                vllm_ascend_version="0.30.0rc2")
    assert eco.facts["runtime.quantization_method"] == "ascend"
    with pytest.raises(RequestError, match=r"--quantization mxfp8 .*MiniMax-M3.md:152.*from 0\.27\.1rc1 on, not in "
                                           r"0\.26\.0rc1: use --vllm-ascend-version 0\.27\.1rc1"):
        _plan(workspace, **{**fields, "vllm_ascend_version": "0.26.0rc1"})


def test_a_method_besides_ascend_needs_the_page_that_names_it():
    from optkit.resolve.profiles import Checkpoint

    with pytest.raises(ValueError, match="needs method_source"):
        Checkpoint(id="x/y-mxfp8", quantization="w8a8-mxfp8", source="page:1", method="mxfp8")
