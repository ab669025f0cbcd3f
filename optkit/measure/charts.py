"""The report's charts as PNG bytes: the waterfall (like the article's c1 waterfall) and per-concurrency
bars. The only module of the measure stage that imports matplotlib (the other is the profile stage's
``optkit.profile.timeline``), and only when a report is written.

Deterministic: the Agg canvas on a ``Figure`` of fixed size and dpi (no pyplot state), matplotlib's
bundled DejaVu font, and no "Software" metadata in the PNG, so the same report gives the same bytes.
"""

from __future__ import annotations

import io
import sys

from optkit.measure import MeasureError

COLORS = {"gain": "#2e7d32", "regression": "#c62828", "no-measurable-effect": "#9e9e9e",
          "unavailable": "#e0e0e0", "level": "#455a64", "final": "#1565c0"}
DPI = 100


def _figure(width: float, height: float):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # a core dependency, but an environment can still lack it or break it
        raise MeasureError(missing_matplotlib(exc.name)) from None

    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def missing_matplotlib(module: str | None) -> str:
    """What to do when matplotlib (or a module it needs, ``module``) cannot be imported: one line."""
    needs = "" if not module or module.split(".")[0] == "matplotlib" else f" (it needs {module})"
    return (f"the report's charts need matplotlib, which this Python cannot import{needs}; nothing was written: "
            f"install it with `{sys.executable} -m pip install matplotlib` and run optkit report again")


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _short(name: str, limit: int = 28) -> str:
    return name if len(name) <= limit else name[:limit - 1] + "…"


def waterfall(title: str, start: tuple[str, float], steps: list[tuple[str, float | None, str]],
              end_label: str) -> bytes:
    """Bars from ``start`` (label, level) through each step (label, delta or None, verdict) to the end level."""
    figure = _figure(max(6.0, 1.0 + 0.9 * (len(steps) + 2)), 4.8)
    axes = figure.add_subplot(1, 1, 1)
    labels, level = [start[0]], start[1]
    axes.bar(0, level, color=COLORS["level"])
    axes.annotate(f"{level:.2f}", (0, level), ha="center", va="bottom", fontsize=8)
    for x, (label, change, verdict) in enumerate(steps, start=1):
        labels.append(_short(label))
        if change is None:
            axes.bar(x, level, color=COLORS["unavailable"], hatch="//", edgecolor="#bdbdbd")
            axes.annotate("no data", (x, level), ha="center", va="bottom", fontsize=7)
            continue
        axes.bar(x, abs(change), bottom=min(level, level + change), color=COLORS[verdict])
        axes.annotate(f"{change:+.2f}", (x, max(level, level + change)), ha="center", va="bottom", fontsize=8)
        level += change
    labels.append(end_label)
    axes.bar(len(steps) + 1, level, color=COLORS["final"])
    axes.annotate(f"{level:.2f}", (len(steps) + 1, level), ha="center", va="bottom", fontsize=8)
    axes.set_xticks(range(len(labels)))
    axes.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    axes.set_ylabel("mean TPOT (ms)")
    axes.set_title(title, fontsize=10)
    axes.margins(y=0.12)
    figure.tight_layout()
    return _png(figure)


def contributions(title: str, rows: list[tuple[str, float | None, float | None, str]]) -> bytes:
    """Horizontal bars of each recipe's delta (label, delta, noise, verdict): the leave-one-out chart."""
    figure = _figure(7.5, max(2.5, 0.5 + 0.4 * len(rows)))
    axes = figure.add_subplot(1, 1, 1)
    for y, (label, change, noise, verdict) in enumerate(rows):
        axes.barh(y, change or 0.0, xerr=noise if change is not None else None,
                  color=COLORS[verdict if change is not None else "unavailable"], capsize=3)
    axes.set_yticks(range(len(rows)))
    axes.set_yticklabels([_short(r[0], 40) for r in rows], fontsize=8)
    axes.invert_yaxis()
    axes.axvline(0, color="#616161", linewidth=0.8)
    axes.set_xlabel("Δ mean TPOT with the recipe (ms; negative = faster)")
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    return _png(figure)


def per_concurrency(title: str, steps: list[str], series: dict[int, list[tuple[float | None, float]]]) -> bytes:
    """Grouped bars: each step's mean TPOT at each concurrency, ± its noise (``series[c][i]``)."""
    figure = _figure(max(6.0, 1.0 + 0.75 * len(steps) * max(len(series), 1) ** 0.5), 4.6)
    axes = figure.add_subplot(1, 1, 1)
    width = 0.8 / max(len(series), 1)
    palette = ["#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#558b2f"]
    for k, (c, values) in enumerate(sorted(series.items())):
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(steps))]
        heights = [v if v is not None else 0.0 for v, _ in values]
        axes.bar(xs, heights, width, yerr=[e if v is not None else 0.0 for v, e in values], capsize=2,
                 color=palette[k % len(palette)], label=f"c{c}")
    axes.set_xticks(range(len(steps)))
    axes.set_xticklabels([_short(s) for s in steps], rotation=30, ha="right", fontsize=8)
    axes.set_ylabel("mean TPOT (ms)")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8)
    figure.tight_layout()
    return _png(figure)


