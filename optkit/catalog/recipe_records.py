"""The record classes of recipes and kernel specs, and the behaviour they share with the models.

``optkit.catalog.schema`` and ``optkit.catalog.kernels`` validate; ``freeze``
(``optkit.catalog.frozen``) turns what they validated into these. A behaviour is a mixin that
the pydantic model and its record class both inherit.
"""

from __future__ import annotations

from optkit.catalog import enums  # noqa: F401 - the records hold its enums: the cache builds them back
from optkit.catalog.frozen import Record


class GainBehaviour:
    """What a reported gain computes from its numbers."""

    __slots__ = ()

    @property
    def change(self) -> float:
        """after - before (negative = lower)."""
        return self.delta if self.delta is not None else self.after - self.before


class RecipeBehaviour:
    """What a recipe answers from its fields."""

    __slots__ = ()

    @property
    def changes_launch(self) -> bool:
        """Whether it changes what the server runs (settings, arguments, patches or kernels); a recipe
        that does not (e.g. a precondition on the release) has nothing to measure or gate."""
        return bool(self.env or self.additional_config or self.compilation_config or self.speculative_config
                    or self.serve_args or self.patches or self.kernels)

    def patch_versions(self, file: str) -> str:
        """The releases a patch file was written for (its release entry's range; the recipe's own
        range when the recipe declares no release entries)."""
        entry = next((e for e in self.releases if file in e.patches), None)
        return entry.versions if entry else self.versions.vllm_ascend


class RecipeRecord(RecipeBehaviour, Record):
    """A validated recipe (``optkit.catalog.schema.Recipe``), as the run-time holds it."""

    __slots__ = ()


class GainRecord(GainBehaviour, Record):
    """A validated reported gain (``optkit.catalog.schema.Gain``)."""

    __slots__ = ()


class KernelSpecRecord(Record):
    """A validated kernel spec (``optkit.catalog.kernels.KernelSpec``)."""

    __slots__ = ()
