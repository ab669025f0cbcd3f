"""Rendering for people: plans, explanations, the recipe list, the compatibility matrix, ladders and
reports, as text (``optkit.cli.table``).

Each report is built as a list of blocks (a line of text, or a ``Table``); ``show`` lays them out
140 cells wide and writes them, in ASCII where the output's encoding has no box-drawing or
typographic characters. Imported only by the CLI, only when output is drawn.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Union

from optkit.cli.table import ASCII, HEAVY_HEAD, WIDTH, Table, render_table, to_ascii, wrap

if TYPE_CHECKING:  # the resolver is imported where a plan is drawn, not for `optkit recipes`
    from optkit.resolve.plan import Plan

Block = Union[str, Table]


def _not_selected_order() -> list:
    """Statuses of the recipes a plan leaves out, in the order the report lists them."""
    from optkit.resolve.resolver import Status

    return [Status.upstream, Status.objective, Status.no_effect, Status.regresses, Status.needs_opt_in,
            Status.unavailable, Status.no_patch, Status.knob_missing, Status.superseded, Status.broken,
            Status.absent, Status.excluded, Status.user_excluded, Status.not_applicable]


def plan_report(plan: Plan, catalog, verbose: bool = False, records=None) -> list[Block]:
    from optkit.catalog.records import effective_level
    from optkit.resolve.plan import count_by_status
    from optkit.resolve.resolver import Status

    r = plan.request
    where = f", tree {plan.release.tree}" if plan.release is not None and plan.release.tree else ""
    shape = plan.layout.summary + (f" per instance, {plan.pd.summary}" if plan.pd else "")
    blocks: list[Block] = [
        f"optkit plan: {plan.model.id} on {plan.target.id} ({shape}, {r.dtype}, vllm-ascend "
        f"{plan.facts['versions.vllm_ascend']}{where}, {_speculation(r)}, concurrency "
        f"{','.join(map(str, r.concurrency))})"]
    blocks += weights_lines(plan) + model_code_lines(plan) + model_support_lines(plan)
    blocks += [*assumptions_lines(plan), *_fit(plan)]
    selected = Table("Selected recipes (dependency order)", ["recipe", "kind", "why", "verification"])
    for rid in plan.selected:
        d, recipe = plan.resolution.decisions[rid], catalog[rid]
        why = (d.reason + (f" — {'; '.join(d.chain)}" if d.chain else "") + "".join(f" [{n}]" for n in d.notes)
               + _assumes(plan, d))
        selected.add_row(rid, recipe.kind.value, why, effective_level(recipe, records).value)
    rest = Table("Not selected", ["recipe", "status", "reason"])
    for status in _not_selected_order():
        for rid, d in sorted(plan.resolution.decisions.items()):
            if d.status is status and (verbose or status is not Status.not_applicable):
                facts = ", ".join(f"{k} = {v}" for k, v in d.facts.items())
                rest.add_row(rid, status.value, d.reason + (f" [{facts}]" if facts else "")
                             + "".join(f" [{n}]" for n in d.notes) + _assumes(plan, d))
    counts = count_by_status(plan)
    totals = (f"Totals: {counts.pop('selected', 0)} selected of {len(plan.resolution.decisions)}; "
              + ", ".join(f"{n} {status}" for status, n in counts.items()))
    return [*blocks, *_objective(plan), *_page_advice(plan), *_choices(plan), selected, rest, totals, *_derived(plan),
            *_estimates(plan)]


def _fit(plan: Plan) -> list[Block]:
    """The plan's fit line (``Plan.fit``, ``optkit.resolve.fit``)."""
    return [plan.fit.line()] if plan.fit is not None else []


def _speculation(request) -> str:
    """The speculative decoding of the header: 'MTP k=4', 'eagle3 k=3', 'dflash k=15', 'MTP off' when there is none."""
    method = request.speculative_method
    return f"{'MTP' if method == 'mtp' else method} k={request.k}" if method else "MTP off"


