"""The timeline chart of one decode step (PNG bytes): a row per stream and a row of host calls, the
ops a recipe signature names in colour, the longest unexplained host gaps marked. The only module of
the profile stage that imports matplotlib, and only when a chart is asked for.

Deterministic as ``optkit.measure.charts``: a ``Figure`` of fixed size and dpi on the Agg canvas,
matplotlib's bundled font, no "Software" metadata in the PNG.
"""

from __future__ import annotations

import io
import sys

from optkit.profile import ProfileError

DPI = 100
PALETTE = ["#c62828", "#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#4e342e"]
PLAIN, HOST, GAP = "#b0bec5", "#78909c", "#ffb300"


def step_timeline(step, title: str, marked: dict[int, str], gaps: list[tuple[int, float]]) -> bytes:
    """``marked``: op index (or -1 - host call index) → recipe id; ``gaps``: (op index, µs) to flag."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise ProfileError(f"the timeline chart needs matplotlib, which this Python cannot import ({exc.name}); "
                           f"install it with `{sys.executable} -m pip install matplotlib`") from None
    streams = sorted({op.stream or "?" for op in step.ops})
    rows = {s: i for i, s in enumerate(streams)}
    host_row = len(streams)
    recipes = sorted(set(marked.values()))
    colours = {r: PALETTE[i % len(PALETTE)] for i, r in enumerate(recipes)}
    figure = Figure(figsize=(12.0, 2.4 + 0.55 * (len(streams) + 1)), dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    t0 = step.start
    for i, op in enumerate(step.ops):
        axes.broken_barh([(op.start - t0, max(op.dur, 0.5))], (rows[op.stream or "?"] - 0.4, 0.8),
                         color=colours.get(marked.get(i), PLAIN), linewidth=0)
    for j, call in enumerate(step.calls):
        axes.broken_barh([(call.start - t0, max(call.dur, 0.5))], (host_row - 0.4, 0.8),
                         color=colours.get(marked.get(-1 - j), HOST), linewidth=0)
    for index, us in gaps:
        if 0 <= index < len(step.ops):
            op = step.ops[index]
            axes.axvspan(op.start - t0 - us, op.start - t0, color=GAP, alpha=0.35, linewidth=0)
            x = op.start - t0 - us / 2
            axes.annotate(f"{us:.0f} µs gap\nbefore {op.name}", (x, host_row + 0.55), ha=label_align(x, step.wall),
                          va="bottom", fontsize=7)
    axes.set_yticks(range(len(streams) + 1), [f"stream {s}" for s in streams] + ["host calls"])
    axes.set_ylim(-0.7, host_row + 1.4)
    axes.set_xlim(0, step.wall)
    axes.set_xlabel("µs from the step's start")
    axes.set_title(title, fontsize=10)
    handles = [Patch(color=colours[r], label=r) for r in recipes] + [Patch(color=GAP, alpha=0.35, label="unexplained gap")]
    axes.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.28), fontsize=7, ncol=4, frameon=False)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def label_align(x: float, wall: float) -> str:
    """A gap's label grows inwards near an edge of the step: centred there, it would run past the axes."""
    return "right" if x > 0.8 * wall else "left" if x < 0.2 * wall else "center"


def chart(result, rank=None) -> bytes:
    """The chart of the representative decode step of ``rank`` (default: the slowest rank)."""
    from optkit.profile.signatures import instances

    r = result.slowest if rank is None else next(x for x in result.ranks if x.rank == rank)
    step = r.representative
    marked: dict[int, str] = {}
    for f in (x for x in r.findings if x.present):
        sig = result.signature_of(f)
        for index, _ in instances(sig, step, result.dims):
            marked.setdefault(index, f.recipe)
    positions = {key: i for i, key in enumerate(step.occurrences())}
    gaps = [(positions[(g.op, g.occurrence)], g.gap_us) for g in r.gaps[:3] if (g.op, g.occurrence) in positions]
    title = (f"rank {r.rank}, decode step {step.id} ({step.wall:.0f} µs; device free {step.free:.0f} µs), "
             f"captured {r.started}")
    return step_timeline(step, title, marked, gaps)
