"""Whether a version is in a PEP 440 range (a recipe's ``versions``, a release entry's range), as
packaging says.

Importing ``packaging.specifiers`` costs more than resolving a plan (it pulls in
``packaging.tags`` and with it logging, platform and subprocess), and a catalog has a handful of
distinct ranges. So a plan asks packaging every range of the catalog at the request's versions at
once (``VersionRanges``), and the answers are kept in the catalog cache, keyed by the ranges, the
versions, this module and packaging's installed files: a plan for versions seen before imports
only ``packaging.version``. ``contains`` answers any question: from what was answered in this
process, else from packaging.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from optkit.catalog.cache import cached

_CODE = ("catalog/specifiers.py",)
_KNOWN: dict[tuple[str, str], bool] = {}  # every answer given in this process (they never change)


class VersionRanges:
    """Answers ``version in specifier`` for the given specifiers at the given versions (and, like
    ``contains``, any other question)."""

    def __init__(self, specifiers: Iterable[str], versions: Iterable[object]):
        self._inside = _cached_answers(tuple(sorted(set(specifiers))), tuple(sorted({str(v) for v in versions})))
        _KNOWN.update(self._inside)

    def contains(self, specifier: str, version: object) -> bool:
        """Whether ``version`` is in ``specifier`` (pre-releases included)."""
        found = self._inside.get((specifier, str(version)))
        return contains(specifier, version) if found is None else found


def contains(specifier: str, version: object) -> bool:
    """Whether ``version`` is in ``specifier`` (pre-releases included)."""
    key = (specifier, str(version))
    found = _KNOWN.get(key)
    if found is None:
        found = _KNOWN[key] = _answers((specifier,), (str(version),))[key]
    return found


@lru_cache(maxsize=None)  # the answers to the same questions never change
def _cached_answers(ranges: tuple[str, ...], versions: tuple[str, ...]) -> dict[tuple[str, str], bool]:
    return cached("specifiers", None, lambda: _answers(ranges, versions), code=_CODE,
                  inputs=repr((ranges, versions)).encode())


def _answers(ranges: tuple[str, ...], versions: tuple[str, ...]) -> dict[tuple[str, str], bool]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return {(spec, version): Version(version) in SpecifierSet(spec, prereleases=True)
            for spec in ranges for version in versions}