def weights_lines(plan: Plan) -> list[Block]:
    """The weights served when they are not the profile's own bf16 ones (``optkit.resolve.report.weights_data``)."""
    from optkit.resolve.report import weights_data

    weights = weights_data(plan).get("weights")
    if weights is None:
        return []
    checkpoint = weights["checkpoint"]
    named = f"checkpoint {checkpoint['id']} ({checkpoint['source']})" if checkpoint else "your own weights"
    launched = ", served with --quantization ascend" if weights["quantization"] != "bf16" else ""
    return [f"Weights: {weights['quantization']}, {named}{launched}"] + (
        [f"warning: {weights['warning']}"] if weights["warning"] else [])


def model_support_lines(plan: Plan) -> list[Block]:
    """Where the release registers the model's architecture nowhere (``optkit.resolve.report.model_support_data``)."""
    from optkit.resolve.report import model_support_data

    support = model_support_data(plan).get("model_support")
    return [f"Model support: {support['why']}"] if support else []


def model_code_lines(plan: Plan) -> list[Block]:
    """The checkpoint's own config code, when it ships some (``optkit.resolve.report.model_code_data``)."""
    from optkit.resolve.report import model_code_data

    code = model_code_data(plan).get("model_code")
    if code is None:
        return []
    return [f"Model code: config.json's auto_map names the checkpoint's own config class {code['config_class']}: the "
            f"launch passes {code['flag']}, which runs that code (read the checkpoint's .py files first); vLLM refuses "
            "such a checkpoint without it where neither vLLM nor transformers registers its model_type"]


def assumptions_lines(plan: Plan) -> list[Block]:
    """The workload the selection assumes (``optkit.resolve.assumptions``), one line."""
    return ["Workload assumed: " + "; ".join(a.text() for a in plan.assumptions)] if plan.assumptions else []


def _assumes(plan: Plan, d) -> str:
    """The workload defaults a decision rests on, with the flag that changes each."""
    from optkit.resolve.assumptions import assumes_note

    note = assumes_note(plan.assumptions, d.assumes)
    return f" [{note}]" if note else ""


def _choices(plan: Plan) -> list[Block]:
    """The request fields left open and what filled them in (``optkit.resolve.choices``)."""
    if not plan.choices:
        return []
    return ["Chosen for the fields the request left open (rules, unquantified):",
            *(f"  {c.text()}" for c in plan.choices)]


def _page_advice(plan: Plan) -> list[Block]:
    """What the model's tutorial page advises for the scenario, each value with its page line
    (``optkit.resolve.page_rules``): the source of the ``page.*`` facts the rules below read."""
    lines = list(plan.page_advice.lines()) if plan.page_advice is not None else []
    lines += [f"  left out: {why}" for why in plan.page_unread]
    for role_plan in plan.roles.values():  # --pd: each role's own command on the page
        lines += role_plan.page_advice.lines() + [f"  left out: {why}" for why in role_plan.page_unread]
        lines += [f"  not in the {role_plan.page_advice.role} role: {rid}: {why}"
                  for rid, why in role_plan.role_left_out.items()]
    return lines


def _objective(plan: Plan) -> list[Block]:
    """The goal and the SLO, when the request names either or the goal is not the article's (latency); each SLO
    bound against the plan's own estimate (``Plan.slo_checks``)."""
    lines = _objective_line(plan)
    lines = lines + [f"  SLO check: {check.text}" for check in plan.slo_checks] if lines else lines
    tuned = getattr(plan, "tuned", None)
    if tuned is not None:
        lines.append(f"Tune record {tuned.file}: " + (f"{', '.join(tuned.fields)} from it, {tuned.label}" if tuned.applied
                                                      else tuned.note))
    return lines


def _objective_line(plan: Plan) -> list[Block]:
    facts = plan.facts
    if not facts["objective.slo"] and facts["objective.goal"] == "latency" and not plan.request.goal:
        return []
    slo = f"under SLO {facts['objective.slo']}" if facts["objective.slo"] else "with no SLO given"
    if plan.capacity is not None:
        return [f"Objective: {facts['objective.goal']} {slo}: {plan.capacity.text()}"]
    if plan.request.set_source:  # --from-tune: the launch values were measured, the layout with them
        return [f"Objective: {facts['objective.goal']} {slo}: the launch optkit tune measured best, "
                f"{plan.request.set_source}"]
    if any(gain is not None and gain.capacity is not None for gain in map(plan.gain, plan.selected)):
        return [f"Objective: {facts['objective.goal']} {slo} (no record measured this selection's capacity "
                "under it; the recipes whose gain says \"measured capacity\" were measured under it, the other choices "
                "rest on rules, unquantified)"]
    return [f"Objective: {facts['objective.goal']} {slo} (nothing here measures the SLO or throughput: "
            "values chosen for the goal rest on rules, unquantified; a run on an NPU host checks them)"]


