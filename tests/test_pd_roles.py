"""What a PD role runs differently from the plan (optkit.versions.pd_roles): the prefiller eager, as every
PD tutorial launches it, with the plan's graph settings left out of its argv, the decoder with its graphs;
the tutorial lines cited per release read on the real trees."""

from __future__ import annotations

import json
import re

import pytest

from argv_support import flag_value
from optkit.bundle.pd import role_launches
from optkit.bundle.writer import write_bundle
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request
from optkit.versions.pd import PD_RELEASES
from optkit.versions.pd_roles import MULTI, PREFILL_EAGER

WORKSPACE = load_workspace()
MTP = {"model": "qwen3.5-35b", "target": "910c", "mtp": True, "pd": "1:1"}
"""A plan whose recipes set graph settings in both JSON configs (capture sizes, static and super kernels)."""
TAB = re.compile(r'^\s*(?:=== "|:+\{tab-item\}\s*)(.*?)"?\s*$')


def _launches(**fields):
    return role_launches(plan(Request(**{**MTP, **fields}), WORKSPACE), WORKSPACE)


def test_the_prefiller_runs_eager_without_the_graph_settings():
    launches = _launches()
    prefill, decode = launches["prefill"].argv, launches["decode"].argv
    assert "--enforce-eager" in prefill and "--compilation-config" not in prefill
    assert "ascend_compilation_config" not in json.loads(flag_value(prefill, "--additional-config"))
    assert json.loads(flag_value(prefill, "--speculative-config"))["enforce_eager"] is True
    assert launches["prefill"].sources[prefill.index("--enforce-eager")] == "optkit"
    # the decoder keeps every graph setting of the plan
    assert "--enforce-eager" not in decode
    assert json.loads(flag_value(decode, "--compilation-config"))["cudagraph_mode"] == "FULL_DECODE_ONLY"
    assert json.loads(flag_value(decode, "--additional-config"))["ascend_compilation_config"]["enable_static_kernel"] is True
    assert "enforce_eager" not in json.loads(flag_value(decode, "--speculative-config"))
    # what the prefiller keeps of the JSON configs is the plan's, but for the graph keys
    kept = {k: v for k, v in launches["decode"].plan.additional_config.items() if k != "ascend_compilation_config"}
    assert json.loads(flag_value(prefill, "--additional-config")) == kept


@pytest.mark.parametrize("fields, drafted, source", [
    # GLM5.3-Flash.md's A3 PD prefiller (0.30.0rc2 :398) drafts 5, as its decoder does: the page's number
    ({"model": "glm-5.3-flash", "target": "910c", "tp": 8, "dp": 2, "quantization": "w8a8", "mtp": True,
      "num_speculative_tokens": 5}, 5, "page:GLM5.3-Flash.md:398"),
    # without a page command for the role, the PD tutorials' prefiller drafts 1
    ({"model": "glm-5.3-flash", "target": "910c", "tp": 4, "dp": 2, "quantization": "w8a8", "mtp": True,
      "num_speculative_tokens": 5}, 1, "optkit"),
])
def test_the_prefillers_tokens_are_its_own_page_commands_where_it_has_one(fields, drafted, source):
    launches = _launches(vllm_ascend_version="0.30.0rc2", **fields)
    prefill = launches["prefill"]
    assert json.loads(flag_value(prefill.argv, "--speculative-config"))["num_speculative_tokens"] == drafted
    assert prefill.speculative_sources[-1] == source
    assert json.loads(flag_value(launches["decode"].argv, "--speculative-config"))["num_speculative_tokens"] == 5


def test_a_request_for_eager_makes_both_roles_eager_as_the_request_says():
    launches = _launches(enforce_eager=True)
    for role, launch in launches.items():
        assert launch.sources[launch.argv.index("--enforce-eager")] == "request", role


def test_the_prefill_readme_names_what_it_leaves_out(tmp_path):
    planned = plan(Request(**MTP), WORKSPACE)
    write_bundle(planned, WORKSPACE, tmp_path / "b")
    prefill = (tmp_path / "b/prefill/README.md").read_text(encoding="utf-8")
    decode = (tmp_path / "b/decode/README.md").read_text(encoding="utf-8")
    assert "## Eager" in prefill and "## Eager" not in decode
    lines = PREFILL_EAGER[str(planned.facts["versions.vllm_ascend"])]
    assert f"{MULTI}:{', '.join(map(str, lines))}" in prefill
    line = next(line for line in prefill.splitlines() if line.startswith("- **cudagraph-capture-sizes-spec-aware**"))
    assert "*graph settings left out*: compilation_config.cudagraph_capture_sizes" in line
    line = next(line for line in prefill.splitlines() if line.startswith("- **waterfall-hccl-aiv**"))
    assert "left out" not in line  # an env-only recipe acts on the prefiller whole
    assert "left out" not in decode


@pytest.mark.tree
@pytest.mark.parametrize("version", sorted(PD_RELEASES))
def test_the_cited_lines_are_every_prefillers_eager_flag_and_no_decoders(version):
    """In the release's multi-node tutorial, ``--enforce-eager`` stands on exactly the cited lines, each
    in a prefiller's tab; no decoder tab has it."""
    from optkit.tree.fetch import fetch

    assert version in PREFILL_EAGER, f"optkit/versions/pd_roles.py: PREFILL_EAGER has no entry for {version}"
    text = (fetch(version).path / MULTI).read_text(encoding="utf-8").splitlines()
    tab, eager = "", {}
    for number, line in enumerate(text, 1):
        heading = TAB.match(line)
        if heading:
            tab = heading[1]
        if "--enforce-eager" in line:
            eager[number] = tab
    assert sorted(eager) == list(PREFILL_EAGER[version]), f"{MULTI} of {version}: --enforce-eager at {eager}"
    assert all(tab.startswith("Prefiller") for tab in eager.values()), eager
    assert any(tab.startswith("Decoder") for tab in (TAB.match(line)[1] for line in text if TAB.match(line)))
