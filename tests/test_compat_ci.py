"""Compat in CI: on 0.23.0, 0.23.0.post1 and 0.30.0rc2 every recipe is either compatible there — the patch
set written for that release applies exactly (``optkit compat``: clean or offset) and every knob it sets is
known there — or the recipe records why not: its release entry for that release is upstream, superseded,
broken or absent, with its words (``msg``).

The expectation is the catalog's own data: nothing here names a recipe. A recipe still ``new`` on a
release without a patch set for it (``no-patch``) fails, named with the release, until it is ported
(``optkit port``) or its entry says why it cannot be.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from compat_support import CATALOG
from optkit.versions.onrelease import LEFT_OUT, ReleaseView, verdict
from optkit.versions.releases import load_release

pytestmark = [pytest.mark.tree]

RELEASES = ["0.23.0", "0.23.0.post1", "0.30.0rc2"]
REASONS = ("upstream", *LEFT_OUT)
"""Release-entry statuses that record why nothing is applied (the schema makes their ``msg`` non-empty)."""


@pytest.fixture(scope="module")
def cells():
    from optkit.versions.compat import release_matrix

    matrix = release_matrix(CATALOG, RELEASES)
    return {(c.recipe, c.patch, c.version): c for c in matrix.patches}


def _cases():
    return [pytest.param(r.id, v, id=f"{r.id}@{v}") for r in CATALOG for v in RELEASES]


def problems(recipe_id: str, version: str, cells: dict) -> list[str]:
    """Why ``recipe_id`` is neither compatible with ``version`` nor says why not (empty: it is fine)."""
    recipe = CATALOG[recipe_id]
    found = verdict(recipe, ReleaseView(load_release(version)))
    where = f"{recipe_id} on {version}"
    if found.status in REASONS:
        return []
    if found.status == "ok":
        bad = [cells[(recipe_id, p, version)] for p in found.patches if not cells[(recipe_id, p, version)].compatible]
        return [f"{where}: its patch {c.patch} for {found.patch_versions} is {c.result} there, not exact"
                + (f" ({c.why})" if c.why else "") for c in bad]
    entry = found.entry
    recorded = f" (its entry {entry.versions} is '{entry.status}', which records no reason)" if entry else ""
    return [f"{where}: {found.status}: {found.reason}{recorded}; port it (`optkit port {recipe_id} --to {version}`) "
            "or record in its releases entry why it cannot be (upstream, superseded, broken, absent)"]


@pytest.mark.parametrize("recipe_id, version", _cases())
def test_every_recipe_is_compatible_or_says_why(recipe_id, version, cells):
    found = problems(recipe_id, version, cells)
    assert not found, "\n".join(found)


def test_the_releases_are_the_suites():
    """The three releases of issue 11: the one the patches were written for, its post release, the newest."""
    from optkit.versions.releases import newest

    assert RELEASES[-1] == str(newest()) and sorted(RELEASES, key=Version) == RELEASES