def _derived(plan: Plan) -> list[Block]:
    """The launch values recipes computed from the request (optkit explain RECIPE says why)."""
    if not plan.derivations:
        return []
    lines: list[Block] = ["Values derived from the request (by rule; no measured number backs them unless said):"]
    for d in plan.derivations:
        lines.append(f"  {derivation_text(d)}")
    for role, role_plan in plan.roles.items():  # --pd: a role's own page facts can derive another value
        mine = [d for d in role_plan.derivations if (d.target, str(d.value)) not in
                {(p.target, str(p.value)) for p in plan.derivations}]
        lines += [f"  the {role} role: {derivation_text(d)}" for d in mine]
    return lines


def derivation_text(d) -> str:
    """``--max-num-seqs = 64 (sched-…): ceil_div(…) = 64``."""
    key = d.target.split(":", 1)[1]
    shown = ",".join(map(str, d.value)) if isinstance(d.value, list) else d.value
    return f"{key} = {shown} ({d.recipe}): {d.how}"


def _estimates(plan: Plan) -> list[Block]:
    lines = ["TPOT estimate (ESTIMATE from the article's reported numbers; the gains were measured stacked one "
             "after another and are not strictly additive):"]
    for e in plan.estimates:
        if e.estimate_ms is None:
            lines.append(f"  c{e.concurrency}: expected saving {e.saved_ms:.2f} ms; {e.basis}")
        else:
            lines.append(f"  c{e.concurrency}: {e.baseline_ms} ms baseline − {e.saved_ms:.2f} ms ≈ "
                         f"{e.estimate_ms:.2f} ms ({e.basis})")
        if e.note:
            lines.append(f"    {e.note}")
    return lines


def explain_report(plan: Plan, catalog, recipe_ids: list[str]) -> list[Block]:
    from optkit.resolve.classify import risks_that_hold
    from optkit.resolve.resolver import describe_benefit

    lines: list[Block] = [*assumptions_lines(plan), *_fit(plan), *_objective(plan), *_page_advice(plan), *_choices(plan)]
    for rid in recipe_ids:
        d, recipe = plan.resolution.decisions[rid], catalog[rid]
        lines += [f"{rid}: {d.status.value}", f"  {d.reason}"]
        if d.rule:
            lines.append(f"  rule: {d.rule}")
        lines += [f"  fact: {name} = {value}" for name, value in d.facts.items()]
        lines += [f"  {link}" for link in d.chain]
        lines += [f"  on this release: {note}" for note in d.notes]
        if d.assumes:
            from optkit.resolve.assumptions import assumes_note

            lines.append(f"  {assumes_note(plan.assumptions, d.assumes)}")
        if d.forced:
            lines.append(f"  forced: {d.forced}")
        gain, would = plan.gain(rid), plan.gain_if_selected(rid)
        if gain is not None and not d.reason.startswith("expected gain"):
            lines.append(f"  expected gain: {describe_benefit(gain)}")
        if would is not None:
            lines.append(f"  if selected: {describe_benefit(would)}")
        lines += [f"  risk ({risk.severity}): {' '.join(risk.text.split())}" for risk in risks_that_hold(recipe, plan.facts)]
        for derived in (x for x in plan.derivations if x.recipe == rid):
            basis = {"rule": "a rule, unquantified: no measured number for this value",
                     "set": "the rule's value replaced by the request's --set"}.get(derived.basis, "measured")
            lines += [f"  sets {derivation_text(derived)}", f"    because {derived.why} ({basis})"]
        lines += _tutorial_lines(recipe, str(plan.facts["versions.vllm_ascend"]))
    return lines


