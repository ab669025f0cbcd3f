"""Rules apply by architecture: two catalog profiles of one architecture get the same plan.

Qwen3.6-35B-A3B is the Qwen3.5-35B-A3B architecture and Qwen3.5-27B the Qwen3.6-27B one (their
config.json fixtures, tests/fixtures/hf/README.md). With the measurements keyed to a model left out
(the article's TPOT baselines and verified-on records belong to the checkpoint they were measured on),
every decision, the serve argv and the env of the two plans must be the same: nothing in the catalog
reads a model's name (optkit lint; tests/test_tutorial_conformance.py::test_no_recipe_condition_names_a_model).
"""

from __future__ import annotations

from optkit.value import replace

import pytest

from optkit.bundle.launch import Launch
from optkit.catalog.records import Records
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WORKSPACE = replace(load_workspace(), baselines=[], records=Records())
SAME_ARCHITECTURE = [("qwen3.5-35b-a3b", "qwen3.6-35b-a3b"), ("qwen3.6-27b", "qwen3.5-27b")]
REQUESTS = {
    "flagship-mtp": dict(mtp=True),
    "no-mtp": dict(),
    "c64": dict(concurrency=[64]),
    "w8a8-c128-prefix": dict(quantization="w8a8", concurrency=[128], prefix_caching=True),
    "dp4": dict(dp=4, concurrency=[32]),
}
ARCHITECTURE = ("hf_model_type", "text_model_type", "architecture", "num_layers", "gdn_layers",
                "full_attention_layers", "hidden_size", "vocab_size", "num_attention_heads", "num_kv_heads",
                "head_dim", "linear_key_heads", "linear_value_heads", "is_moe", "num_experts",
                "experts_per_token", "shared_experts", "mtp_layers", "is_vl", "dtype")


@pytest.mark.parametrize("first, second", SAME_ARCHITECTURE, ids=[b for _, b in SAME_ARCHITECTURE])
def test_the_pairs_share_an_architecture(first, second):
    a, b = WORKSPACE.models[first], WORKSPACE.models[second]
    assert {f: getattr(a, f) for f in ARCHITECTURE} == {f: getattr(b, f) for f in ARCHITECTURE}


@pytest.mark.parametrize("version", ["0.23.0", "0.30.0rc2"])
@pytest.mark.parametrize("fields", list(REQUESTS.values()), ids=list(REQUESTS))
@pytest.mark.parametrize("first, second", SAME_ARCHITECTURE, ids=[b for _, b in SAME_ARCHITECTURE])
def test_same_architecture_same_plan(first, second, fields, version):
    plans = [plan(Request(model=m, vllm_ascend_version=version, **fields), WORKSPACE) for m in (first, second)]
    # a reason may name the model it was decided for; that name is all it may differ by
    decisions = [{rid: (d.status, _unnamed(d.reason, p.model)) for rid, d in p.resolution.decisions.items()}
                 for p in plans]
    assert decisions[0] == decisions[1]
    launches = [Launch(p, WORKSPACE) for p in plans]
    assert (launches[0].argv, launches[0].sources, launches[0].env) == (
        launches[1].argv, launches[1].sources, launches[1].env)
    assert plans[0].selected, "a plan that selects nothing proves nothing"


def _unnamed(text: str, model) -> str:
    for name in sorted([*model.names(), model.hf_id], key=len, reverse=True):
        text = text.replace(name, "MODEL")
    return text
