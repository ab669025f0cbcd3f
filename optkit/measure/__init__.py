"""Stage 7, measure: the single-variable ladder, its results, the report, verified-on records.

Owns turning a plan into ladder steps (``steps``) and a ladder bundle of complete step bundles with
one ``run-ladder.sh`` (``ladder``; ``k8s``: the ladder as an Indexed Job), what the NPU host records while it runs (``host``: NPU, driver,
CANN, packages, tree digest; ``accuracy``: the fixed prompt set at temperature 0 through the OpenAI
endpoint), reading ``vllm bench serve``'s own result JSON (``results``), the statistics and the
per-recipe attribution (``analysis``), the accuracy gate (``gate``), the report files
(``report``; charts in ``charts``, the only module that imports matplotlib) and writing a
verified-on record from a report (``record``; the record format is ``optkit.catalog.records``), and
the capacity sweep: the search run on the NPU host against a step's server (``sweep``: bracketing and
bisection on concurrency under an SLO) and each step's capacity and each recipe's capacity gain from
its probes (``capacity``).

May import: ``optkit.errors``, ``optkit.catalog``, ``optkit.tree``, ``optkit.versions``,
``optkit.profile``, ``optkit.resolve``, ``optkit.bundle``.
"""

from optkit.errors import OptkitError


class MeasureError(OptkitError):
    """A ladder that cannot be written, results that cannot be read, a record that cannot be made."""


class GateFailed(OptkitError):
    """The accuracy gate did not pass: outputs changed where a recipe claims they do not, or beyond a
    margin (``failures``), or a comparison lacked the outputs to check (``unchecked``)."""

    def __init__(self, failures: list[str], unchecked: list[str] = ()):
        self.failures, self.unchecked = failures, list(unchecked)
        head = "the accuracy gate failed" if failures else "the accuracy gate did not pass: not every comparison was checked"
        super().__init__(head + ":\n" + "\n".join(f"  - {f}" for f in [*failures, *self.unchecked]))
