"""A capture, analysed: every rank's decode steps decomposed, signatures matched, the unexplained named.

``analyze`` returns data (``ProfileAnalysis``); ``as_json`` its JSON form (sorted, rounded: the same
capture gives the same bytes). Numbers per decode step are medians over the decode steps; the
findings of several ranks are combined by their median (the ranks of one TP group run the same
steps), the unexplained gaps and ops are the slowest rank's (the one the step waits for).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from optkit.profile import ProfileError
from optkit.profile.locate import rank_folders
from optkit.profile.reader import read_rank
from optkit.profile.signatures import LAYER_FIELDS, Finding, Gap, OpTime, match, unexplained
from optkit.profile.steps import Step, cut_steps

_LAYER_LABELS = {v: k for k, v in LAYER_FIELDS.items()}


@dataclass
class OpRow:
    """One op name's launches per decode step."""

    op: str
    type: str
    per_step: int
    device_us: float
    gap_us: float
    layers: str = ""  # e.g. "2 per gdn layer (x30)", when the count fits the model's layers


@dataclass
class RankResult:
    rank: int
    folder: str
    started: str
    form: str
    versions: dict[str, str]
    steps_found: str
    steps: int
    decode_steps: int
    prefill_steps: int
    decode: dict  # medians per decode step: wall, busy, free, launches, syncs, blocking copies, streams, overlap
    ops: list[OpRow]
    findings: list[Finding]
    gaps: list[Gap]
    unexplained_ops: list[OpTime]
    notes: list[str] = field(default_factory=list)
    representative: Step | None = None  # the decode step of median wall time (for the timeline chart)


@dataclass
class ProfileAnalysis:
    directory: str
    started: str
    release: str | None
    ranks: list[RankResult]
    findings: list[Finding]  # combined over ranks
    slowest_rank: int
    dims: dict[str, int] | None = None
    signatures: dict[str, list] = field(default_factory=dict)  # recipe → its signatures (for the chart)
    release_check: str | None = None  # the capture's release against the plan's, in words (optkit.resolve.profiled)

    def signature_of(self, finding: Finding):
        return self.signatures[finding.recipe][finding.index]

    @property
    def slowest(self) -> RankResult:
        return next(r for r in self.ranks if r.rank == self.slowest_rank)

    def finding(self, recipe: str) -> list[Finding]:
        return [f for f in self.findings if f.recipe == recipe]


def analyze(directory: Path, recipes, dims: dict[str, int] | None = None, release: str | None = None,
            display: str | None = None) -> ProfileAnalysis:
    """Read and analyse the capture in ``directory``; ``recipes`` give the signatures, ``dims`` the model's
    layer counts and dimensions (``num_layers``, ``gdn_layers``, ``full_attention_layers``, ``vocab_size``,
    ``hidden_size``; None: unknown), ``release`` the vllm-ascend release it ran (None: every signature)."""
    recipes = [r for r in recipes if r.signatures]
    ranks = [_rank(read_rank(entry), recipes, dims, release) for entry in rank_folders(Path(directory))]
    slowest = max(ranks, key=lambda r: (r.decode["wall_us"], -r.rank))
    return ProfileAnalysis(display or str(directory), min(r.started for r in ranks), release, ranks,
                           _combine([r.findings for r in ranks]), slowest.rank, dims,
                           {r.id: list(r.signatures) for r in recipes})


