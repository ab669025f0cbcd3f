"""Reading a ``vllm serve`` argv in tests."""

from __future__ import annotations


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value after ``flag`` in ``argv`` (None when the flag is absent)."""
    return argv[argv.index(flag) + 1] if flag in argv else None
