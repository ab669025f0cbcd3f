"""``optkit tune``: the best launch for an SLO, searched over a plan's open knobs on the user's own NPU host.

- ``optkit.tune.space``: the knobs and their domains (the rule-based plan's value first);
- ``optkit.tune.candidate``: a point of the space as a plan, resolved before anything starts;
- ``optkit.tune.study``: the search (Optuna), its storage, resume and the starts budget;
- ``optkit.tune.host``: one trial on the NPU host (patch, start, sweep, stop);
- ``optkit.tune.bundle``: the tune bundle ``optkit tune`` writes (tune.json, run-tune.sh, README, k8s Job);
- ``optkit.tune.results``: the best trial, the Pareto front, the knobs' importance, the report.

docs/tune.md says how to run it.
"""

from __future__ import annotations

from optkit.errors import OptkitError


class TuneError(OptkitError):
    """A tune that cannot be written, run or read: the message names the file, flag or field and the fix."""


__all__ = ["TuneError"]
