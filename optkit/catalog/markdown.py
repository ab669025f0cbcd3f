"""Markdown generated from the catalog: ``docs/catalog.md`` and ``optkit show``."""

from __future__ import annotations

import json

from optkit.catalog.loader import Catalog


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _rules(title: str, rules) -> list[str]:
    if not rules:
        return []
    return [f"**{title}**", ""] + [f"- `{r.when}` — {_one_line(r.msg)}" for r in rules] + [""]


def _links(title: str, links) -> list[str]:
    if not links:
        return []
    lines = [f"**{title}**", ""]
    for link in links:
        cond = f" when `{link.when}`" if link.when else ""
        unless = f" unless {', '.join(link.unless)} is selected" if link.unless else ""
        lines.append(f"- `{link.recipe}`{cond}{unless} — {_one_line(link.msg)}")
    return lines + [""]


def _gain(g) -> str:
    where = f"c{g.concurrency}" if g.concurrency else "any concurrency"
    mode = {True: "MTP on", False: "MTP off", None: "MTP unspecified"}[g.mtp]
    value = f"{g.before:g} → {g.after:g}" if g.before is not None and g.after is not None else f"{g.delta:+g}"
    return f"- {g.metric} {value} {g.unit} ({where}, {mode}, {g.dataset}) — 「{g.quote}」"


def _launch(recipe) -> list[str]:
    lines = []
    for env in recipe.env:
        note = " (external: vLLM, CANN/HCCL, PyTorch or the host)" if env.external else ""
        note += " (build time)" if env.build_time else ""
        lines.append(f"- env `{env.name}={env.value}`{note}")
    for field in ("additional_config", "compilation_config", "speculative_config"):
        value = getattr(recipe, field)
        if value:
            lines.append(f"- {field} `{json.dumps(value, sort_keys=True, ensure_ascii=False)}`")
    lines.extend(f"- serve arg `{arg}`" for arg in recipe.serve_args)
    lines.extend(f"- derived `{d.set}` = `{json.dumps(d.value, ensure_ascii=False)}` ({d.basis}) — {_one_line(d.why)}"
                 for d in recipe.derived)
    lines.extend(f"- chooses `{c.field}` = `{json.dumps(c.value, ensure_ascii=False)}` when left open and `{_one_line(c.when)}` "
                 f"(rule) — {_one_line(c.why)}" for c in recipe.choices)
    return (["**Launch settings**", ""] + lines + [""]) if lines else []


def _tutorials(recipe) -> list[str]:
    """The cited tutorial lines, one item per file and claim, each release's line number."""
    if not recipe.tutorials:
        return []
    grouped: dict[tuple[str, str], list[str]] = {}
    for t in recipe.tutorials:
        grouped.setdefault((t.file, t.supports), []).append(f"{t.release}:{t.line}")
    lines = ["**Upstream's tutorials** (file:line per release, checked by `optkit lint --trees`)", ""]
    lines += [f"- `{file}` — {supports}: {', '.join(where)}" for (file, supports), where in grouped.items()]
    return lines + [""]


def measured_text(measurement) -> str:
    """``c1 −1.2 ms (gain), c4 +0.01 ms (no measurable effect)``: a measurement's deltas in words."""
    return ", ".join(f"c{c} {delta:+.3g} ± {measurement.noise_ms[c]:.2g} ms ({measurement.verdict[c].replace('-', ' ')})"
                     for c, delta in sorted(measurement.tpot_delta_ms.items()))


def _measured(records, recipe_id: str) -> list[str]:
    if records is None:
        return []
    lines = [f"- {e.label}: {measured_text(e.measurement)}"
             + (f", together with {', '.join(e.measurement.together_with)}" if e.measurement.together_with else "")
             for e in records.of(recipe_id)]
    lines += [f"- refused: {r}" for r in records.refused if r.recipe in (recipe_id, None)]
    return (["**Measured (verified/)**", ""] + lines + [""]) if lines else []


