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


class RecipeRecord(Record):
    """A validated recipe (``optkit.catalog.schema.Recipe``), as the run-time holds it."""

    __slots__ = ()


class GainRecord(GainBehaviour, Record):
    """A validated reported gain (``optkit.catalog.schema.Gain``)."""

    __slots__ = ()


class KernelSpecRecord(Record):
    """A validated kernel spec (``optkit.catalog.kernels.KernelSpec``)."""

    __slots__ = ()
