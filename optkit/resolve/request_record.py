"""The request as the run-time holds it: validated by ``Request``, frozen into a ``RequestRecord``.

``optkit.resolve.request.Request`` (pydantic) is the schema of request files and flags; what it
validates becomes a record (``optkit.catalog.frozen``), as recipes and profiles do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optkit.catalog.frozen import Record

# The vLLM release each vllm-ascend minor pins (the default of --vllm-version).
DEFAULT_VLLM_FOR_ASCEND = {"0.18": "0.18.0", "0.23": "0.23.0", "0.26": "0.26.0"}


class RequestBehaviour:
    """What a request derives from its fields."""

    __slots__ = ()

    @property
    def k(self) -> int:
        """Speculative tokens per step (0 without MTP)."""
        return (self.num_speculative_tokens or 4) if self.mtp else 0


class RequestRecord(RequestBehaviour, Record):
    """A validated request (``optkit.resolve.request.Request``)."""

    __slots__ = ()


def sorted_levels(value: list[int]) -> list[int]:
    """Concurrency levels, each ≥ 1, deduplicated and sorted."""
    if any(c < 1 for c in value):
        raise ValueError("concurrency levels must be ≥ 1")
    return sorted(set(value))


def parse_request(data: Any) -> RequestRecord:
    """``data`` (a mapping of request fields, by name or alias) validated as a ``Request``.

    Raises pydantic's ``ValidationError`` if it is invalid.
    """
    from optkit.catalog.frozen import freeze
    from optkit.resolve.request import RECORDS, Request

    return freeze(Request.model_validate(data), RECORDS)


def load_request(path: Path) -> RequestRecord:
    """Read a YAML request file (the same fields as the CLI flags); problems are located."""
    from optkit.catalog.frozen import freeze
    from optkit.catalog.loader import parse_model
    from optkit.catalog.yamlio import load_yaml
    from optkit.resolve.request import RECORDS, Request

    return freeze(parse_model(Request, *load_yaml(path)), RECORDS)
