"""The bundle README names each recipe's knobs as the planned release reads them (versions/moves.yaml)."""

from __future__ import annotations

import pytest

from optkit.bundle.writer import write_bundle
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request import Request

WORKSPACE = load_workspace()
HEADING = "### moe-fused-mc2-enable — Fused MC2 MoE dispatch/FFN/combine"
MOVED = "**On this release:** env var VLLM_ASCEND_ENABLE_FUSED_MC2 is replaced by additional_config key enable_fused_mc2 from 0.27.1rc1."


@pytest.mark.parametrize("version, title, note", [
    pytest.param("0.23.0", "(VLLM_ASCEND_ENABLE_FUSED_MC2=1)", None, id="0.23.0-env-var"),
    pytest.param("0.27.1rc1", "(additional_config.enable_fused_mc2=1)", MOVED, id="0.27.1rc1-moved"),
    pytest.param("0.30.0rc2", "(additional_config.enable_fused_mc2=1)", MOVED, id="0.30.0rc2-moved"),
])
def test_the_readme_titles_a_recipe_with_the_knob_its_release_reads(tmp_path, version, title, note):
    request = Request(model="qwen3.5-35b", target="910c", vllm_ascend_version=version, **{"with": ["moe-fused-mc2-enable"]})
    write_bundle(plan(request, WORKSPACE), WORKSPACE, tmp_path / "b")
    text = (tmp_path / "b" / "README.md").read_text()
    (heading,) = [line for line in text.splitlines() if line.startswith(HEADING)]
    assert heading == f"{HEADING} {title}"
    moved = note if note else "VLLM_ASCEND_ENABLE_FUSED_MC2 is replaced by"
    assert (moved in text) == (note is not None)
    summary = text.split(heading, 1)[1].split("\n\n", 2)[1]  # the kind and the summary, after the heading
    kind, knob = ("*config*.", "additional_config.enable_fused_mc2=1") if note else ("*env*.", "VLLM_ASCEND_ENABLE_FUSED_MC2=1")
    assert summary.startswith(kind) and knob in summary, summary
