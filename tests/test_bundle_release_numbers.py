"""A recipe's estimate uses the numbers of the release planned for (issue 25, finding 18): the article's -131 us of
blocktable-slot-mapping-cpu-fastpath was measured against vLLM's generic slot-mapping kernel, which vllm-ascend
replaced with its own from 0.26.0rc1; there the plan, expected.json and the README leave the saving unquantified."""

from __future__ import annotations

import json

import pytest

from optkit.bundle.writer import bundle_files
from optkit.resolve.plan import load_workspace, plan
from optkit.resolve.request_record import parse_request

WS = load_workspace()
RECIPE = "blocktable-slot-mapping-cpu-fastpath"


def _plan(version):
    return plan(parse_request({"model": "qwen3.6-35b-a3b", "target": "910c", "concurrency": [64],
                               "vllm_ascend_version": version}), WS)


@pytest.mark.parametrize("version, saving, basis", [
    pytest.param("0.23.0", 0.131, "derived from host time per step", id="0.23.0-the-article's-release"),
    pytest.param("0.23.0.post1", 0.131, "derived from host time per step", id="0.23.0.post1"),
    pytest.param("0.30.0rc2", None, "unquantified on vllm-ascend 0.30.0rc2 (the article's number holds on <0.26.0rc1)",
                 id="0.30.0rc2-upstream's-own-kernel"),
])
def test_the_estimate_uses_the_releases_numbers(version, saving, basis):
    result = _plan(version)
    gain = result.resolution.decisions[RECIPE].benefit
    assert gain.per_concurrency[64] == (pytest.approx(saving) if saving else None)
    assert gain.basis[64] == basis


def test_expected_json_leaves_the_other_releases_number_aside():
    result = _plan("0.30.0rc2")
    expected = json.loads(bundle_files(result, WS)["expected.json"])
    entry = expected["recipes"][RECIPE]
    assert entry["gains"] == []
    assert entry["other_reported"][0]["not_counted"] == ("not counted in this plan's estimate: measured on "
                                                         "vllm-ascend <0.26.0rc1, not 0.30.0rc2")
    assert expected["estimate"]["per_concurrency"][0]["expected_saving_ms"] == 0.0  # the only other gain is upstream
    readme = bundle_files(result, WS)["README.md"].decode()
    assert "c64 −0.131 ms" not in readme


@pytest.mark.parametrize("version", ["0.23.0", "0.30.0rc2"])
def test_the_readme_does_not_pin_the_catalog_to_one_release(version):
    """Finding 23: the version-upgrade recipe's text said the source patches are pinned to 0.23.x, in a 0.30.0rc2
    bundle that applies patches written for 0.30."""
    readme = bundle_files(_plan(version), WS)["README.md"].decode()
    assert "pinned to 0.23" not in readme
    assert "names the releases its patch sets were written for" in readme
