"""Release ranges (PEP 440 specifier sets) against the releases optkit knows: which ones a range
covers, and a range split around a run of them.

``split`` cuts a recipe's release entry into the releases before a run, the run, and the releases
after it, so that together they cover exactly what the entry covered (releases optkit does not know
included): the cuts sit at the run's first release and at the first known release after it, and a
side with no known release is left to the run (it keeps the entry's own bound there).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from optkit.versions.probes import in_range

_LOWER, _UPPER = (">=", ">"), ("<", "<=")


def covered(spec: str, releases: list[str]) -> list[str]:
    """The releases (oldest first) in the range ``spec``."""
    return sorted((r for r in releases if in_range(Version(r), spec)), key=Version)


@dataclass(frozen=True)
class Split:
    """A range cut around a run of its releases; ``before``/``after`` are None when empty."""

    before: str | None
    run: str
    after: str | None


def split(spec: str, releases: list[str], run: list[str]) -> Split:
    """Cut ``spec`` around ``run`` (consecutive releases of ``covered(spec, releases)``)."""
    inside = covered(spec, releases)
    first, last = inside.index(run[0]), inside.index(run[-1])
    before, after = inside[:first], inside[last + 1:]
    lower, upper, other = _bounds(spec)
    run_lower = [f">={run[0]}"] if before else lower
    run_upper = [f"<{after[0]}"] if after else upper
    return Split(_join(lower + [f"<{run[0]}"], other) if before else None,
                 _join(run_lower + run_upper, other),
                 _join([f">={after[0]}"] + upper, other) if after else None)


def _bounds(spec: str) -> tuple[list[str], list[str], list[str]]:
    """(the tightest lower bound, the tightest upper bound, every other clause) of ``spec``; an
    exact ``==X`` is both bounds."""
    lower: list[tuple[Version, str]] = []
    upper: list[tuple[Version, str]] = []
    other = []
    for clause in SpecifierSet(spec):
        op, version = clause.operator, clause.version
        if op == "==" and "*" not in version:
            lower.append((Version(version), f">={version}"))
            upper.append((Version(version), f"<={version}"))
        elif op in _LOWER:
            lower.append((Version(version), f"{op}{version}"))
        elif op in _UPPER:
            upper.append((Version(version), f"{op}{version}"))
        else:
            other.append(str(clause))
    # the tightest: the highest lower bound (">" beats ">=" at one version), the lowest upper one
    low = max(lower, key=lambda b: (b[0], b[1].startswith(">") and not b[1].startswith(">=")), default=None)
    high = min(upper, key=lambda b: (b[0], b[1].startswith("<=")), default=None)
    return ([low[1]] if low else []), ([high[1]] if high else []), sorted(other)


def _join(bounds: list[str], other: list[str]) -> str:
    if len(bounds) == 2 and bounds[0].startswith(">=") and bounds[1].startswith("<=") and bounds[0][2:] == bounds[1][2:]:
        bounds = [f"=={bounds[0][2:]}"]
    return ",".join(bounds + other)
