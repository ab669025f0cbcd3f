"""``DIR/PR.md`` of ``optkit export``: the pull-request text in the form of the tree's own template.

The sections are read from ``.github/PULL_REQUEST_TEMPLATE.md`` of the exported tree (its ``###``
headings, in its order; the template's comments are the instructions and are replaced); the three
upstream asks for are filled from the patch entries of the release the series is for
(``release_text``: one value, rendered here and checked by tests/test_invariants_export.py):

- *what / why*: the patch entry's ``summary`` (else the recipe's summary and what the release already
  has), rewritten for upstream as the commit messages are; its numbers (the entry's ``gains``, else
  the recipe's, labelled as the article's) and ``evidence``; numbers measured on an NPU host on that
  release (accepted ``verified/`` records) when there are any;
- *user-facing change*: the knobs the recipe sets, else none, with its preconditions;
- *how tested*: the exported unit tests and their command, their result on the base and on the
  series only when export ran them (``--run-tests``), the releases the series applies to
  (``optkit.versions.compat.patch_cell`` on every known release of the range it was written for),
  and the entry's risks (else the recipe's) that hold on the release.

PR.md speaks upstream's language: no recipe id, no optkit vocabulary, no path of this machine.
A heading the template has and optkit cannot fill keeps the template's comment, for a person to.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from optkit.catalog.conditions import compiled
from optkit.versions.export_words import article_name, optkit_words, title_prefix, upstream_text
from optkit.versions.onrelease import recipe_knobs
from optkit.versions.probes import in_range
from optkit.versions.releases import known_versions

TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"
_FALLBACK = ("### What this PR does / why we need it?\n\n### Does this PR introduce _any_ user-facing change?\n\n"
             "### How was this patch tested?\n")
_SECTIONS = (("what this pr does", "what"), ("user-facing", "user"), ("how was this patch tested", "tested"))
_CELLS = {"clean": "cleanly", "offset": "with line offsets", "fuzz": "with fuzz", "conflict": "does not apply",
          "upstream": "already has it"}
_MACHINE_PATH = re.compile(r"(?<![\w./~-])(?:~/|/)(?:[\w.+@-]+/)+([\w.+@-]*)")


@dataclass(frozen=True)
class ReleaseText:
    """What the pull request says of one recipe on one release, taken from the patch entries of that
    release's patch set (``Patch.summary``/``evidence``/``gains``/``risks``), the recipe's own where an
    entry leaves a field out."""

    summary: str
    already: str
    """What the release already has (its release entry is partly-upstream and no patch entry has a summary)."""
    gains: tuple
    evidence: str
    risks: tuple
    """The risks that hold on the release."""


def release_text(recipe, found, version: str) -> ReleaseText:
    """The pull-request text of ``recipe`` on ``version``, whose verdict ``found`` names its patch set."""
    entries = [p for p in recipe.patches if p.file in found.patches]
    summaries = [p.summary for p in entries if p.summary]
    partly = found.entry is not None and found.entry.status == "partly-upstream"
    gains = [p.gains for p in entries if p.gains is not None]
    risks = [p.risks for p in entries if p.risks is not None]
    return ReleaseText(
        summary="\n\n".join(summaries) or recipe.summary,
        already=found.entry.msg if partly and not summaries else "",
        gains=tuple(g for given in gains for g in given) if gains else tuple(recipe.gains),
        evidence="\n\n".join(p.evidence for p in entries if p.evidence),
        risks=tuple(r for given in (risks or [recipe.risks]) for r in given if _holds_on(r, version)))


def pr_markdown(catalog, result) -> str:
    """PR.md for the export ``result`` (``optkit.versions.export.Export``), read from its tree."""
    template = result.out / TEMPLATE
    paths = [p for c in result.commits for p in _commit_paths(result.out, c.sha)]
    compat = {r.id: _compat_rows(catalog, r, result.verdicts[r.id]) for r in result.recipes}
    return pr_text(catalog, result, template.read_text(encoding="utf-8") if template.is_file() else None, paths, compat)


def pr_text(catalog, result, template: str | None, paths: list[str], compat: dict[str, list[str]]) -> str:
    """PR.md from what the export made: the tree's ``template`` (None: the tree has none), the
    ``paths`` the series touches, the releases each recipe's series applies to (``compat``)."""
    titles = {r.id: r.title for r in catalog}
    texts = {r.id: release_text(r, result.verdicts[r.id], result.version) for r in result.recipes}
    fill = {"what": _what(catalog, result, texts, titles), "user": _user(result, titles),
            "tested": _tested(result, texts, compat, titles)}
    lines = [f"# {title_prefix(paths)} " + "; ".join(r.title for r in result.recipes), ""]
    if template is None:
        lines += [f"(the tree has no {TEMPLATE}; the sections are those of vllm-ascend's template)", ""]
    for heading, body in _template_sections(template or _FALLBACK):
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


