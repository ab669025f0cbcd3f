"""The search space of ``optkit tune``: the plan's open knobs, each with its domain and the rule's value.

Under the throughput goal the plan chooses these by rules, each labelled "unquantified" (docs/objective.md):

============================  ==========================================================  =====================
knob                          domain (default)                                            enters the plan as
============================  ==========================================================  =====================
``layout``                    ``TP{t}xDP{d}``, t and d powers of two, t·d ≤ the devices   ``tp``, ``dp``
``speculative``               ``off`` and ``mtp:1`` … ``mtp:4`` (models with an MTP head)  ``mtp``, ``-k``
``flashcomm1``                ``on``, ``off``                                             ``flashcomm1``
``prefix-caching``            ``on``, ``off``                                             ``prefix_caching``
``max-num-seqs``              the sweep's top in 32 steps (8 … 256 for c256)              ``--set max-num-seqs``
``max-num-batched-tokens``    1024 … 32768, powers of two, and the rule's value            ``--set …``
``capture-share``             0.25, 0.5, 0.75, 1 of max-num-seqs                         ``--set capture-up-to``
============================  ==========================================================  =====================

A domain is where a search may go; whether a point is valid is the resolver's to say
(``optkit.tune.candidate``): a layout the model's heads do not split over, MTP on a sampled workload,
FlashComm1 where the release or layout refuses it, weights and KV that do not fit, batched tokens below
max-num-seqs are refused before any server starts. The user fixes a knob (``--fix NAME=VALUE``) or
changes its domain (``--range NAME=LOW:HIGH`` for an integer knob, ``--choices NAME=A,B`` for the others);
a knob the request already fixes (``--tp``, ``--mtp``, ``--flashcomm1`` …) is fixed at that value.

The first trial is the rule-based plan: every knob at the value the rules chose (``Dim.start``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from optkit.tune import TuneError

BATCHED_TOKENS = (1024, 2048, 4096, 8192, 16384, 32768)
"""Batched-token choices: powers of two, as upstream's pages and vLLM's defaults write them."""
CAPTURE_SHARES = ("0.25", "0.5", "0.75", "1")
"""capture-up-to as a share of max-num-seqs: a capture above max-num-seqs adds nothing (vllm-ascend caps the largest
size at max_num_seqs × (1 + k)), so the search moves the capture relative to the scheduler's slots, never past them."""
MAX_K = 4
"""MTP's k range: 1 … 4 (the article's 4; upstream's pages write 1 to 3)."""


@dataclass(frozen=True)
class Dim:
    """One knob: an integer range (``kind`` 'int', log-scaled) or a list of choices (text)."""

    name: str
    kind: str  # 'int' | 'choice'
    start: Any  # the rule-based plan's value
    low: int = 0
    high: int = 0
    choices: tuple[str, ...] = ()
    fixed: bool = False
    source: str = ""  # where the domain (or the fixed value) comes from
    step: int = 0  # an integer knob's step (0: every integer, log-scaled)

    def text(self) -> str:
        if self.fixed:
            return f"{self.name} = {self.start} (fixed: {self.source})"
        scale = f"step {self.step}" if self.step else "log"
        domain = f"{self.low} … {self.high} ({scale})" if self.kind == "int" else ", ".join(self.choices)
        return f"{self.name} ∈ {domain}; the rules chose {self.start} ({self.source})"

    def data(self) -> dict[str, Any]:
        out = {"name": self.name, "kind": self.kind, "start": self.start, "fixed": self.fixed, "source": self.source}
        ints = {"low": self.low, "high": self.high, **({"step": self.step} if self.step else {})}
        return out | (ints if self.kind == "int" else {"choices": list(self.choices)})

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> "Dim":
        return cls(data["name"], data["kind"], data["start"], data.get("low", 0), data.get("high", 0),
                   tuple(data.get("choices", ())), data["fixed"], data.get("source", ""), data.get("step", 0))


@dataclass(frozen=True)
class Space:
    dims: tuple[Dim, ...]
    devices: int
    notes: tuple[str, ...] = field(default=())

    @property
    def open(self) -> list[Dim]:
        return [d for d in self.dims if not d.fixed]

    def start(self) -> dict[str, Any]:
        return {d.name: d.start for d in self.dims}

    def size(self) -> int:
        """Points in the space (before validity): the grid a search over all of it would run."""
        total = 1
        for d in self.open:
            total *= (d.high - d.low + 1) if d.kind == "int" else len(d.choices)
        return total

    def data(self) -> dict[str, Any]:
        return {"devices": self.devices, "dims": [d.data() for d in self.dims], "notes": list(self.notes)}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> "Space":
        return cls(tuple(Dim.from_data(d) for d in data["dims"]), data["devices"], tuple(data.get("notes", ())))


