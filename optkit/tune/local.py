"""The tune's own moves, taken before the sampler's: the article's single-variable A/B, automated.

A serving engineer tunes from the rule-based plan one knob at a time, keeps what helps, and sizes the scheduler
from what each start tells. ``next_move(space, history)`` does the same from the study's history alone (no
state of its own, so a resumed or second worker computes the same moves), in this order:

1. **Sizing a point** (the knobs but max-num-seqs, a *group*): a start that ran out of memory is tried again
   with fewer sequences (¾ after the first out-of-memory, ½ after more; at most ``MAX_OOM`` per group, then
   the point is left to the sampler); a start whose capacity reached its scheduler slots (max-num-seqs × DP:
   the sweep counts a load above them as a miss, so the capacity was the slots', not the SLO's) and came within
   10 % of the best is tried with more: halfway to the lowest size that ran out of memory, or twice as many
   when none did, up to the knob's top. A group whose capacity the SLO held is sized.
2. **One knob at a time from the best point** (a compass search): its neighbours in each open knob but
   max-num-seqs, each knob's in ``ORDER`` (the knob that made the best point first, in the direction it
   moved). A choice knob's neighbours are the values next to it in its order (numbers by value, MTP by k);
   a layout's are TP or DP doubled or halved, and the two with the devices kept (TP × 2 with DP ÷ 2 and back).
3. None once every neighbour of the best point is tried: the sampler (GP or TPE) explores the rest.

"Tried" is any trial of the point: measured, invalid (refused by the resolver), reused, running on another
worker, or waiting in the queue, so two workers do not start the same move.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from optkit.tune.space import Dim, Space, layout_text, parse_layout

ORDER = ("layout", "speculative", "max-num-batched-tokens", "flashcomm1", "capture-share", "prefix-caching")
"""The knobs' order in the one-at-a-time moves: what the capacity depends on most first (devices and their split,
draft tokens, the prefill chunk), then the per-step switches."""
SEQS = "max-num-seqs"
MAX_OOM = 3
"""Out-of-memory starts per group after which the sizing stops: the point needs far fewer sequences than its
neighbourhood, and another point is likelier to pay."""
PROMISING = 0.9
"""A group within this share of the best is worth more sequences."""
OOM = re.compile(r"(?i)out of memory|outofmemory|\boom\b")


@dataclass
class Tried:
    """One trial of the study, as the moves read it."""

    number: int
    params: dict[str, Any]  # every open knob's value
    state: str  # Optuna's: COMPLETE, RUNNING, WAITING, FAIL
    started: bool = False
    feasible: bool = False
    objective: float = 0.0
    capacity: int = 0
    status: str = ""
    reason: str = ""
    dp: int = 1
    move: dict[str, Any] = field(default_factory=dict)  # {"knob", "from"} of a one-knob move

    @property
    def oom(self) -> bool:
        return self.started and self.status == "failed-start" and bool(OOM.search(self.reason))


def next_move(space: Space, history: list[Tried]) -> tuple[dict[str, Any], str, dict[str, Any]] | None:
    """The next point to try (every open knob's value), why, and the attributes that record the move; None when
    the sampler should propose (module docstring)."""
    dims = {d.name: d for d in space.open}
    tried = {_key(space, t.params) for t in history if t.state != "FAIL" or not t.started}
    done = [t for t in history if t.state == "COMPLETE"]
    best = max((t for t in done if t.feasible), key=lambda t: (t.objective, -t.number), default=None)
    if SEQS in dims:
        sized = _size(space, dims[SEQS], done, best, tried)
        if sized is not None:
            return sized
    if best is None:
        return None
    for name, value in _neighbours(space, best):
        point = {**best.params, name: value}
        if _key(space, point) not in tried:
            why = f"{name} {value} (one knob from the best so far, trial {best.number}: {name} {best.params[name]})"
            return point, why, {"knob": name, "from": str(best.params[name]), "of": best.number}
    return None


def _key(space: Space, params: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(params.get(d.name)) for d in space.open)


def _group(params: dict[str, Any]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in params.items() if k != SEQS))


def _size(space: Space, dim: Dim, done: list[Tried], best: Tried | None, tried: set) -> tuple | None:
    groups: dict[tuple, list[Tried]] = {}
    for t in done:
        if t.started and SEQS in t.params:
            groups.setdefault(_group(t.params), []).append(t)
    # the group started last first: a chain of starts finishes before another begins
    for trials in sorted(groups.values(), key=lambda ts: -max(t.number for t in ts)):
        ooms = [int(t.params[SEQS]) for t in trials if t.oom]
        fits = [t for t in trials if t.feasible]
        lowest_oom = min(ooms) if ooms else None
        last = max(trials, key=lambda t: t.number)
        if fits:
            top = max(fits, key=lambda t: (int(t.params[SEQS]), t.number))
            seqs = int(top.params[SEQS])
            # a full sweep whose capacity stayed below its slots: the SLO, not the sizing, held it
            slo_held = any(t.status == "measured" and t.capacity < int(t.params[SEQS]) * t.dp for t in fits)
            held = top.capacity >= seqs * top.dp and not slo_held
            if not held or seqs >= dim.high or (best is not None and top.objective < PROMISING * best.objective):
                continue
            if lowest_oom is not None:
                higher = _on_grid(dim, (seqs + lowest_oom) / 2, up=False)
                why = f"{SEQS} {{}} (trial {top.number}'s capacity reached its {seqs * top.dp} scheduler slots; " \
                      f"{lowest_oom} ran out of memory)"
            else:
                higher = _on_grid(dim, seqs * 2, up=False)
                why = f"{SEQS} {{}} (trial {top.number}'s capacity reached its {seqs * top.dp} scheduler slots)"
            if higher <= seqs or (lowest_oom is not None and higher >= lowest_oom):
                continue
        elif ooms and last.oom and len(ooms) < MAX_OOM:
            higher = _on_grid(dim, lowest_oom * (0.75 if len(ooms) == 1 else 0.5), up=False)
            why = f"{SEQS} {{}} (trial {last.number} ran out of memory at {lowest_oom})"
            if higher >= lowest_oom:
                continue
        else:
            continue
        point = {**last.params, SEQS: higher}
        if _key(space, point) not in tried:
            return point, why.format(higher), {"knob": SEQS, "from": str(last.params[SEQS]), "of": last.number}
    return None


def _on_grid(dim: Dim, value: float, up: bool) -> int:
    step = dim.step or 1
    level = math.ceil(value / step) if up else math.floor(value / step)
    return int(min(max(level * step, dim.low), dim.high))


def _neighbours(space: Space, best: Tried) -> list[tuple[str, str]]:
    """The best point's one-knob neighbours, in the order they are tried."""
    order = [n for n in ORDER if any(d.name == n for d in space.open)]
    order += [d.name for d in space.open if d.name not in order and d.name != SEQS]
    moved = best.move.get("knob")
    if moved in order:
        order.remove(moved)
        order.insert(0, moved)
    dims = {d.name: d for d in space.open}
    out = []
    for name in order:
        value = str(best.params[name])
        came = best.move.get("from") if name == moved else None
        out += [(name, v) for v in _ordered_near(dims[name], value, came)]
    return out


def _ordered_near(dim: Dim, value: str, came: str | None) -> list[str]:
    if dim.kind != "choice" or value not in dim.choices:
        return []
    if dim.name == "layout":
        near = _layout_near(dim, value)
    else:
        ranked = sorted(dim.choices, key=_rank)
        i = ranked.index(value)
        near = [ranked[j] for j in (i + 1, i - 1) if 0 <= j < len(ranked)]
    if came is not None and came in dim.choices:
        # keep going the way the last move went: the neighbour away from where it came, first
        ahead = [v for v in near if _direction(dim, came, value) == _direction(dim, value, v)]
        near = ahead + [v for v in near if v not in ahead]
    return near


def _rank(choice: str) -> tuple:
    if choice == "off":
        return (0, 0.0)
    if (m := re.fullmatch(r"mtp:(\d+)", choice)):
        return (0, float(m.group(1)))
    try:
        return (0, float(choice))
    except ValueError:
        return (1, choice)  # a choice that is no number: after the numbers, by name


def _layout_near(dim: Dim, value: str) -> list[str]:
    tp, dp = parse_layout(value)
    steps = ((2, 1), (1, 2), (0.5, 1), (1, 0.5), (2, 0.5), (0.5, 2))
    out = []
    for a, b in steps:
        t, d = tp * a, dp * b
        if t >= 1 and d >= 1 and t == int(t) and d == int(d) and (text := layout_text(int(t), int(d))) in dim.choices:
            out.append(text)
    return out


def _direction(dim: Dim, a: str, b: str) -> tuple:
    if dim.name == "layout":
        (ta, da), (tb, db) = parse_layout(a), parse_layout(b)
        return (math.copysign(1, tb - ta) if tb != ta else 0, math.copysign(1, db - da) if db != da else 0)
    ra, rb = _rank(a), _rank(b)
    return (1 if rb > ra else -1 if rb < ra else 0,)


__all__ = ["Tried", "next_move", "ORDER"]
