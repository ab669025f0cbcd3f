"""Recipe signatures matched against decode steps, and what no signature explains.

An instance of a kernel signature is a device op whose name (and type) the signature's regexes
match in full and, with ``input_dim``, whose input shapes hold that model dimension; its cost is
the op's device time plus the host-side gap before it (the launch the step waited for). An
instance of a host-call signature is a blocking host call of that name that the device waits for
(an op of the step follows it); its cost is the device idle it causes (``Step.stall``), not the
call's own duration: a copy that itself waits for the device to finish (a step-end copy of the
results) costs the device nothing and is no instance. Per decode step a signature expects ``count`` instances (times the
layers it names); the saving is that many instances (or as many as were found, if fewer) times
the median instance cost, the median over decode steps and then over ranks.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from optkit.catalog.specifiers import contains
from optkit.profile.steps import Step, blocking

LAYER_FIELDS = {"all": "num_layers", "gdn": "gdn_layers", "full_attention": "full_attention_layers"}
GAP_FLOOR_US = 10.0
"""Host gaps shorter than this are launch noise, not a finding."""


@dataclass(frozen=True)
class Finding:
    """One signature of one recipe in the decode steps of one rank."""

    recipe: str
    index: int
    what: str
    pattern: str
    per_step: int  # instances found per decode step (median)
    expected: int | None  # what the signature says one step has (None: the model's layers are unknown)
    attributed: int
    cost_us: float  # median cost of one instance
    saving_us: float
    effect: str
    when: str | None
    msg: str

    @property
    def present(self) -> bool:
        return self.per_step > 0


def describe(signature) -> str:
    parts = [f"type {signature.type}" if signature.type else "", signature.name or ""]
    text = " ".join(p for p in parts if p)
    return text + (f" with a {signature.input_dim} input" if signature.input_dim else "")


def expected_count(signature, dims: dict[str, int] | None) -> int | None:
    if signature.per == "step":
        return signature.count
    if not dims or LAYER_FIELDS[signature.layers] not in dims:
        return None
    return signature.count * dims[LAYER_FIELDS[signature.layers]]


def instances(signature, step: Step, dims: dict[str, int] | None) -> list[tuple[int, float]]:
    """(index, cost) of every instance in ``step``: the op's index, or -1 - the call's index for host calls."""
    if signature.what == "host-call":
        return [(-1 - i, stall[0]) for i, c, stall in _host_calls(signature, step)]
    want = dims.get(signature.input_dim) if signature.input_dim and dims else None
    out = []
    for i, (op, gap) in enumerate(zip(step.ops, step.gaps)):
        if signature.name and not re.fullmatch(signature.name, op.name):
            continue
        if signature.type and not re.fullmatch(signature.type, op.type):
            continue
        if signature.input_dim and (want is None or str(want) not in re.findall(r"\d+", op.shapes)):
            continue
        out.append((i, op.dur + gap))
    return out


def _host_calls(signature, step: Step):
    """(index, call, (cost, ops covered)) of the calls a host-call signature names: a blocking one
    (a copy from pageable memory, a sync) costs the device idle it causes (``Step.stall``) and is no
    instance when no op of the step follows it; an asynchronous one costs its duration."""
    for i, call in enumerate(step.calls):
        if not re.fullmatch(signature.name, call.name):
            continue
        if not blocking(call):  # an asynchronous call costs the host its duration
            yield i, call, (call.dur, [])
            continue
        stall = step.stall(call)
        if stall is not None:
            yield i, call, stall


def covered(signature, step: Step) -> set[int]:
    """The ops whose launch gaps a host-call signature's instances explain (the stall they cause)."""
    if signature.what != "host-call":
        return set()
    return {i for _, _, (_, ops) in _host_calls(signature, step) for i in ops}


def applies(signature, release: str | None) -> bool:
    return release is None or contains(signature.versions, release)


def match(recipes, decode: list[Step], dims: dict[str, int] | None, release: str | None):
    """Findings of every signature that applies on ``release``, and the op indexes they explain per step."""
    findings, explained = [], [set() for _ in decode]
    for recipe in recipes:
        for index, sig in enumerate(recipe.signatures):
            if not applies(sig, release):
                continue
            per_step = [instances(sig, step, dims) for step in decode]
            for seen, found, step in zip(explained, per_step, decode):
                seen.update(i for i, _ in found)
                seen.update(covered(sig, step))
            counts = [len(f) for f in per_step]
            costs = [c for f in per_step for _, c in f]
            found = int(statistics.median(counts)) if counts else 0
            expected = expected_count(sig, dims)
            attributed = min(found, expected) if expected is not None else found
            cost = statistics.median(costs) if costs else 0.0
            saving = attributed * cost
            if sig.what == "host-call":  # device idle: never more than the device is idle in a step
                saving = min(saving, statistics.median(s.free for s in decode))
            findings.append(Finding(recipe.id, index, sig.what, describe(sig), found, expected, attributed,
                                    round(cost, 3), round(saving, 3), sig.effect, sig.when, sig.msg))
    return findings, explained


@dataclass(frozen=True)
class Gap:
    """A host-side gap no signature explains: before the ``occurrence``-th op ``op`` of the step."""

    op: str
    occurrence: int
    of: int  # how many ops of that name one step has
    position: int  # the op's index in the representative step
    gap_us: float


@dataclass(frozen=True)
class OpTime:
    """Device time per decode step of one op name that no signature explains."""

    op: str
    type: str
    per_step: int
    device_us: float
    gap_us: float


def unexplained(decode: list[Step], explained: list[set], top: int = 5) -> tuple[list[Gap], list[OpTime]]:
    """The longest host gaps and the costliest ops of the decode steps that no signature explains
    (medians over the steps; a gap or op a step lacks counts as 0 there)."""
    gaps: dict[tuple[str, int], list[float]] = {}
    ops: dict[str, list[tuple[int, float, float, str]]] = {}
    names_per_step = []
    for step, seen in zip(decode, explained):
        counts: dict[str, int] = {}
        per_op: dict[str, list[float]] = {}
        for i, ((name, k), op, gap) in enumerate(zip(step.occurrences(), step.ops, step.gaps)):
            counts[name] = k
            if i in seen:
                continue
            gaps.setdefault((name, k), []).append(gap)
            entry = per_op.setdefault(name, [0, 0.0, 0.0, op.type])
            entry[0] += 1
            entry[1] += op.dur
            entry[2] += gap
        names_per_step.append(counts)
        for name, entry in per_op.items():
            ops.setdefault(name, []).append(tuple(entry))
    n = len(decode)
    rep = decode[len(decode) // 2] if decode else None
    positions = {key: i for i, key in enumerate(rep.occurrences())} if rep else {}

    def median_of(values: list[float]) -> float:
        return statistics.median(values + [0.0] * (n - len(values)))

    gap_list = [Gap(name, k, max(c.get(name, 0) for c in names_per_step), positions.get((name, k), -1),
                    round(median_of(v), 3)) for (name, k), v in gaps.items()]
    gap_list = sorted((g for g in gap_list if g.gap_us >= GAP_FLOOR_US), key=lambda g: (-g.gap_us, g.position, g.op))
    op_list = [OpTime(name, v[0][3], int(statistics.median([e[0] for e in v] + [0] * (n - len(v)))),
                      round(median_of([e[1] for e in v]), 3), round(median_of([e[2] for e in v]), 3))
               for name, v in ops.items()]
    op_list.sort(key=lambda o: (-(o.device_us + o.gap_us), o.op))
    return gap_list[:top], op_list[:top]