def _rank(trace, recipes, dims, release) -> RankResult:
    steps, how = cut_steps(trace)
    decode = [s for s in steps if s.kind == "decode"]
    if not decode:
        raise ProfileError(f"{trace.folder}: no decode step found ({how}); capture a few decode steps "
                           "(docs/profile.md)")
    findings, explained = match(recipes, decode, dims, release)
    gaps, ops = unexplained(decode, explained)
    rep = sorted(decode, key=lambda s: (s.wall, s.start))[len(decode) // 2]
    return RankResult(trace.rank, trace.folder, trace.started, trace.form, dict(sorted(trace.versions.items())), how,
                      len(steps), len(decode), len(steps) - len(decode), _decode_summary(decode),
                      _op_rows(decode, dims), findings, gaps, ops, [], rep)


def _median(values) -> float:
    values = list(values)
    return round(statistics.median(values), 3) if values else 0.0


def _decode_summary(decode: list[Step]) -> dict:
    syncs: dict[str, list] = {}
    for s in decode:
        for name, (n, us) in s.syncs().items():
            syncs.setdefault(name, []).append((n, us))
    streams = [s.streams() for s in decode]
    names = sorted({k for busy, _ in streams for k in busy})
    n = len(decode)
    return {
        "wall_us": _median(s.wall for s in decode), "busy_us": _median(s.busy for s in decode),
        "free_us": _median(s.free for s in decode), "launches": int(_median(len(s.ops) for s in decode)),
        "syncs": {k: {"count": int(_median([c for c, _ in v] + [0] * (n - len(v)))),
                      "us": _median([u for _, u in v] + [0.0] * (n - len(v)))} for k, v in sorted(syncs.items())},
        "blocking_copies": {"count": int(_median(s.blocking_copies()[0] for s in decode)),
                            "us": _median(s.blocking_copies()[1] for s in decode),
                            "device_idle_us": _median(s.blocking_copies()[2] for s in decode)},
        "streams_us": {k: _median(busy.get(k, 0.0) for busy, _ in streams) for k in names},
        "overlap_us": _median(o for _, o in streams),
    }


def _op_rows(decode: list[Step], dims) -> list[OpRow]:
    per: dict[str, list[list]] = {}
    for s in decode:
        row: dict[str, list] = {}
        for op, gap in zip(s.ops, s.gaps):
            e = row.setdefault(op.name, [0, 0.0, 0.0, op.type])
            e[0], e[1], e[2] = e[0] + 1, e[1] + op.dur, e[2] + gap
        for name, e in row.items():
            per.setdefault(name, []).append(e)
    n = len(decode)
    rows = []
    for name, entries in per.items():
        count = int(_median([e[0] for e in entries] + [0] * (n - len(entries))))
        rows.append(OpRow(name, entries[0][3], count, _median([e[1] for e in entries] + [0.0] * (n - len(entries))),
                          _median([e[2] for e in entries] + [0.0] * (n - len(entries))), _layers(count, dims)))
    return sorted(rows, key=lambda r: (-(r.device_us + r.gap_us), r.op))


def _layers(count: int, dims) -> str:
    for key in ("num_layers", "gdn_layers", "full_attention_layers"):
        layers = (dims or {}).get(key) or 0
        if layers > 1 and count >= layers and count % layers == 0:
            which = "" if key == "num_layers" else _LAYER_LABELS[key].replace("_", "-") + " "
            return f"{count // layers} per {which}layer (x{layers})"
    return ""


def _combine(per_rank: list[list[Finding]]) -> list[Finding]:
    by_key: dict[tuple[str, int], list[Finding]] = {}
    for findings in per_rank:
        for f in findings:
            by_key.setdefault((f.recipe, f.index), []).append(f)
    out = []
    for (recipe, index), fs in sorted(by_key.items()):
        first = fs[0]
        out.append(Finding(recipe, index, first.what, first.pattern, int(_median(f.per_step for f in fs)),
                           first.expected, int(_median(f.attributed for f in fs)), _median(f.cost_us for f in fs),
                           _median(f.saving_us for f in fs), first.effect, first.when, first.msg))
    return out


def as_dict(result: ProfileAnalysis) -> dict:
    """The JSON form (``optkit profile --json``): everything but the steps themselves."""
    def rank(r: RankResult) -> dict:
        d = asdict(r)
        d.pop("representative")
        d["findings"] = [asdict(f) for f in r.findings if f.present]
        return d

    return {"directory": result.directory, "started": result.started, "release": result.release,
            "release_check": result.release_check,
            "slowest_rank": result.slowest_rank, "ranks": [rank(r) for r in result.ranks],
            "findings": [asdict(f) for f in result.findings if f.present]}