def _tutorial_lines(recipe, release: str) -> list[str]:
    """The recipe's cited tutorial lines in the release planned for; elsewhere, which releases say so."""
    here = [t for t in recipe.tutorials if t.release == release]
    lines = [f"  upstream {t.release}: {t.file}:{t.line} — {t.supports}" for t in here]
    claims = {t.supports for t in here}
    others: dict[str, list[str]] = {}
    for t in recipe.tutorials:
        if t.supports not in claims:
            others.setdefault(t.supports, []).append(t.release)
    lines += [f"  upstream, not in {release}'s tutorials: {claim} (cited for {', '.join(releases)})"
              for claim, releases in others.items()]
    return lines


def recipes_table(catalog, records) -> list[Block]:
    from optkit.catalog.markdown import measured_text
    from optkit.catalog.records import effective_level

    table = Table(f"{len(catalog)} recipes", ["id", "kind", "upstream (0.23.0)", "verification", "needs NPU", "measured"])
    for recipe in catalog:
        measured = "; ".join(f"{measured_text(e.measurement)} (record {e.name})" for e in records.of(recipe.id))
        table.add_row(recipe.id, recipe.kind.value, recipe.upstream()[0],
                      effective_level(recipe, records).value, "yes" if recipe.verification.needs_npu else "no",
                      measured or "—")
    return [table, *(f"refused record: {refusal}" for refusal in records.refused)]


def compat_tables(matrix) -> list[Block]:
    """optkit compat: patches × releases and knobs × releases, marks as in docs/compat.md."""
    from optkit.versions.markdown import KNOB_MARK, PATCH_MARK

    cells = {(c.recipe, c.patch, c.version): c for c in matrix.patches}
    patches = Table("patches × releases (✓ clean, ✓~ offset, F fuzz, ✗ conflict, – target missing, U upstream, "
                    "S superseded)", ["recipe", "patch", *matrix.versions])
    for recipe, patch in sorted({(c.recipe, c.patch) for c in matrix.patches}):
        patches.add_row(recipe, patch.removesuffix(".patch"),
                        *(PATCH_MARK[cells[(recipe, patch, v)].result] for v in matrix.versions))
    knobs = {(c.knob, c.version): c for c in matrix.knobs}
    table = Table("knobs × releases (✓ present, + added by patch, → renamed/moved, ✗ removed, R rejected, I ignored)",
                  ["knob", *matrix.versions])
    for knob in sorted({c.knob for c in matrix.knobs}):
        table.add_row(knob, *(KNOB_MARK[knobs[(knob, v)].state] for v in matrix.versions))
    return [patches, table, "details: optkit compat --json, or docs/compat.md"]


def ladder_report(data: dict) -> list[Block]:
    """The steps of a ladder (ladder.json) and what running it costs."""
    table = Table(f"{data['mode']} ladder, {data['order']} order: {data['model']} on {data['target']}",
                  ["step", "runs", "compared with", "tree", "kernels"])
    applied, built = "none", "none"
    for s in data["steps"]:
        what = {"baseline": "the release's defaults" + (f" + {', '.join(s['recipes'])} (implied)" if s["recipes"] else ""),
                "full": f"the whole plan ({len(s['recipes'])} recipes)", "add": "+ " + " + ".join(s["changes"]),
                "without": "the plan − " + " − ".join(s["changes"])}[s["kind"]]
        tree = "re-patch" if s["patch_key"] != applied else "—"
        kernels = "rebuild" if s["kernel_key"] != built else "—"
        applied, built = s["patch_key"], s["kernel_key"]
        table.add_row(s["id"], what, s["reference"] or "—", tree, kernels)
    blocks: list[Block] = [table]
    blocks += [f"  {s['id']}: {rid} moves with it — {why}" for s in data["steps"] for rid, why in s["together"].items()]
    blocks += [f"  not a step: {rid} — {why}" for rid, why in data["inert"].items()]
    c = data["cost"]
    blocks.append(f"Cost: {c['steps']} steps × {data['repeat']} repeat(s) = {c['server_starts']} server "
                  f"starts, {c['tree_applies']} tree applies ({c['tree_reverts']} reverts), "
                  f"{c['kernel_rebuilds']} kernel rebuild{'' if c['kernel_rebuilds'] == 1 else 's'}")
    blocks += _sweep_cost(data)
    if "duration" in data:  # optkit.measure.duration: an estimate with its basis
        blocks.append(data["duration"]["text"])
    return blocks