def capacity_curves(title: str, key: str, limit_ms: float,
                    curves: list[tuple[str, list[tuple[int, float | None, float | None, bool]], int | None, str]]) -> bytes:
    """Left: each step's throughput–latency curve (points: concurrency, output tok/s, the SLO's first
    statistic ``key``, met), the bound dashed; right: each step's capacity (hatched: not a found
    bracket, e.g. the server died or the highest probe still met the SLO)."""
    figure = _figure(11.0, 4.8)
    left, right = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    palette = ["#455a64", "#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#558b2f", "#8d6e63"]
    for k, (step, points, _, _) in enumerate(curves):
        shown = [(c, x, y, met) for c, x, y, met in points if x is not None and y is not None]
        if not shown:
            continue
        color = palette[k % len(palette)]
        left.plot([x for _, x, _, _ in shown], [y for _, _, y, _ in shown], color=color, linewidth=1.2,
                  label=_short(step, 32))
        for c, x, y, met in shown:
            left.plot([x], [y], marker="o" if met else "x", color=color, markersize=5,
                      markerfacecolor=color if met else "none")
            left.annotate(f"c{c}", (x, y), textcoords="offset points", xytext=(3, 3), fontsize=6, color=color)
    left.axhline(limit_ms, color=COLORS["regression"], linestyle="--", linewidth=0.9)
    left.annotate(f"SLO {limit_ms:g} ms", (0.01, limit_ms), xycoords=("axes fraction", "data"), fontsize=7,
                  color=COLORS["regression"], va="bottom")
    left.set_xlabel("output throughput (tok/s)")
    left.set_ylabel(key.replace("_ms", " (ms)"))
    left.set_title("throughput–latency per step (o met, x missed)", fontsize=9)
    left.legend(fontsize=7)
    for k, (step, _, capacity, status) in enumerate(curves):
        value = capacity or 0
        right.bar(k, value, color=palette[k % len(palette)], hatch="" if status == "found" else "//",
                  edgecolor="#bdbdbd")
        right.annotate(str(value) if status == "found" else f"{value} ({status})", (k, value), ha="center",
                       va="bottom", fontsize=7)
    right.set_xticks(range(len(curves)))
    right.set_xticklabels([_short(c[0]) for c in curves], rotation=30, ha="right", fontsize=8)
    right.set_ylabel("capacity (concurrent requests)")
    right.set_title("capacity: the highest concurrency meeting the SLO", fontsize=9)
    right.margins(y=0.15)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return _png(figure)


def tune_history(title: str, points: list[tuple[int, float | None, str]], rule: float | None) -> bytes:
    """``optkit tune``: each started trial's objective (number, tok/s per card or None, status) in order, the best so
    far as a step line, the rule-based plan's value dashed."""
    figure = _figure(7.5, 4.2)
    axes = figure.add_subplot(1, 1, 1)
    marks = {"measured": ("o", COLORS["final"]), "stopped-early": ("v", COLORS["level"]),
             "failed-start": ("x", COLORS["regression"]), "below-lowest": ("x", COLORS["no-measurable-effect"]),
             "client-failed": ("x", COLORS["no-measurable-effect"])}
    best, xs, ys = 0.0, [], []
    for i, (number, value, status) in enumerate(points, start=1):
        marker, color = marks.get(status, ("o", COLORS["level"]))
        axes.plot([i], [value or 0.0], marker=marker, color=color, markersize=6, linestyle="none")
        best = max(best, value or 0.0)
        xs.append(i)
        ys.append(best)
    axes.step(xs, ys, where="post", color=COLORS["gain"], linewidth=1.2, label="best so far")
    if rule is not None:
        axes.axhline(rule, color="#616161", linestyle="--", linewidth=0.9, label=f"rule-based plan {rule:.0f}")
    axes.set_xlabel("server start")
    axes.set_ylabel("output tok/s per card at the capacity")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    return _png(figure)


def tune_front(title: str, points: list[tuple[float, float, bool, str]]) -> bytes:
    """``optkit tune``: feasible trials by p99 TPOT (x) and throughput per card (y), the Pareto front joined."""
    figure = _figure(7.0, 4.6)
    axes = figure.add_subplot(1, 1, 1)
    front = sorted((x, y) for x, y, on_front, _ in points if on_front)
    for x, y, on_front, label in points:
        axes.plot([x], [y], marker="o", color=COLORS["final"] if on_front else COLORS["no-measurable-effect"],
                  markersize=6 if on_front else 4, linestyle="none")
        if on_front:
            axes.annotate(_short(label, 36), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=6)
    if front:
        axes.plot([x for x, _ in front], [y for _, y in front], color=COLORS["final"], linewidth=1.0)
    axes.set_xlabel("p99 TPOT at the capacity (ms)")
    axes.set_ylabel("output tok/s per card at the capacity")
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    return _png(figure)


def importance_bars(title: str, rows: list[tuple[str, float]]) -> bytes:
    """``optkit tune``: each knob's share of the objective's variance over the feasible trials."""
    figure = _figure(6.5, max(2.2, 0.6 + 0.4 * len(rows)))
    axes = figure.add_subplot(1, 1, 1)
    for y, (name, share) in enumerate(rows):
        axes.barh(y, share, color=COLORS["final"])
        axes.annotate(f"{share:.2f}", (share, y), textcoords="offset points", xytext=(3, -3), fontsize=7)
    axes.set_yticks(range(len(rows)))
    axes.set_yticklabels([r[0] for r in rows], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(0, 1.1)
    axes.set_xlabel("importance (PED-ANOVA, shares summing to 1)")
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    return _png(figure)


__all__ = ["waterfall", "contributions", "per_concurrency", "capacity_curves", "tune_history", "tune_front",
           "importance_bars", "missing_matplotlib"]
