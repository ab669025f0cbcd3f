"""``DIR/PR.md`` of ``optkit export``: the pull-request text in the form of the tree's own template.

The sections are read from ``.github/PULL_REQUEST_TEMPLATE.md`` of the exported tree (its ``###``
headings, in its order; the template's comments are the instructions and are replaced); the three
upstream asks for are filled from what optkit holds about each recipe:

- *what / why*: the recipe's summary (rewritten for upstream, as the commit messages), what the
  release already has (its release entry), the article's numbers labelled as the article's, and
  numbers measured on an NPU host (accepted ``verified/`` records) when there are any;
- *user-facing change*: the knobs the recipe sets, else none, with its preconditions;
- *how tested*: the exported unit tests and their command, their result on the base and on the
  series when export ran them (``--run-tests``), optkit's CPU equivalence test of the recipe, the
  compatibility rows of the patch set (``optkit.versions.compat.patch_cell`` on every known release
  of the range it was written for), and the risks that apply to the release.

A heading the template has and optkit cannot fill keeps the template's comment, for a person to.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from packaging.version import Version

from optkit.catalog.conditions import compiled
from optkit.versions.export_words import optkit_words, title_prefix, upstream_text
from optkit.versions.onrelease import recipe_knobs
from optkit.versions.probes import in_range
from optkit.versions.releases import known_versions

TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"
_FALLBACK = ("### What this PR does / why we need it?\n\n### Does this PR introduce _any_ user-facing change?\n\n"
             "### How was this patch tested?\n")
_SECTIONS = (("what this pr does", "what"), ("user-facing", "user"), ("how was this patch tested", "tested"))


def pr_markdown(catalog, result) -> str:
    """PR.md for the export ``result`` (``optkit.versions.export.Export``)."""
    template = result.out / TEMPLATE
    text = template.read_text(encoding="utf-8") if template.is_file() else _FALLBACK
    titles = {r.id: r.title for r in catalog}
    fill = {"what": _what(catalog, result, titles), "user": _user(result, titles), "tested": _tested(catalog, result, titles)}
    paths = [p for c in result.commits for p in _commit_paths(result.out, c.sha)]
    lines = [f"# {title_prefix(paths)} " + "; ".join(r.title for r in result.recipes), ""]
    if not template.is_file():
        lines += [f"(the tree has no {TEMPLATE}; the sections are those of vllm-ascend's template)", ""]
    for heading, body in _template_sections(text):
        key = next((k for words, k in _SECTIONS if words in heading.lower()), None)
        lines += [heading, "", (fill[key] if key else body).strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def _template_sections(text: str) -> list[tuple[str, str]]:
    """(``### heading``, its body) in order; what comes before the first heading is dropped."""
    parts = re.split(r"^(### .*)$", text, flags=re.M)
    return [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts) - 1, 2)]


def _commit_paths(out: Path, sha: str) -> list[str]:
    from optkit.tree.gitops import git

    return git(out, "show", "--name-only", "--format=", sha).stdout.decode().split()


# --------------------------------------------------------------------------- what / why


def _what(catalog, result, titles) -> str:
    lines = []
    for recipe in result.recipes:
        found = result.verdicts[recipe.id]
        lines += [f"**{recipe.title}**", "", upstream_text(recipe.summary, titles, None), ""]
        if found.entry is not None and found.entry.status == "partly-upstream":
            lines += [f"What vllm-ascend {result.version} already has: {found.entry.msg.rstrip('.')}.", ""]
        lines += _numbers(catalog, recipe) + [""]
    fixes = sorted({line for c in result.commits for line in re.findall(r"^Bug: (.+)$", c.message, re.M)})
    lines += [f"- Fixes {bug}" for bug in fixes]
    return "\n".join(lines)


def _numbers(catalog, recipe) -> list[str]:
    from optkit.catalog.paths import project_root
    from optkit.catalog.records import load_records

    measured = load_records(project_root(), catalog).of(recipe.id)
    if measured:
        return ["Measured (accepted verified-on records):"] + [
            f"- {e.label}: TPOT change per concurrency "
            + ", ".join(f"c{c}: {d:+.2f} ms (noise {e.measurement.noise_ms.get(c, 0):.2f} ms, {e.measurement.verdict.get(c)})"
                        for c, d in sorted(e.measurement.tpot_delta_ms.items()))
            for e in measured]
    if not recipe.gains:
        return ["No measured numbers yet (no NPU run recorded)."]
    return ["Reported by the Ascend 910C inference tuning write-up (the article's numbers, not measured for this PR; "
            "no NPU run is recorded yet):"] + [f"- {_gain(g)}" for g in recipe.gains]


