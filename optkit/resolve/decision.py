"""What resolution says about each recipe: its ``Status``, the ``Decision`` (why, by which rule and
facts), and the ``Resolution`` of a whole request (``optkit.resolve.resolver``)."""

from __future__ import annotations

from enum import Enum

from optkit.resolve.objective import Benefit
from optkit.value import field, valueclass


class Status(str, Enum):
    selected = "selected"
    not_applicable = "not-applicable"  # version outside the recipe's range
    upstream = "upstream"  # already in this version
    superseded = "superseded"  # the code it changes was replaced upstream
    broken = "broken"  # machinery it calls is gone from this release
    absent = "absent"  # the code it changes is not in this release
    no_patch = "no-patch"  # still new on this release, but no patch set was written for it
    knob_missing = "knob-missing"  # a knob it sets is removed, rejected or ignored by this release
    excluded = "excluded"  # a precondition fails (correctness)
    unavailable = "unavailable"  # cannot be delivered here: op source or patch missing
    user_excluded = "user-excluded"  # --without
    no_effect = "no-effect"  # effective_when fails
    needs_opt_in = "needs-opt-in"  # high-severity risk
    regresses = "regresses"  # slower at a requested concurrency
    objective = "objective"  # valid, but the optimum leaves it out


@valueclass
class Decision:
    """Where one recipe ended and why, with the rule, the facts it read and their values."""

    recipe: str
    status: Status
    reason: str
    rule: str = ""
    facts: dict[str, str] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    benefit: Benefit | None = None
    forced: str = ""  # why it was pinned in: "--with", "implied by spec.mtp = true"
    notes: list[str] = field(default_factory=list)  # what the release changed: knobs renamed or moved, probes
    assumes: list[str] = field(default_factory=list)  # workload defaults it rests on (optkit.resolve.assumptions)


@valueclass
class Resolution:
    decisions: dict[str, Decision]
    selected: list[str]  # dependency order
    upstream: list[str]
