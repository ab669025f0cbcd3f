"""Invariant 2(e) of issue 25: ``optkit export --release V`` describes exactly V's patch entry.

For every recipe with a source patch and every known release one of its release entries has a patch
set for: the series is that entry's patch set, each patch touches the files its entry names, each
commit message is that patch's Description; PR.md's summary, numbers and risks are those of V's
patch entries (``Patch.summary``/``gains``/``evidence``/``risks``, the recipe's where the entry
leaves a field out), it quotes no identifier or ``file:line`` that only another release's entries
name, claims no test result it did not produce and speaks upstream's language. On a release where
upstream already has part of the change (``partly-upstream``), the article's numbers (measured on
0.23.0 without that part) are not quoted unless V's entry says they hold (declares its ``gains``).

No git, no tree: ``export_scope``, ``patch_message`` and ``planned_commits`` are what ``export``
writes from, and
``pr_text`` renders PR.md from the same values (a compatibility row per release needs the trees
and is left out here; tests/test_export.py covers it on the real tree).
"""

from __future__ import annotations

import re

import pytest
from packaging.version import Version

from compat_support import CATALOG
from optkit.versions.export import export_scope, patch_message, planned_commits
from optkit.versions.export_pr import leftover_words, pr_text, release_text
from optkit.versions.export_words import upstream_text
from optkit.versions.probes import in_range
from optkit.versions.releases import known_versions

ARTICLE_RELEASE = "0.23.0"
"""The release the article's numbers were measured on (its part 2: "v0.23.0 内部分支")."""
_IDENT = re.compile(r"(?<![\w.])_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w])")
_LINES = re.compile(r"[\w/]+\.py:\d+(?:-\d+)?")
_CLAIM = re.compile(r"(?i)\b(?:passe[sd]|fails|failed)\b[^.\n]*\b(?:base commit|series)\b")


def _cases():
    for recipe in CATALOG:
        for entry in recipe.releases:
            patches = [p for p in recipe.patches if p.file in entry.patches]
            if not patches or any(p.status != "present" for p in patches) or entry.status == "upstream":
                continue
            for version in known_versions():
                if in_range(version, entry.versions):
                    yield pytest.param(recipe, entry, str(version), id=f"{recipe.id}@{version}")


CASES = list(_cases())


def _texts(patch) -> list[str]:
    return [patch.description, patch.summary or "", patch.evidence, *(r.text for r in patch.risks or ()),
            *(g.quote for g in patch.gains or ())]


def _entry_texts(entry) -> list[str]:
    return [entry.msg, entry.evidence, entry.note or ""]


def _diff(recipe, patches) -> str:
    return "".join(CATALOG.patch_path(recipe.id, p.file).read_text(encoding="utf-8", errors="replace") for p in patches)


def _added(recipe, patch) -> str:
    """The lines ``patch`` adds: the code that release's series brings."""
    return "\n".join(line for line in _diff(recipe, [patch]).splitlines() if line.startswith("+"))


def _pr(recipe, version):
    scope = export_scope(CATALOG, [recipe.id], version)
    scope.commits = planned_commits(CATALOG, scope)
    paths = sorted({t for p in recipe.patches if p.file in scope.verdicts[recipe.id].patches for t in p.targets})
    return scope, pr_text(CATALOG, scope, None, paths, {})


def test_there_are_cases():
    ids = {c.values[0].id for c in CASES}
    assert "blocktable-slot-mapping-cpu-fastpath" in ids and len(CASES) >= 20


@pytest.mark.parametrize("recipe, entry, version", CASES)
def test_the_series_is_v_s_patch_entry(recipe, entry, version):
    scope = export_scope(CATALOG, [recipe.id], version)
    series = scope.verdicts[recipe.id].patches
    assert list(series) == list(entry.patches)
    titles = {r.id: r.title for r in CATALOG}
    for patch in (p for p in recipe.patches if p.file in series):
        text = CATALOG.patch_path(recipe.id, patch.file).read_text(encoding="utf-8", errors="replace")
        touched = set(re.findall(r"^diff --git a/(\S+) b/", text, re.M))
        assert touched == set(patch.targets), patch.file
        message = patch_message(CATALOG, recipe, patch.file, series, None)
        kept = upstream_text(patch.description, titles)
        assert kept in message
        assert len(kept) >= len(" ".join(patch.description.split())) / 2, (
            f"{patch.file}: the rewrite for upstream drops most of the description (port history runs into the "
            f"change's own sentences): {kept!r}")
        assert not re.search(r"(?i)re-derived|refreshed for|\bthe 0\.\d+(?:\.\w+)? patch\b", message), message


@pytest.mark.parametrize("recipe, entry, version", CASES)
def test_pr_md_describes_exactly_v_s_patch_entry(recipe, entry, version):
    scope, text = _pr(recipe, version)
    titles = {r.id: r.title for r in CATALOG}
    mine = [p for p in recipe.patches if p.file in entry.patches]
    others = [p for p in recipe.patches if p.file not in entry.patches]
    found = release_text(recipe, scope.verdicts[recipe.id], version)

    for risk in found.risks:  # the risks quote V's entry (the recipe's where it declares none)
        assert upstream_text(risk.text, titles, None) in text
    declared = [r for p in mine for r in p.risks or ()]
    assert not declared or set(found.risks) <= set(declared)
    for gain in found.gains:
        assert gain.quote in text
    if entry.status == "partly-upstream" and not in_range(Version(ARTICLE_RELEASE), entry.versions):
        assert all(p.gains is not None for p in mine), (
            f"{recipe.id} on {version}: upstream has part of the change there, so the article's numbers do not hold "
            "as they are: say which do in the patch entry's gains (and evidence)")

    own = " ".join(t for p in mine for t in _texts(p)) + " " + " ".join(_entry_texts(entry))
    own += " " + " ".join([recipe.title, *(r.msg for r in recipe.preconditions)])
    foreign = ({w for p in others for t in _texts(p) for w in _IDENT.findall(t)}
               & {w for p in others for w in _IDENT.findall(_added(recipe, p))}) - set(_IDENT.findall(own + _diff(recipe, mine)))
    named = [w for w in sorted(foreign) if re.search(rf"(?<![\w.]){re.escape(w)}(?![\w])", text)]
    assert not named, f"PR.md for {version} names what only another release's patch entry has: {named}"
    foreign_lines = {ref for p in others for t in _texts(p) for ref in _LINES.findall(t)} - set(_LINES.findall(own))
    assert not [ref for ref in foreign_lines if ref in text]


@pytest.mark.parametrize("recipe, entry, version", CASES)
def test_pr_md_speaks_upstream_s_language_and_claims_no_run(recipe, entry, version):
    _, text = _pr(recipe, version)
    assert leftover_words(text, CATALOG) == []
    assert "tests/cpu/" not in text and "verification level" not in text and "write-up" not in text
    assert not _CLAIM.search(text), _CLAIM.search(text)
