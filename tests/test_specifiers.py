"""Version ranges: packaging's answers, kept in the catalog cache, for the questions asked."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from optkit.catalog.paths import project_root
from optkit.catalog.specifiers import VersionRanges

RELEASES = st.builds(lambda minor, patch: f"0.{minor}.{patch}", st.integers(17, 31), st.integers(0, 2))
VERSIONS = st.builds(lambda release, suffix: release + suffix, RELEASES,
                     st.sampled_from(["", "", "rc1", "rc2", "a1", ".post1", ".dev0", "+local"]))
OPERATORS = st.sampled_from(["==", "!=", ">=", "<=", ">", "<", "~="])
SPECIFIER = st.lists(st.builds(lambda op, version: op + version, OPERATORS,
                               st.one_of(RELEASES, RELEASES.map(lambda r: r.rsplit(".", 1)[0]),
                                         RELEASES.map(lambda r: r + "rc1"))),
                     min_size=1, max_size=2).map(",".join)


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """Answers go to a cache of this module's own (one entry, rewritten for each new question)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPTKIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@settings(max_examples=150, deadline=None)
@given(st.lists(SPECIFIER, min_size=1, max_size=4), st.lists(VERSIONS, min_size=1, max_size=2))
def test_the_answers_are_packagings_for_every_question(specifiers, versions):
    """Across examples the cache holds other questions' answers: each set must get its own."""
    ranges = VersionRanges(specifiers, [Version(v) for v in versions])
    for spec in specifiers:
        for version in versions:
            assert ranges.contains(spec, Version(version)) == (Version(version) in SpecifierSet(spec, prereleases=True))


def test_a_warm_plan_does_not_import_packaging_specifiers(tmp_path):
    code = ("import sys\nfrom optkit.resolve.plan import load_workspace, plan\n"
            "from optkit.resolve.request_record import parse_request\n"
            "plan(parse_request({'model': 'qwen3.5-35b', 'vllm_ascend_version': '0.26.0rc1'}), load_workspace())\n"
            "print('packaging.specifiers' in sys.modules)")
    env = dict(os.environ, OPTKIT_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join([str(project_root()), *filter(None, [env.get("PYTHONPATH")])])
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs == ["True\n", "False\n"]
