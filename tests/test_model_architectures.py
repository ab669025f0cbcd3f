"""Rules apply by architecture: two catalog profiles of one architecture get the same plan.

Qwen3.6-35B-A3B is the Qwen3.5-35B-A3B architecture and Qwen3.5-27B the Qwen3.6-27B one (their
config.json fixtures, tests/fixtures/hf/README.md). With the measurements keyed to a model left out
(the article's TPOT baselines and verified-on records belong to the checkpoint they were measured on),
every decision, the serve argv and the env of the two plans must be the same: nothing in the catalog
reads a model's name (optkit lint; tests/test_tutorial_conformance.py::test_no_recipe_condition_names_a_model).
The settings a plan carries from its model's own tutorial page (``page:<file>:<line>``) are keyed to that model
too: they are left out of the comparison, and each must come from the model's own page.
"""

from __future__ import annotations

import json

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
    assert _unpaged(plans[0], launches[0]) == _unpaged(plans[1], launches[1])
    for p, launch in zip(plans, launches):  # what differs is the model's own page's command, and only where it has one
        pages = {label.split(":")[1] for label in [*launch.sources, *(e["recipe"] for e in launch.env),
                                                   *p.config_sources.values()] if label.startswith("page:")}
        assert pages <= set(p.model.tutorials), pages
    assert plans[0].selected, "a plan that selects nothing proves nothing"


def _unpaged(plan, launch) -> tuple:
    """argv, sources and env without the settings carried from the model's own tutorial page (``page:<file>:<line>``,
    keyed to the model like its measurements: docs/objective.md "Page settings"): its flags, its env and its keys
    inside the JSON configs (``Plan.config_sources``)."""
    paged = [path.split(".") for path, label in plan.config_sources.items() if label.startswith("page:")]
    argv, sources = [], []
    for arg, source in zip(launch.argv, launch.sources):
        if source.startswith("page:"):
            continue
        if arg.startswith("{"):  # a JSON config: compared without the page's keys
            config = json.loads(arg)
            for path in paged:
                _drop(config, path[1:])
            arg = json.dumps(config, sort_keys=True)
        argv.append(arg)
        sources.append(source)
    return argv, sources, [e for e in launch.env if not e["recipe"].startswith("page:")]


def _drop(config: dict, path: list[str]) -> None:
    for key in path[:-1]:
        config = config.get(key) if isinstance(config, dict) else None
    if isinstance(config, dict):
        config.pop(path[-1], None)


def _unnamed(text: str, model) -> str:
    for name in sorted([*model.names(), model.hf_id], key=len, reverse=True):
        text = text.replace(name, "MODEL")
    return text