def recipe_markdown(catalog: Catalog, recipe_id: str, records=None) -> str:
    """One recipe as Markdown; with ``records`` (``optkit show``) also its measurements and refusals."""
    r = catalog[recipe_id]
    p = r.provenance
    lines = [f"### {r.id}", "", f"**{r.title}** — kind `{r.kind.value}`", "", _one_line(r.summary), "",
             f"- Article: part {p.article.part}, {p.article.section} — 「{_one_line(p.article.quote)}」",
             f"- Seed map: {p.seed_map}; upstream in 0.23.0: **{r.upstream()[0]}**"
             + (f" (since {r.upstream()[1]})" if r.upstream()[1] else ""),
             f"- Evidence: {_one_line(p.upstream.evidence)}",
             f"- Versions: vllm-ascend `{r.versions.vllm_ascend}`, vLLM `{r.versions.vllm}`",
             f"- Verification: **{r.verification.level.value}**"
             + ("; needs an NPU for full verification" if r.verification.needs_npu else "")
             + (f" — {_one_line(r.verification.notes)}" if r.verification.notes else ""), ""]
    if r.implied_by:
        lines += [f"Selected whenever `{r.implied_by}`.", ""]
    if r.accuracy:
        margin = f", within {r.accuracy.margin:g} points of exact-match accuracy" if r.accuracy.margin else ""
        lines += [f"**Accuracy claim**: {r.accuracy.check}{margin} — {_one_line(r.accuracy.why)}", ""]
    lines += _rules("Preconditions (correctness)", r.preconditions)
    lines += _rules("Pays off when", r.effective_when)
    lines += _links("Requires", r.requires) + _links("Conflicts", r.conflicts)
    lines += _launch(r)
    lines += _tutorials(r)
    if r.patches:
        lines += ["**Patches**", ""]
        lines += [f"- `{pt.file}` ({pt.status}) → {', '.join(f'`{t}`' for t in pt.targets)} — {_one_line(pt.description)}"
                  for pt in r.patches] + [""]
    if r.releases:
        lines += ["**Per release** (probed on every release by `optkit tree inspect`; see docs/versions.md)", ""]
        lines += [f"- `{e.versions}`: **{e.status}** — {_one_line(e.msg)}"
                  + (f"; patches: {', '.join(f'`{f}`' for f in e.patches)}" if e.patches else "")
                  + (f"; in plans: {_one_line(e.note)}" if e.note else "") for e in r.releases] + [""]
    if r.signatures:
        lines += ["**In a profile** (what `optkit profile` looks for; docs/profile.md)", ""]
        lines += [f"- {_signature(s)}: {_one_line(s.msg)}" for s in r.signatures] + [""]
    if r.kernels:
        lines += ["**Kernels**: " + ", ".join(f"`kernels/{k}`" for k in r.kernels), ""]
    if r.gains:
        lines += ["**Reported gains**", ""] + [_gain(g) for g in r.gains] + [""]
    lines += _measured(records, recipe_id)
    if r.risks:
        lines += ["**Risks**", ""]
        lines += [f"- {risk.severity}: {_one_line(risk.text)}" + (f" (when `{risk.when}`)" if risk.when else "")
                  for risk in r.risks] + [""]
    return "\n".join(lines)


def catalog_markdown(catalog: Catalog) -> str:
    """The whole catalog as one page (``optkit docs`` writes it; a test checks it is current)."""
    lines = ["# Recipe catalog", "",
             "Generated by `optkit docs` from `recipes/*/recipe.yaml`; do not edit by hand.", "",
             "Verification levels, weakest first: declared (catalog entry only), config-checked (keys and "
             "variables exist in the real 0.23.0 tree), applies (patches apply to the real tree), compiles "
             "(patched Python compiles and passes pyflakes), cpu-reference (logic tested on CPU against a "
             "reference), hardware-verified (measured on an Ascend NPU: reached only through a measurement "
             "record in verified/, never declared). Nothing here is hardware-verified: this project has no NPU.", "",
             "| id | kind | upstream (0.23.0) | verification | needs NPU | patches |", "|---|---|---|---|---|---|"]
    for r in catalog:
        patches = f"{sum(p.status == 'present' for p in r.patches)}/{len(r.patches)} written" if r.patches else "—"
        lines.append(f"| [{r.id}](#{r.id}) | {r.kind.value} | {r.upstream()[0]} | "
                     f"{r.verification.level.value} | {'yes' if r.verification.needs_npu else 'no'} | {patches} |")
    lines += ["", "## Recipes", ""]
    for r in catalog:
        lines += [recipe_markdown(catalog, r.id), ""]
    return "\n".join(lines).rstrip() + "\n"


def _signature(s) -> str:
    """One signature in words: what, how many per step, on which releases, when."""
    what = " ".join(x for x in (f"type `{s.type}`" if s.type else "", f"`{s.name}`" if s.name else "") if x)
    what = ("host call " if s.what == "host-call" else "kernel ") + what
    what += f" with a {s.input_dim} input" if s.input_dim else ""
    count = f"{s.count} per {s.layers.replace('_', '-')} layer" if s.per == "layer" else f"{s.count} per step"
    extra = "" if s.versions == ">=0" else f", releases `{s.versions}`"
    extra += f", only when `{s.when}`" if s.when else ""
    return f"{what}, {count} ({s.effect}{extra})"
