"""Which architectures a release serves natively (optkit.versions.architectures): the committed lists equal a fresh
read of the trees, and a plan says where neither the paired vLLM nor vllm-ascend registers its model's architecture
(vLLM then serves it only through its Transformers backend)."""

from __future__ import annotations

import pytest

from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.versions import architectures
from optkit.versions.releases import known_versions


@pytest.fixture(scope="module")
def workspace():
    return load_workspace()


@pytest.mark.tree
def test_the_committed_lists_are_the_trees():
    fresh = architectures.read_trees([str(v) for v in known_versions()])
    assert architectures.dump(fresh) == architectures.data_path().read_text(encoding="utf-8"), \
        "run: python -m optkit.versions.architectures --write"


def test_what_the_lists_hold():
    data = architectures.committed()
    assert "Qwen3_5MoeForConditionalGeneration" in data["vllm"]["0.23.0"]
    assert "DeepseekV41ForCausalLM" not in data["vllm"]["0.23.0"] and "DeepseekV41ForCausalLM" in data["vllm"]["0.30.0"]
    assert "DeepseekV4ForCausalLM" in data["vllm_ascend"]["0.23.0"]  # vllm_ascend/models/__init__.py registers it
    assert "ErnieModel" not in data["vllm"]["0.30.0"]  # previously supported: no longer served


@pytest.mark.parametrize("architecture, vllm, release, native", [
    ("Qwen3_5MoeForConditionalGeneration", "0.23.0", "0.23.0", "yes"),
    ("DeepseekV4ForCausalLM", "0.23.0", "0.23.0", "yes"),
    ("DeepseekV41ForCausalLM", "0.23.0", "0.23.0", "no"),
    ("DeepseekV41ForCausalLM", "0.30.0", "0.30.0rc2", "yes"),
    ("DeepseekV41ForCausalLM", "0.19.0", "0.26.0rc1", "unknown"),
])
def test_support(architecture, vllm, release, native):
    assert architectures.support(architecture, vllm, release)[0] == native


def test_a_plan_says_where_its_release_registers_the_architecture_nowhere(workspace):
    from optkit.cli.render import model_support_lines

    old = plan(Request(model="deepseek-v4.1-flash", target="910c", dp=16, nodes=2), workspace)
    assert old.facts["versions.native_architecture"] == "no"
    [line] = model_support_lines(old)
    assert line.startswith("Model support: neither vLLM 0.23.0 (vllm/model_executor/models/registry.py) nor "
                           "vllm-ascend 0.23.0 registers DeepseekV41ForCausalLM")
    assert "vllm-ascend 0.29.0rc1, 0.30.0rc1, 0.30.0rc2 register it; vLLM 0.30.0 registers it" in line
    new = plan(Request(model="deepseek-v4.1-flash", target="910c", dp=16, nodes=2, vllm_ascend_version="0.30.0rc2"),
               workspace)
    assert new.facts["versions.native_architecture"] == "yes" and model_support_lines(new) == []
