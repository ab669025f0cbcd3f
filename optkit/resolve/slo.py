"""A service-level objective: bounds on latency statistics, e.g. ``tpot_p99<=20ms,ttft_p99<=1s``.

The grammar, one term per bound, terms separated by commas::

    term   := metric "_" stat ("<=" | "<") number unit
    metric := ttft | tpot | itl | e2el       (vLLM bench serve's --percentile-metrics)
    stat   := mean | median | pNN[.N]       (p50, p90, p99, p99.9, ...)
    unit   := us | ms | s

A bound names the field of ``vllm bench serve``'s result JSON it is checked against
(``p99_tpot_ms``, ``mean_ttft_ms``) and its share of vLLM's ``--goodput`` option (a per-request
bound in milliseconds). ``<`` and ``<=`` are the same bound here: the statistics are measured, not
exact, and optkit never decides on the boundary.

Nothing here imports more than the standard library: the plan path parses an SLO.
"""

from __future__ import annotations

import re
from typing import Mapping

from optkit.errors import RequestError
from optkit.value import valueclass

METRICS = ("ttft", "tpot", "itl", "e2el")
METRIC_NAMES = {"ttft": "time to first token", "tpot": "time per output token",
                "itl": "inter-token latency", "e2el": "end-to-end latency"}
_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
_TERM = re.compile(r"^(?P<metric>[a-z0-9]+)_(?P<stat>mean|median|p\d{1,3}(?:\.\d{1,3})?)\s*(?P<op><=|<)\s*"
                   r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>us|ms|s)$")
MAX_TERMS = 16
BASE_PERCENTILES = ("50", "90", "99")
"""The percentiles every benchmark run reports, SLO or not (bench.sh's ``--metric-percentiles``)."""


class SloError(RequestError):
    """An SLO text that does not parse: names the term, the flag or file, and the fix."""


@valueclass(frozen=True)
class Bound:
    """One bound: ``stat`` of ``metric`` at most ``limit_ms`` milliseconds."""

    metric: str
    stat: str
    limit_ms: float

    @property
    def result_key(self) -> str:
        """The field of vLLM bench serve's result JSON that holds this statistic."""
        return f"{self.stat}_{self.metric}_ms"

    @property
    def percentile(self) -> float | None:
        """The percentile a ``pNN`` stat asks for (``median`` is 50), None for ``mean``."""
        if self.stat == "mean":
            return None
        return 50.0 if self.stat == "median" else float(self.stat[1:])

    def text(self) -> str:
        return f"{self.metric}_{self.stat}<={_fmt_ms(self.limit_ms)}"

    def met_by(self, value_ms: float) -> bool:
        return value_ms <= self.limit_ms


@valueclass(frozen=True)
class Slo:
    """A set of bounds, one per metric and statistic, in a canonical order."""

    bounds: tuple[Bound, ...]

    def text(self) -> str:
        """The canonical text: parse(text()) == self, and equal SLOs print the same."""
        return ",".join(b.text() for b in self.bounds)

    def __str__(self) -> str:
        return self.text()

    def bound(self, metric: str, stat: str | None = None) -> Bound | None:
        """The bound on ``metric`` (the tightest percentile one when ``stat`` is None)."""
        found = [b for b in self.bounds if b.metric == metric and (stat is None or b.stat == stat)]
        return min(found, key=lambda b: b.limit_ms) if found else None

    def percentiles(self) -> list[str]:
        """The percentiles a benchmark must report so every bound can be checked ('50,90,99')."""
        wanted = {b.percentile for b in self.bounds if b.percentile is not None}
        return [_fmt_number(p) for p in sorted(wanted)]

    def report_percentiles(self) -> list[str]:
        """``--metric-percentiles`` of a run checked against this SLO: its own and 50, 90, 99 (``percentiles``)."""
        return sorted({*self.percentiles(), *BASE_PERCENTILES}, key=float)

    def violations(self, result: Mapping[str, object]) -> list[str]:
        """What a benchmark result misses: one sentence per bound not met or not measured."""
        out = []
        for b in self.bounds:
            value = result.get(b.result_key)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                out.append(f"{b.text()}: the result has no {b.result_key}")
            elif not b.met_by(float(value)):
                out.append(f"{b.text()}: measured {_fmt_ms(float(value))}")
        return out

    def met_by(self, result: Mapping[str, object]) -> bool:
        return not self.violations(result)

    def goodput_args(self) -> list[str]:
        """vLLM bench serve's ``--goodput`` values: per-request bounds in ms (ttft, tpot, e2el).

        vLLM counts a request as good when each of its own latencies is within the bound; it knows
        ttft, tpot and e2el (not itl). The tightest bound per metric is used.
        """
        terms = []
        for metric in ("ttft", "tpot", "e2el"):
            b = self.bound(metric)
            if b is not None:
                terms.append(f"{metric}:{_fmt_number(b.limit_ms)}")
        return terms


