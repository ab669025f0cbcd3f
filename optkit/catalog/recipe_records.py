"""The record classes of recipes and kernel specs, and the behaviour they share with the models.

``optkit.catalog.schema`` and ``optkit.catalog.kernels`` validate; ``freeze``
(``optkit.catalog.frozen``) turns what they validated into these. A behaviour is a mixin that
the pydantic model and its record class both inherit.
"""

from __future__ import annotations

from optkit.catalog import enums  # noqa: F401 - the records hold its enums: the cache builds them back
from optkit.catalog.frozen import Record

UPSTREAM_RELEASE = "0.23.0"
"""The release the catalog's upstream column describes (and plans default to)."""


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
                    or self.serve_args or self.derived or self.patches or self.kernels)

    def upstream(self, version: str = UPSTREAM_RELEASE) -> tuple[str, str | None]:
        """(status, since) of the recipe's change on ``version``, from one source: the release entry
        covering it (its probes prove it, ``optkit tree inspect``) and, for ``since``, the first release
        of the run of entries with that status up to it; a recipe with no release entries, from
        ``provenance.upstream`` (which describes 0.23.0)."""
        from optkit.catalog.specifiers import contains

        if not self.releases:
            return self.provenance.upstream.status.value, self.provenance.upstream.since
        ordered = sorted(self.releases, key=_lower_bound)
        at = next((i for i, e in enumerate(ordered) if contains(e.versions, version)), None)
        if at is None:
            return "undeclared", None
        start = at
        while start and ordered[start - 1].status == ordered[at].status:
            start -= 1
        since = _lower_bound(ordered[start])
        return ordered[at].status, (str(since) if since.release != (0,) and ordered[at].status != "new" else None)

    def release_entry(self, version):
        """The release entry whose range contains ``version`` (pre-releases included), or None."""
        from optkit.catalog.specifiers import contains

        return next((entry for entry in self.releases if contains(entry.versions, version)), None)

    def patch_versions(self, file: str) -> str:
        """The releases a patch file was written for (its release entry's range; the recipe's own
        range when the recipe declares no release entries)."""
        entry = next((e for e in self.releases if file in e.patches), None)
        return entry.versions if entry else self.versions.vllm_ascend


def know_upstream_ranges(recipes, version: str = UPSTREAM_RELEASE) -> None:
    """Have every release-entry range of ``recipes`` answered at ``version`` at once (from the catalog
    cache when asked before), so listing ``upstream()`` for a whole catalog does not import
    ``packaging.specifiers`` (``optkit.catalog.specifiers``)."""
    from optkit.catalog.specifiers import VersionRanges

    VersionRanges({entry.versions for recipe in recipes for entry in recipe.releases}, [version])


def _lower_bound(entry):
    """The lowest release an entry's range admits (``>=X`` or ``==X``; 0 when it has no lower bound).

    Read from the range's clauses as written (the schema has checked them with packaging): importing
    ``packaging.specifiers`` costs more than a whole ``optkit recipes``."""
    from packaging.version import Version

    bounds = []
    for clause in entry.versions.split(","):
        operator = next((op for op in ("===", ">=", "==") if clause.strip().startswith(op)), None)
        if operator:
            bounds.append(Version(clause.strip()[len(operator):].strip().removesuffix(".*")))
    return max(bounds, default=Version("0"))


class RecipeRecord(RecipeBehaviour, Record):
    """A validated recipe (``optkit.catalog.schema.Recipe``), as the run-time holds it."""

    __slots__ = ()


class GainRecord(GainBehaviour, Record):
    """A validated reported gain (``optkit.catalog.schema.Gain``)."""

    __slots__ = ()


class KernelSpecRecord(Record):
    """A validated kernel spec (``optkit.catalog.kernels.KernelSpec``)."""

    __slots__ = ()
