"""Lines of the values in a YAML document, by field path: how every problem names ``file:line``.

Kept apart from the YAML reader (``optkit.catalog.yamlio``) so that line maps loaded from the
catalog cache need no YAML library.
"""

from __future__ import annotations


from optkit.errors import Location
from optkit.value import field, valueclass

PathKey = tuple


@valueclass
class LineMap:
    """Lines of the values in one YAML document, keyed by their path."""

    file: str
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line_of(self, path: PathKey) -> int | None:
        """The line of ``path``, or of its longest known prefix."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            # a mapping's keys are kept as text: pydantic names a YAML key 1 (an int) as 1, not '1'
            as_key = (*path[:-1], str(path[-1]))
            if isinstance(path[-1], int) and as_key in self.lines:
                return self.lines[as_key]
            path = path[:-1]
        return self.lines.get(())

    def location(self, path: PathKey) -> Location:
        return Location(self.file, self.line_of(path), dotted(path))


def dotted(path: PathKey) -> str:
    """``('conflicts', 0, 'when')`` → ``conflicts[0].when``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