@valueclass(frozen=True)
class BoundCheck:
    """One bound of the request's SLO held against the plan's own TPOT estimate (``feasibility``)."""

    bound: str  # the bound's canonical text, e.g. tpot_p99<=1ms
    verdict: str  # infeasible, within-estimate or no-estimate
    margin_ms: float | None  # the highest estimate minus the limit (> 0: over the bound); None without a number
    text: str

    def data(self) -> dict:
        return {"bound": self.bound, "verdict": self.verdict, "margin_ms": self.margin_ms, "text": self.text}


def feasibility(slo: Slo, estimates: list[tuple[int, float | None]]) -> list[BoundCheck]:
    """Each bound of ``slo`` against the plan's TPOT estimate per concurrency (``(c, ms or None)``).

    The estimate is of a typical TPOT (the article's figures), so it speaks for a bound on TPOT's mean,
    median or a percentile of 50 or more: where it exceeds the limit at a requested concurrency, such a
    bound cannot hold by the plan's own number (``infeasible``, with the margin); where it is within the
    limit, a mean or median bound holds by it and a percentile is not estimated (``within-estimate``,
    saying so). Any other bound (TTFT, ITL, E2EL, a percentile below 50), or TPOT with no estimate at
    any concurrency, is ``no-estimate``, said in those words."""
    known = [(c, ms) for c, ms in estimates if ms is not None]
    out = []
    for b in slo.bounds:
        pct = b.percentile
        if b.metric != "tpot" or (pct is not None and pct < 50):
            out.append(BoundCheck(b.text(), "no-estimate", None,
                                  f"{b.text()}: no estimate for this statistic (optkit estimates a typical TPOT only)"))
            continue
        if not known:
            out.append(BoundCheck(b.text(), "no-estimate", None,
                                  f"{b.text()}: no estimate for this statistic (the plan estimates no TPOT for "
                                  "this request)"))
            continue
        c, worst = max(known, key=lambda pair: (pair[1], -pair[0]))
        margin = round(worst - b.limit_ms, 3)
        missing = [cc for cc, ms in estimates if ms is None]
        at = ", ".join(f"c{cc} ≈ {ms:.3g} ms" for cc, ms in known) + (
            f"; none at {', '.join(f'c{cc}' for cc in missing)}" if missing else "")
        if margin > 0:
            out.append(BoundCheck(b.text(), "infeasible", margin,
                                  f"{b.text()}: infeasible by the plan's own estimate ({at}): c{c} is "
                                  f"{margin:.3g} ms over the bound"))
        elif pct is None or b.stat == "median":
            out.append(BoundCheck(b.text(), "within-estimate", margin,
                                  f"{b.text()}: within the plan's estimate ({at}; {-margin:.3g} ms to spare)"))
        else:
            out.append(BoundCheck(b.text(), "within-estimate", margin,
                                  f"{b.text()}: the plan's typical TPOT ({at}) is {-margin:.3g} ms under the "
                                  f"bound; no estimate for the {b.stat} itself"))
    return out


