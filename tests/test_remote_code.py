"""A checkpoint that ships its own config class (config.json ``auto_map.AutoConfig``: InternVL3.5's, Kimi-K3's,
DeepSeek's) is served with ``--trust-remote-code``, as its tutorials serve it: vLLM refuses such a checkpoint without
the flag where neither it nor transformers registers its ``model_type`` (InternVL's ``internvl_chat`` with every
vLLM optkit pairs; Kimi-K3's ``kimi_k3`` with vLLM 0.23.0). The flag's source is the model (``model.remote_code``);
``bundle check`` builds the engine configuration with the class vLLM or transformers registers for the type, and
says it cannot build it where only the checkpoint's own code could."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

HF = Path(__file__).parent / "fixtures" / "hf"


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


def test_the_profiles_that_name_their_own_config_class_are_the_configs_with_auto_map(workspace):
    named = {m.id: m.config_code for m in workspace.models.values() if m.config_code}
    assert named == {
        "deepseek-r1": "configuration_deepseek.DeepseekV3Config", "deepseek-v3.1": "configuration_deepseek.DeepseekV3Config",
        "deepseek-v3.2": "configuration_deepseek.DeepseekV3Config",
        "internvl3_5-241b-a28b": "configuration_internvl_chat.InternVLChatConfig",
        "internvl3_5-38b": "configuration_internvl_chat.InternVLChatConfig",
        "kimi-k2-thinking": "configuration_deepseek.DeepseekV3Config", "kimi-k3": "configuration_kimi_k3.KimiK3Config"}


@pytest.mark.parametrize(("model", "trusted"), [("internvl3_5-38b", True), ("qwen3.5-35b-a3b", False)])
def test_the_launch_trusts_the_checkpoints_code_where_it_ships_its_own_config_class(workspace, model, trusted):
    result = plan(Request(model=model, target="910c"), workspace)
    flags = [(s.key, s.recipe) for s in result.launch_flags]
    assert (("--trust-remote-code", "model") in flags) is trusted
    assert result.facts["model.remote_code"] is trusted


def _args(trust: bool):
    return types.SimpleNamespace(trust_remote_code=trust)


@pytest.mark.vllm
def test_the_engine_probe_builds_what_vllm_or_transformers_registers_and_says_what_it_cannot(tmp_path):
    from optkit.bundle import engine_probe

    internvl = str(HF / "internvl3.5-38b" / "config.json")
    absent = engine_probe._config_code_absent(internvl, _args(True))
    assert "configuration_internvl_chat.InternVLChatConfig" in absent and "neither vLLM nor transformers" in absent
    assert engine_probe._config_code_absent(internvl, _args(False)) is None  # vLLM's own refusal is then the answer
    beside = tmp_path / "checkpoint"
    beside.mkdir()
    (beside / "config.json").write_text((HF / "internvl3.5-38b" / "config.json").read_text(encoding="utf-8"))
    (beside / "configuration_internvl_chat.py").write_text("")
    assert engine_probe._config_code_absent(str(beside), _args(True)) is None  # the checkpoint's folder: run it
    deepseek = str(HF / "deepseek-v3.1" / "config.json")
    assert engine_probe._registered(json.loads(Path(deepseek).read_text())["model_type"]) == "transformers"
    not_run: list[str] = []
    with engine_probe._model_dir(deepseek, types.SimpleNamespace(trust_remote_code=True, quantization=None,
                                                                 max_model_len=None), not_run) as folder:
        written = json.loads((Path(folder) / "config.json").read_text())
    assert "auto_map" not in written and "transformers's config class for model_type 'deepseek_v3' stands in" in \
        not_run[0]


@pytest.mark.slow
@pytest.mark.vllm
def test_bundle_check_says_the_engine_configuration_of_a_checkpoints_own_class_is_not_built_here(tmp_path, workspace):
    """vLLM 0.23.0 without the flag: 'The repository … contains custom code which must be executed'; with it, the
    probe cannot run the class (its .py is not beside the fixture's config.json): skipped, naming the class."""
    from optkit.bundle.check import check_bundle
    from optkit.bundle.writer import write_bundle

    result = plan(Request(model="internvl3_5-38b", target="910c"), workspace)
    write_bundle(result, workspace, tmp_path / "bundle")
    report = check_bundle(tmp_path / "bundle")
    statuses = {c.name: c for c in report.checks}
    assert statuses["vllm"].status == "pass" and report.problems == []
    assert statuses["engine"].status == "skipped" and "InternVLChatConfig" in statuses["engine"].note


def test_the_plan_says_the_launch_runs_the_checkpoints_code(workspace):
    from optkit.cli.render import model_code_lines
    from optkit.resolve.report import model_code_data

    result = plan(Request(model="internvl3_5-38b", target="910c"), workspace)
    assert model_code_data(result) == {"model_code": {"config_class": "configuration_internvl_chat.InternVLChatConfig",
                                                      "flag": "--trust-remote-code"}}
    assert model_code_lines(result)[0].startswith("Model code: config.json's auto_map names the checkpoint's own "
                                                  "config class configuration_internvl_chat.InternVLChatConfig")
    assert model_code_lines(plan(Request(model="qwen3.5-35b-a3b", target="910c"), workspace)) == []