KNOB_NAMES = ("layout", "speculative", "flashcomm1", "prefix-caching", "max-num-seqs", "max-num-batched-tokens",
              "capture-share")


def layout_text(tp: int, dp: int) -> str:
    return f"TP{tp}xDP{dp}"


def parse_layout(text: str, where: str = "layout") -> tuple[int, int]:
    import re

    match = re.fullmatch(r"TP(\d+)xDP(\d+)", text)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise TuneError(f"{where}: {text!r} is not TP<t>xDP<d> with t and d at least 1; write e.g. TP2xDP4")
    return int(match.group(1)), int(match.group(2))


def _powers(top: int) -> list[int]:
    return [2 ** i for i in range(int(math.log2(top)) + 1)] if top >= 1 else []


SEQS_LEVELS = 32
"""max-num-seqs levels: the sweep's top in steps of top/32 (multiples of 8 for the default c256), as serving
engineers set it; a log scale from 1 would spend most samples on sizes no throughput plan runs."""


def seqs_step(top: int) -> int:
    return max(1, top // SEQS_LEVELS)


def _on_step(value: int, step: int, top: int) -> int:
    """The rule's value on the knob's grid (the nearest level, within the range)."""
    return min(max(step, round(value / step) * step), top - top % step)


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def build_space(base, given: dict[str, Any], *, high: int, devices: int | None = None,
                fix: dict[str, str] | None = None, ranges: dict[str, str] | None = None,
                choices: dict[str, str] | None = None) -> Space:
    """The space around ``base``, the rule-based plan for the tune's request (throughput goal, sized for the
    sweep's top ``high``). ``given``: the request as the user gave it (a field given there is fixed). ``devices``:
    NPUs a trial may use (default: the target's per node × the plan's nodes)."""
    fix, ranges, choices = dict(fix or {}), dict(ranges or {}), dict(choices or {})
    for flag, names in (("--fix", fix), ("--range", ranges), ("--choices", choices)):
        unknown = sorted(set(names) - set(KNOB_NAMES))
        if unknown:
            raise TuneError(f"{flag} {unknown[0]}=…: no such knob; the knobs are {', '.join(KNOB_NAMES)}")
    r, facts = base.request, base.facts
    nodes = facts["parallel.nodes"]
    devices = devices or base.target.devices_per_node * nodes
    from optkit.resolve.fit import serve_int

    seqs = serve_int(base, "--max-num-seqs") or high
    tokens = serve_int(base, "--max-num-batched-tokens") or 8192
    sizes = base.compilation_config.get("cudagraph_capture_sizes") or [seqs]
    capture = max(1, max(sizes) // (1 + r.k))
    dims: list[Dim] = []

    def given_fixed(name: str, keys: tuple[str, ...], value: Any) -> Dim | None:
        if any(given.get(k) not in (None, "auto") for k in keys):
            return Dim(name, "choice", value, choices=(str(value),), fixed=True,
                       source="the request sets " + " and ".join(f"--{k.replace('_', '-')}" for k in keys
                                                                  if given.get(k) not in (None, "auto")))
        return None

    layouts = [layout_text(t, d) for t in _powers(devices) for d in _powers(devices) if t * d <= devices
               and t * d >= nodes]
    start_layout = layout_text(r.tp, r.dp)
    dims.append(given_fixed("layout", ("tp", "dp"), start_layout) or Dim(
        "layout", "choice", start_layout, choices=tuple(sorted(set(layouts) | {start_layout}, key=parse_layout)),
        source=f"TP × DP ≤ {devices} devices ({base.target.id}: {base.target.devices_per_node} per node × {nodes})"))
    start_spec = f"mtp:{r.k}" if r.speculative_method == "mtp" else "off"
    if r.spec_method in ("eagle3", "suffix", "dspark", "dflash"):
        dims.append(Dim("speculative", "choice", r.spec_method, choices=(r.spec_method,), fixed=True,
                        source=f"the request sets --spec-method {r.spec_method}"))
    elif facts["model.mtp_head"] == "absent":
        dims.append(Dim("speculative", "choice", "off", choices=("off",), fixed=True,
                        source=f"{base.model.id} has no MTP head"))
    else:
        dims.append(given_fixed("speculative", ("mtp", "num_speculative_tokens"), start_spec) or Dim(
            "speculative", "choice", start_spec, choices=("off", *(f"mtp:{k}" for k in range(1, MAX_K + 1))),
            source="MTP with k = 1 … 4 (the model has an MTP head)"))
    dims.append(given_fixed("flashcomm1", ("flashcomm1",), _on_off(r.flashcomm1)) or Dim(
        "flashcomm1", "choice", _on_off(r.flashcomm1), choices=("off", "on"), source="FlashComm1 off or on"))
    dims.append(given_fixed("prefix-caching", ("prefix_caching",), _on_off(r.prefix_caching)) or Dim(
        "prefix-caching", "choice", _on_off(r.prefix_caching), choices=("off", "on"), source="prefix caching off or on"))
    top = max(high, seqs)
    step = seqs_step(top)
    dims.append(Dim("max-num-seqs", "int", _on_step(seqs, step, top), low=step, high=top - top % step, step=step,
                    source=f"{step} … {top} sequences per DP group in steps of {step} (the sweep's top c{high})"))
    token_choices = tuple(str(t) for t in sorted({*BATCHED_TOKENS, tokens}))
    dims.append(Dim("max-num-batched-tokens", "choice", str(tokens), choices=token_choices,
                    source="powers of two 1024 … 32768 and the rule's value"))
    share = min(CAPTURE_SHARES, key=lambda x: abs(float(x) - min(1.0, capture / max(seqs, 1))))
    dims.append(Dim("capture-share", "choice", share, choices=CAPTURE_SHARES,
                    source="the capture ladder's top as a share of max-num-seqs (capture-up-to = ⌈share × "
                           "max-num-seqs⌉: graphs for the decode batches up to it, eager above)"))
    out = []
    for d in dims:
        out.append(_adjust(d, fix.get(d.name), ranges.get(d.name), choices.get(d.name)))
    return Space(tuple(out), devices)


def _adjust(d: Dim, fixed: str | None, rng: str | None, options: str | None) -> Dim:
    """The user's --fix / --range / --choices for one knob."""
    if fixed is not None:
        value: Any = _int(d.name, fixed, "--fix") if d.kind == "int" else fixed
        if d.kind == "choice" and d.name == "layout":
            parse_layout(fixed, f"--fix layout={fixed}")
        return Dim(d.name, d.kind, value, d.low, d.high, (str(value),) if d.kind == "choice" else (), True,
                   f"--fix {d.name}={fixed}")
    if rng is not None:
        if d.kind != "int":
            raise TuneError(f"--range {d.name}=…: {d.name} is a choice among {', '.join(d.choices)}; "
                            f"use --choices {d.name}=A,B")
        low_text, sep, high_text = rng.partition(":")
        if not sep:
            raise TuneError(f"--range {d.name}={rng}: write LOW:HIGH, e.g. --range {d.name}=8:128")
        low, high = _int(d.name, low_text, "--range"), _int(d.name, high_text, "--range")
        if low > high:
            raise TuneError(f"--range {d.name}={rng}: LOW {low} is above HIGH {high}")
        start = min(max(d.start, low), high)
        return Dim(d.name, "int", start, low, high, (), d.fixed, f"--range {d.name}={rng}",
                   step=1 if d.step else 0)
    if options is not None:
        if d.kind != "choice":
            raise TuneError(f"--choices {d.name}=…: {d.name} is an integer range; use --range {d.name}=LOW:HIGH")
        picked = tuple(dict.fromkeys(p.strip() for p in options.split(",") if p.strip()))
        if not picked:
            raise TuneError(f"--choices {d.name}=: give at least one value")
        for p in picked:
            if d.name == "layout":
                parse_layout(p, f"--choices layout={options}")
            elif d.name == "max-num-batched-tokens":
                _int(d.name, p, "--choices")
            elif d.name == "speculative" and p != "off" and not (p.startswith("mtp:") and p[4:].isdigit()):
                raise TuneError(f"--choices speculative={options}: each value is off or mtp:K")
            elif d.name in ("flashcomm1", "prefix-caching") and p not in ("on", "off"):
                raise TuneError(f"--choices {d.name}={options}: each value is on or off")
            elif d.name == "capture-share" and not _share(p):
                raise TuneError(f"--choices capture-share={options}: each value is a share above 0 and at most 1")
                raise TuneError(f"--choices {d.name}={options}: each value is on or off")
        start = d.start if d.start in picked else picked[0]
        return Dim(d.name, "choice", start, choices=picked, fixed=len(picked) == 1, source=f"--choices {d.name}={options}")
    return d


def _share(text: str) -> bool:
    try:
        return 0 < float(text) <= 1
    except ValueError:
        return False


def _int(name: str, text: str, flag: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise TuneError(f"{flag} {name}={text}: give a positive integer")
    return int(text)


__all__ = ["Dim", "Space", "build_space", "layout_text", "parse_layout", "KNOB_NAMES", "BATCHED_TOKENS"]