def parse_slo(text: str, where: str = "--slo") -> Slo:
    """Parse an SLO; ``where`` names the flag or ``file:line: field`` an error points at."""
    if not isinstance(text, str):
        raise SloError(f"{where}: an SLO is a text such as 'tpot_p99<=20ms,ttft_p99<=1s', not {type(text).__name__}")
    terms = [t.strip() for t in text.split(",")]
    if not text.strip():
        raise SloError(f"{where}: empty SLO; write bounds such as 'tpot_p99<=20ms,ttft_p99<=1s'")
    if len(terms) > MAX_TERMS:
        raise SloError(f"{where}: {len(terms)} terms; an SLO holds at most {MAX_TERMS}")
    bounds: dict[tuple[str, str], Bound] = {}
    for n, term in enumerate(terms, 1):
        if not term:
            raise SloError(f"{where}: term {n} is empty (a stray comma?)")
        bound = _parse_term(term.lower(), n, where)
        key = (bound.metric, "p50" if bound.stat == "median" else bound.stat)  # median is p50: one bound
        if key in bounds:
            same = "" if bounds[key].stat == bound.stat else " (the median is p50)"
            raise SloError(f"{where}: {bound.metric}_{key[1]} is bounded twice{same} "
                           f"({bounds[key].text()} and {bound.text()}); keep one")
        bounds[key] = bound
    return Slo(tuple(sorted(bounds.values(), key=lambda b: (METRICS.index(b.metric), _stat_order(b.stat)))))


def _parse_term(term: str, n: int, where: str) -> Bound:
    m = _TERM.match(term)
    if m is None:
        hint = _term_hint(term)
        raise SloError(f"{where}: term {n} {term!r} is not <metric>_<stat><=<value><unit>; {hint}")
    metric, stat = m["metric"], m["stat"]
    if metric not in METRICS:
        from optkit.errors import did_you_mean

        near = did_you_mean(metric, METRICS)
        raise SloError(f"{where}: term {n} {term!r}: unknown metric {metric!r}; known: {', '.join(METRICS)}"
                       + (f"; {near}" if near else ""))
    if stat.startswith("p"):
        p = float(stat[1:])
        if not 0 < p < 100:
            raise SloError(f"{where}: term {n} {term!r}: percentile {stat[1:]} is not between 0 and 100 (exclusive)")
        stat = "p" + _fmt_number(p)
    limit = float(m["value"]) * _UNITS_MS[m["unit"]]
    if limit <= 0:
        raise SloError(f"{where}: term {n} {term!r}: a latency bound must be above zero")
    if limit > 86_400_000:
        raise SloError(f"{where}: term {n} {term!r}: a bound above a day is no service-level objective")
    return Bound(metric, stat, limit)


def _term_hint(term: str) -> str:
    stat = re.match(r"^[a-z0-9]+_([a-z]+)", term)
    if stat and stat[1] in ("avg", "average"):
        return f"write mean for the average (e.g. '{term.split('_')[0]}_mean<=20ms')"
    if ">" in term:
        return "an SLO bounds latencies from above: use <= (e.g. 'tpot_p99<=20ms')"
    if re.search(r"\d$", term):
        return "add a unit: us, ms or s (e.g. 'tpot_p99<=20ms')"
    if "_" not in term.split("<")[0]:
        return "name a statistic after the metric: mean, median or pNN (e.g. 'ttft_p99<=1s')"
    return "e.g. 'tpot_p99<=20ms,ttft_p99<=1s'"


def _stat_order(stat: str) -> tuple[int, float]:
    if stat == "mean":
        return (0, 0.0)
    return (1, 50.0 if stat == "median" else float(stat[1:]))


def _fmt_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _fmt_ms(ms: float) -> str:
    if ms >= 1000 and (ms / 1000).is_integer():
        return f"{int(ms // 1000)}s"
    if ms < 1 and not ms.is_integer():
        return f"{_fmt_number(round(ms * 1000, 6))}us"
    return f"{_fmt_number(round(ms, 6))}ms"