def _gain(gain) -> str:
    metric = gain.metric.value if hasattr(gain.metric, "value") else str(gain.metric)
    where = ", ".join(x for x in (f"concurrency {gain.concurrency}" if gain.concurrency else "",
                                  {True: "MTP on", False: "MTP off"}.get(gain.mtp, ""),
                                  f"dataset {gain.dataset}") if x)
    value = (f"{gain.before:g} → {gain.after:g} {gain.unit}" if gain.before is not None and gain.after is not None
             else f"{gain.delta:+g} {gain.unit}")
    return f"{metric}: {value} ({where}); quote: 「{gain.quote}」"


# --------------------------------------------------------------------------- user-facing


def _user(result, titles) -> str:
    lines = []
    for recipe in result.recipes:
        knobs = recipe_knobs(recipe)
        conditions = "; ".join(upstream_text(r.msg, titles, None).rstrip(".") for r in recipe.preconditions)
        if knobs:
            lines.append(f"- {recipe.title}: yes, it is turned on by " + ", ".join(f"`{k}`" for k in knobs) + ".")
        else:
            lines.append(f"- {recipe.title}: no new option, environment variable or configuration key; the new path is "
                         "taken automatically where it applies, and the existing path runs otherwise.")
        if conditions:
            lines.append(f"  It is correct under these conditions: {conditions}.")
    return "\n".join(lines)


# --------------------------------------------------------------------------- how tested


def _tested(catalog, result, titles) -> str:
    from optkit.versions.export import test_command

    lines = []
    if result.tests:
        lines += ["New unit tests (CPU, in `tests/ut`): " + ", ".join(f"`{t}`" for t in result.tests) + ".", "",
                  "```", " ".join(test_command(result.tests)), "```", ""]
        lines += _runs(result)
    for recipe in result.recipes:
        lines += [f"**{recipe.title}**", ""]
        cpu = sorted(set(re.findall(r"tests/cpu/[\w./-]+\.py", recipe.verification.notes)))
        level = recipe.verification.level.value if hasattr(recipe.verification.level, "value") else recipe.verification.level
        if cpu:
            lines.append("- CPU equivalence (optkit's own test suite, which runs the patched and the pristine vllm-ascend "
                         f"{result.version} code on CPU): " + ", ".join(f"`{c}`" for c in cpu)
                         + f"; optkit's verification level for this change: {level}.")
        lines += ["- Compatibility (the patch on each release of the range it was written for): "
                  + "; ".join(_compat_rows(catalog, recipe, result.verdicts[recipe.id])) + "."]
        if recipe.verification.needs_npu:
            lines.append("- Not verified here: anything that needs an Ascend NPU (timings, device kernels); "
                         "the numbers above are labelled with where they come from.")
        risks = [_risk(r, result.version, titles) for r in recipe.risks]
        risks = [r for r in risks if r]
        if risks:
            lines += ["- Risks a reviewer should weigh:"] + [f"  - {r}" for r in risks]
        lines.append("")
    return "\n".join(lines)


def _runs(result) -> list[str]:
    if not result.runs:
        return ["Run it from the repository root with the CPU torch; it fails on the base commit (the code it tests is "
                "not there) and passes with this series. `--noconftest`: `tests/ut/conftest.py` needs vLLM and the NPU "
                "stubs, which these tests do not use; it also passes under the conftest in upstream's CI.", ""]
    where = {"base": "on the base commit (without the series)", "series": "with the series"}
    return [f"Ran on CPU by the exporter: {where[r.where]}: {'passed' if r.passed else 'failed'} "
            f"(exit {r.returncode}: {r.summary})." for r in result.runs] + [""]


def _risk(risk, version: str, titles) -> str:
    severity = risk.severity.value if hasattr(risk.severity, "value") else risk.severity
    text = f"{severity}: {upstream_text(risk.text, titles, None)}"
    if not risk.when:
        return text
    condition = compiled(risk.when)
    if set(condition.fact_names()) == {"versions.vllm_ascend"}:
        return text if condition.evaluate({"versions.vllm_ascend": Version(version)}) else ""
    return f"{text} (when {risk.when})"


def _compat_rows(catalog, recipe, found) -> list[str]:
    from optkit.tree.fetch import fetch
    from optkit.versions.compat import patch_cell, patched_base

    rows = []
    for file in found.patches:
        spec = recipe.patch_versions(file)
        releases = [str(v) for v in known_versions() if in_range(v, spec)]
        with tempfile.TemporaryDirectory(prefix="optkit-export-compat-") as scratch:
            base = lambda: patched_base(catalog, recipe, file, releases[0], fetch(releases[0]).path, Path(scratch))  # noqa: E731
            cells = [patch_cell(catalog, recipe, file, v, fetch(v).path, base) for v in releases]
        rows.append(f"`{file}`: " + ", ".join(f"{c.version} {c.result}" for c in cells))
    return rows


def leftover_words(text: str, catalog) -> list[str]:
    """Recipe ids or 'optkit' left in a PR text outside its testing section (where optkit's own
    tests are named on purpose)."""
    head = text.split("### How was this patch tested?")[0]
    return optkit_words(head, [r.id for r in catalog])
