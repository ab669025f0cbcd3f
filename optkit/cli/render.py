"""Rendering for people (rich tables). Imported only by the CLI, only when output is drawn."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the resolver is imported where a plan is drawn, not for `optkit recipes`
    from optkit.resolve.plan import Plan


def _not_selected_order() -> list:
    """Statuses of the recipes a plan leaves out, in the order the report lists them."""
    from optkit.resolve.resolver import Status

    return [Status.upstream, Status.objective, Status.no_effect, Status.regresses, Status.needs_opt_in,
            Status.unavailable, Status.no_patch, Status.knob_missing, Status.superseded, Status.broken,
            Status.absent, Status.excluded, Status.user_excluded, Status.not_applicable]


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=140)


def plan_report(plan: Plan, catalog, verbose: bool = False, records=None) -> None:
    from rich.markup import escape  # reasons and notes are text: "[spec.mtp = false]" is no style tag
    from rich.table import Table

    from optkit.catalog.records import effective_level
    from optkit.resolve.resolver import Status

    console = _console()
    r = plan.request
    where = f", tree {plan.release.tree}" if plan.release is not None and plan.release.tree else ""
    console.print(f"[bold]optkit plan[/bold]: {plan.model.id} on {plan.target.id} "
                  f"({plan.layout.summary}, {r.dtype}, vllm-ascend {plan.facts['versions.vllm_ascend']}{where}, "
                  f"MTP {'k=' + str(r.k) if r.mtp else 'off'}, concurrency {','.join(map(str, r.concurrency))})")
    table = Table(title="Selected recipes (dependency order)", show_lines=False)
    for col in ("recipe", "kind", "why", "verification"):
        table.add_column(col, overflow="fold")
    for rid in plan.selected:
        d, recipe = plan.resolution.decisions[rid], catalog[rid]
        why = d.reason + (f" — {'; '.join(d.chain)}" if d.chain else "") + "".join(f" [{n}]" for n in d.notes)
        table.add_row(rid, recipe.kind.value, escape(why), effective_level(recipe, records).value)
    console.print(table)
    rest = Table(title="Not selected", show_lines=False)
    for col in ("recipe", "status", "reason"):
        rest.add_column(col, overflow="fold")
    for status in _not_selected_order():
        for rid, d in sorted(plan.resolution.decisions.items()):
            if d.status is status and (verbose or status is not Status.not_applicable):
                facts = ", ".join(f"{k} = {v}" for k, v in d.facts.items())
                rest.add_row(rid, status.value, escape(d.reason + (f" [{facts}]" if facts else "")
                                                       + "".join(f" [{n}]" for n in d.notes)))
    console.print(rest)
    from optkit.resolve.plan import count_by_status

    counts = count_by_status(plan)
    console.print(f"[bold]Totals[/bold]: {counts.pop('selected', 0)} selected of {len(plan.resolution.decisions)}; "
                  + ", ".join(f"{n} {status}" for status, n in counts.items()))
    _estimates(console, plan)


def _estimates(console, plan: Plan) -> None:
    console.print("[bold]TPOT estimate[/bold] (ESTIMATE from the article's reported numbers; the gains were "
                  "measured stacked one after another and are not strictly additive):")
    for e in plan.estimates:
        if e.estimate_ms is None:
            console.print(f"  c{e.concurrency}: expected saving {e.saved_ms:.2f} ms; {e.basis}")
        else:
            console.print(f"  c{e.concurrency}: {e.baseline_ms} ms baseline − {e.saved_ms:.2f} ms ≈ "
                          f"{e.estimate_ms:.2f} ms ({e.basis})")
        if e.note:
            console.print(f"    {e.note}")


def explain_report(plan: Plan, catalog, recipe_ids: list[str]) -> None:
    from optkit.resolve.resolver import describe_benefit

    console = _console()
    for rid in recipe_ids:
        d, recipe = plan.resolution.decisions[rid], catalog[rid]
        console.print(f"[bold]{rid}[/bold]: {d.status.value}")
        console.print(f"  {d.reason}")
        if d.rule:
            console.print(f"  rule: {d.rule}")
        for name, value in d.facts.items():
            console.print(f"  fact: {name} = {value}")
        for link in d.chain:
            console.print(f"  {link}")
        for note in d.notes:
            console.print(f"  on this release: {note}")
        if d.forced:
            console.print(f"  forced: {d.forced}")
        if d.benefit is not None and not d.reason.startswith("expected gain"):
            console.print(f"  expected gain: {describe_benefit(d.benefit)}")
        for risk in recipe.risks:
            console.print(f"  risk ({risk.severity}): {' '.join(risk.text.split())}")


def recipes_table(catalog, records) -> None:
    from rich.table import Table

    from optkit.catalog.markdown import measured_text
    from optkit.catalog.records import effective_level

    table = Table(title=f"{len(catalog)} recipes")
    for col in ("id", "kind", "upstream (0.23.0)", "verification", "needs NPU", "measured"):
        table.add_column(col, overflow="fold")
    for recipe in catalog:
        measured = "; ".join(f"{measured_text(e.measurement)} (record {e.name})" for e in records.of(recipe.id))
        table.add_row(recipe.id, recipe.kind.value, recipe.provenance.upstream.status.value,
                      effective_level(recipe, records).value, "yes" if recipe.verification.needs_npu else "no",
                      measured or "—")
    _console().print(table)
    for refusal in records.refused:
        _console().print(f"refused record: {refusal}", markup=False)


def text(lines: list[str]) -> None:
    _console().print("\n".join(lines), markup=False)


def compat_tables(matrix) -> None:
    """optkit compat: patches × releases and knobs × releases, marks as in docs/compat.md."""
    from rich.table import Table

    from optkit.versions.markdown import KNOB_MARK, PATCH_MARK

    console = _console()
    cells = {(c.recipe, c.patch, c.version): c for c in matrix.patches}
    table = Table(title="patches × releases (✓ clean, ✓~ offset, F fuzz, ✗ conflict, – target missing, U upstream, S superseded)")
    for col in ("recipe", "patch", *matrix.versions):
        table.add_column(col, overflow="fold")
    for recipe, patch in sorted({(c.recipe, c.patch) for c in matrix.patches}):
        table.add_row(recipe, patch.removesuffix(".patch"), *(PATCH_MARK[cells[(recipe, patch, v)].result] for v in matrix.versions))
    console.print(table)
    knobs = {(c.knob, c.version): c for c in matrix.knobs}
    table = Table(title="knobs × releases (✓ present, + added by patch, → renamed/moved, ✗ removed, R rejected, I ignored)")
    for col in ("knob", *matrix.versions):
        table.add_column(col, overflow="fold")
    for knob in sorted({c.knob for c in matrix.knobs}):
        table.add_row(knob, *(KNOB_MARK[knobs[(knob, v)].state] for v in matrix.versions))
    console.print(table)
    console.print("details: optkit compat --json, or docs/compat.md")


def ladder_report(data: dict) -> None:
    """The steps of a ladder (ladder.json) and what running it costs."""
    from rich.table import Table

    table = Table(title=f"{data['mode']} ladder, {data['order']} order: {data['model']} on {data['target']}")
    for col in ("step", "runs", "compared with", "tree", "kernels"):
        table.add_column(col, overflow="fold")
    applied, built = "none", "none"
    for s in data["steps"]:
        what = {"baseline": "the release's defaults" + (f" + {', '.join(s['recipes'])} (implied)" if s["recipes"] else ""),
                "full": f"the whole plan ({len(s['recipes'])} recipes)", "add": "+ " + " + ".join(s["changes"]),
                "without": "the plan − " + " − ".join(s["changes"])}[s["kind"]]
        tree = "re-patch" if s["patch_key"] != applied else "—"
        kernels = "rebuild" if s["kernel_key"] != built else "—"
        applied, built = s["patch_key"], s["kernel_key"]
        table.add_row(s["id"], what, s["reference"] or "—", tree, kernels)
    console = _console()
    console.print(table)
    for s in data["steps"]:
        for rid, why in s["together"].items():
            console.print(f"  {s['id']}: {rid} moves with it — {why}", markup=False)
    for rid, why in data["inert"].items():
        console.print(f"  not a step: {rid} — {why}", markup=False)
    c = data["cost"]
    console.print(f"[bold]Cost[/bold]: {c['steps']} steps × {data['repeat']} repeat(s) = {c['server_starts']} server "
                  f"starts, {c['tree_applies']} tree applies ({c['tree_reverts']} reverts), "
                  f"{c['kernel_rebuilds']} kernel rebuilds")


def report_summary(report) -> None:
    """The report's attribution, gate and issues on the terminal (the files hold the rest)."""
    from rich.table import Table

    console = _console()
    table = Table(title=f"Per-recipe attribution ({report.ladder['mode']} ladder): Δ mean TPOT, ms")
    for col in ("step", "recipe(s)", *[f"c{c}" for c in report.concurrencies]):
        table.add_column(col, overflow="fold")
    for a in report.attributions:
        cells = []
        for c in report.concurrencies:
            d = a.deltas[c]
            cells.append("—" if d.value is None else f"{d.value:+.3f} ± {d.noise:.3f} {d.verdict.replace('-', ' ')}")
        table.add_row(a.step, " + ".join(a.recipes), *cells)
    console.print(table)
    for a in report.attributions:
        for flag in a.flags:
            console.print(f"  flagged: {flag}", markup=False)
    gate = "[bold green]PASSED[/bold green]" if report.gate.passed else "[bold red]FAILED[/bold red]"
    console.print(f"[bold]Accuracy gate[/bold]: {gate}")
    for failure in report.gate.failures:
        console.print(f"  - {failure}", markup=False)
    for issue in report.issues:
        console.print(f"issue: {issue}", markup=False)
