"""Rendering for people: plans, explanations and the recipe list as text (``optkit.cli.table``).

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
            Status.unavailable, Status.excluded, Status.user_excluded, Status.not_applicable]


def plan_report(plan: Plan, catalog, verbose: bool = False) -> list[Block]:
    from optkit.resolve.plan import count_by_status
    from optkit.resolve.resolver import Status

    r = plan.request
    blocks: list[Block] = [
        f"optkit plan: {plan.model.id} on {plan.target.id} (TP{r.tp} DP{r.dp}, {r.dtype}, vllm-ascend "
        f"{plan.facts['versions.vllm_ascend']}, MTP {'k=' + str(r.k) if r.mtp else 'off'}, concurrency "
        f"{','.join(map(str, r.concurrency))})"]
    selected = Table("Selected recipes (dependency order)", ["recipe", "kind", "why", "verification"])
    for rid in plan.selected:
        d, recipe = plan.resolution.decisions[rid], catalog[rid]
        why = d.reason + (f" — {'; '.join(d.chain)}" if d.chain else "")
        selected.add_row(rid, recipe.kind.value, why, recipe.verification.level.value)
    rest = Table("Not selected", ["recipe", "status", "reason"])
    for status in _not_selected_order():
        for rid, d in sorted(plan.resolution.decisions.items()):
            if d.status is status and (verbose or status is not Status.not_applicable):
                facts = ", ".join(f"{k} = {v}" for k, v in d.facts.items())
                rest.add_row(rid, status.value, d.reason + (f" [{facts}]" if facts else ""))
    counts = count_by_status(plan)
    totals = (f"Totals: {counts.pop('selected', 0)} selected of {len(plan.resolution.decisions)}; "
              + ", ".join(f"{n} {status}" for status, n in counts.items()))
    return [*blocks, selected, rest, totals, *_estimates(plan)]


def _estimates(plan: Plan) -> list[Block]:
    lines = ["TPOT estimate (ESTIMATE from the article's reported numbers; the gains were measured stacked one "
             "after another and are not strictly additive):"]
    for e in plan.estimates:
        if e.estimate_ms is None:
            lines.append(f"  c{e.concurrency}: expected saving {e.saved_ms:.2f} ms; {e.basis}")
        else:
            lines.append(f"  c{e.concurrency}: {e.baseline_ms} ms baseline − {e.saved_ms:.2f} ms ≈ "
                         f"{e.estimate_ms:.2f} ms ({e.basis})")
    return lines


def explain_report(plan: Plan, catalog, recipe_ids: list[str]) -> list[Block]:
    from optkit.resolve.resolver import describe_benefit

    lines: list[Block] = []
    for rid in recipe_ids:
        d, recipe = plan.resolution.decisions[rid], catalog[rid]
        lines += [f"{rid}: {d.status.value}", f"  {d.reason}"]
        if d.rule:
            lines.append(f"  rule: {d.rule}")
        lines += [f"  fact: {name} = {value}" for name, value in d.facts.items()]
        lines += [f"  {link}" for link in d.chain]
        if d.forced:
            lines.append(f"  forced: {d.forced}")
        if d.benefit is not None and not d.reason.startswith("expected gain"):
            lines.append(f"  expected gain: {describe_benefit(d.benefit)}")
        lines += [f"  risk ({risk.severity}): {' '.join(risk.text.split())}" for risk in recipe.risks]
    return lines


def recipes_table(catalog) -> list[Block]:
    table = Table(f"{len(catalog)} recipes", ["id", "kind", "upstream (0.23.0)", "verification", "needs NPU"])
    for recipe in catalog:
        table.add_row(recipe.id, recipe.kind.value, recipe.provenance.upstream.status.value,
                      recipe.verification.level.value, "yes" if recipe.verification.needs_npu else "no")
    return [table]


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