def _what(catalog, result, texts, titles) -> str:
    lines = []
    for recipe in result.recipes:
        text = texts[recipe.id]
        lines += [f"**{recipe.title}**", "", upstream_text(text.summary, titles, None), ""]
        if text.already:
            lines += [f"What vllm-ascend {result.version} already has: "
                      f"{upstream_text(text.already, titles, None).rstrip('.')}.", ""]
        lines += _numbers(catalog, recipe, result.version, text, titles) + [""]
    fixes = sorted({line for c in result.commits for line in re.findall(r"^Bug: (.+)$", c.message, re.M)})
    lines += [f"- Fixes {bug}" for bug in fixes]
    return "\n".join(lines)


def _numbers(catalog, recipe, version: str, text: ReleaseText, titles) -> list[str]:
    from optkit.catalog.paths import project_root
    from optkit.catalog.records import load_records

    measured = [e for e in load_records(project_root(), catalog).of(recipe.id)
                if str(e.record.release.vllm_ascend) == version]
    lines = []
    if measured:
        lines += ["Measured on an Ascend NPU host:"] + [
            f"- {e.label}: TPOT change per concurrency "
            + ", ".join(f"c{c}: {d:+.2f} ms (noise {e.measurement.noise_ms.get(c, 0):.2f} ms, {e.measurement.verdict.get(c)})"
                        for c, d in sorted(e.measurement.tpot_delta_ms.items()))
            for e in measured]
    elif text.gains:
        lines += [f"Reported by {article_name(recipe.provenance)} (its numbers, measured on vllm-ascend 0.23.0, not "
                  "for this PR):"] + [f"- {_gain(g)}" for g in text.gains]
    if text.evidence:
        lines += ([""] if lines else []) + [upstream_text(text.evidence, titles, None)]
    return lines or ["No number has been measured for this change yet."]


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


def _tested(result, texts, compat, titles) -> str:
    from optkit.versions.export import test_command

    lines = []
    if result.tests:
        lines += ["New unit tests (CPU, in `tests/ut`): " + ", ".join(f"`{t}`" for t in result.tests) + ".", "",
                  "```", " ".join(test_command(result.tests)), "```", ""]
        lines += _runs(result)
    for recipe in result.recipes:
        lines += [f"**{recipe.title}**", ""]
        if re.search(r"tests/cpu/[\w./-]+\.py", recipe.verification.notes):
            lines.append(f"- Equivalence on CPU, outside this PR: the changed code of vllm-ascend {result.version} "
                         "was compared with the code it replaces (or a reference port of it) on randomized inputs.")
        if compat.get(recipe.id):
            lines.append("- Applies to (each release of the range it was written for): "
                         + "; ".join(compat[recipe.id]) + ".")
        if recipe.verification.needs_npu:
            lines.append("- Not verified here: anything that needs an Ascend NPU (timings, device kernels); "
                         "the numbers above say where they come from.")
        risks = [_risk(r, titles) for r in texts[recipe.id].risks]
        if risks:
            lines += ["- Risks a reviewer should weigh:"] + [f"  - {r}" for r in risks]
        lines.append("")
    return "\n".join(lines)


def _runs(result) -> list[str]:
    """What the exported tests did, only where the exporter ran them: no result is claimed otherwise."""
    if not result.runs:
        return ["Run it from the repository root with a CPU torch. `--noconftest`: `tests/ut/conftest.py` needs vLLM "
                "and the NPU stubs, which these tests do not use.", ""]
    where = {"base": "on the base commit (without the series)", "series": "with the series"}
    return [f"Ran on CPU by the exporter: {where[r.where]}: {'passed' if r.passed else 'failed'} "
            f"(exit {r.returncode}: {without_paths(r.summary)})." for r in result.runs] + [""]


def without_paths(text: str) -> str:
    """``text`` with every absolute path cut to its last part (PR.md holds no path of this machine)."""
    return _MACHINE_PATH.sub(lambda m: m[1] or "…", text)


def _holds_on(risk, version: str) -> bool:
    """A risk whose condition reads the release alone holds where it says; any other is kept (it says its condition)."""
    if not risk.when:
        return True
    condition = compiled(risk.when)
    if set(condition.fact_names()) == {"versions.vllm_ascend"}:
        return condition.evaluate({"versions.vllm_ascend": Version(version)})
    return True


def _risk(risk, titles) -> str:
    severity = risk.severity.value if hasattr(risk.severity, "value") else risk.severity
    text = f"{severity}: {upstream_text(risk.text, titles, None)}"
    if risk.when and set(compiled(risk.when).fact_names()) != {"versions.vllm_ascend"}:
        return f"{text} (when {risk.when})"
    return text


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
        rows.append(", ".join(f"vllm-ascend {c.version} ({_CELLS.get(c.result, c.result)})" for c in cells))
    if len(rows) > 1:
        rows = [f"patch {i}/{len(rows)}: {row}" for i, row in enumerate(rows, 1)]
    return rows


def leftover_words(text: str, catalog) -> list[str]:
    """Recipe ids or 'optkit' left anywhere in a PR text."""
    return optkit_words(text, [r.id for r in catalog])
