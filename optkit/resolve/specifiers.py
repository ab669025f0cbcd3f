"""Whether a version is in a PEP 440 range (a recipe's ``versions``, ``upstream_in``), as packaging says.

Importing ``packaging.specifiers`` costs more than resolving a plan (it pulls in
``packaging.tags`` and with it logging, platform and subprocess), and a catalog has a handful of
distinct ranges. So packaging answers every range of the catalog at the request's versions once,
and the answers are kept in the catalog cache, keyed by the ranges, the versions, this module and
packaging's installed files: a plan for versions seen before imports only ``packaging.version``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from optkit.catalog.cache import cached

_CODE = ("resolve/specifiers.py",)


class VersionRanges:
    """Answers ``version in specifier`` for the given specifiers at the given versions."""

    def __init__(self, specifiers: Iterable[str], versions: Iterable[object]):
        self._inside = _cached_answers(tuple(sorted(set(specifiers))), tuple(sorted({str(v) for v in versions})))

    def contains(self, specifier: str, version: object) -> bool:
        """Whether ``version`` (one of the given versions) is in ``specifier`` (pre-releases included)."""
        return self._inside[specifier, str(version)]


@lru_cache(maxsize=None)  # the answers to the same questions never change
def _cached_answers(ranges: tuple[str, ...], versions: tuple[str, ...]) -> dict[tuple[str, str], bool]:
    return cached("specifiers", None, lambda: _answers(ranges, versions), code=_CODE,
                  inputs=repr((ranges, versions)).encode())


def _answers(ranges: tuple[str, ...], versions: tuple[str, ...]) -> dict[tuple[str, str], bool]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return {(spec, version): Version(version) in SpecifierSet(spec, prereleases=True)
            for spec in ranges for version in versions}