def _sweep_cost(data: dict) -> list[Block]:
    """The capacity sweep's line of ``optkit ladder`` (with --sweep)."""
    sweep = data.get("sweep")
    if not sweep:
        return []
    return [f"Capacity sweep per run: the highest concurrency meeting {sweep['slo']}, c{sweep['low']}…c{sweep['high']} "
            f"to within {sweep['resolution']:g}, at most {sweep['max_probes']} probes of max({sweep['prompts_per_concurrency']} "
            f"× c, {sweep['min_prompts']}) requests each, on the step's server start"]


def capacity_summary(report) -> list[Block]:
    """The report's capacity per step and per recipe on the terminal (with a capacity sweep)."""
    if getattr(report, "capacity", None) is None:
        return []
    from optkit.measure.sweep import bracket_text

    table = Table(f"Capacity under {report.ladder['sweep']['slo']}: the highest concurrency meeting it",
                  ["step", "capacity", "bracket", "outcome"])
    for step, cap in report.capacity.items():
        table.add_row(step, "—" if cap.capacity is None else str(cap.capacity),
                      "—" if cap.capacity is None else bracket_text(cap.capacity, cap.upper),
                      cap.status)
    blocks: list[Block] = [table]
    blocks += [f"  {a.step}: Δ capacity {a.capacity.value:+d} ({a.capacity.verdict.replace('-', ' ')})"
               if a.capacity.value is not None else f"  {a.step}: no Δ capacity: {a.capacity.why_unavailable}"
               for a in report.attributions if a.capacity is not None and (a.capacity.value is not None
                                                                            or "died" in a.capacity.why_unavailable)]
    return blocks


def report_summary(report) -> list[Block]:
    """The report's attribution, gate and issues on the terminal (the files hold the rest)."""
    table = Table(f"Per-recipe attribution ({report.ladder['mode']} ladder): Δ mean TPOT, ms",
                  ["step", "recipe(s)", *[f"c{c}" for c in report.concurrencies]])
    for a in report.attributions:
        cells = []
        for c in report.concurrencies:
            d = a.deltas[c]
            cells.append("—" if d.value is None else f"{d.value:+.3f} ± {d.noise:.3f} {d.verdict.replace('-', ' ')}")
        table.add_row(a.step, " + ".join(a.recipes), *cells)
    blocks: list[Block] = [table]
    blocks += [f"  flagged: {flag}" for a in report.attributions for flag in a.flags]
    blocks += capacity_summary(report)
    blocks.append(f"Accuracy gate: {'PASSED' if report.gate.passed else 'FAILED'}")
    blocks += [f"  - {failure}" for failure in report.gate.failures]
    blocks += [f"issue: {issue}" for issue in report.issues]
    return blocks


def layout(blocks: list[Block], encoding: str = "utf-8") -> str:
    """The blocks as text ``WIDTH`` cells wide, in characters ``encoding`` can write.

    Without box-drawing characters in the encoding: the ASCII box and ``to_ascii`` text; a
    character the encoding still lacks becomes '?' (before layout, so the columns stay aligned).
    """
    boxes = _can_encode(BOX_CHARS, encoding)
    fit = (lambda text: _encodable(text, encoding)) if boxes else (lambda text: _encodable(to_ascii(text), encoding))
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            rows = [[fit(cell) for cell in row] for row in block.rows]
            block = Table(fit(block.title), [fit(header) for header in block.headers], rows)
            lines += render_table(block, HEAVY_HEAD if boxes else ASCII)
        else:
            lines += wrap(fit(block), WIDTH)
    return "".join(line + "\n" for line in lines)


def show(blocks: list[Block]) -> None:
    """Write the blocks to stdout, in what its encoding can write."""
    sys.stdout.write(layout(blocks, getattr(sys.stdout, "encoding", None) or "utf-8"))
    sys.stdout.flush()


BOX_CHARS = HEAVY_HEAD.top + HEAVY_HEAD.head + HEAVY_HEAD.separator + HEAVY_HEAD.row + HEAVY_HEAD.bottom


def _can_encode(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _encodable(text: str, encoding: str) -> str:
    """``text``, with '?' for each character ``encoding`` cannot write."""
    if text.isascii() or _can_encode(text, encoding):
        return text
    return "".join(char if _can_encode(char, encoding) else "?" for char in text)
