"""docs/example-tune/ is what tests/tune/make_example.py writes today: the same bytes (the search is seeded, the
report deterministic), so the docs' example report comes from the command, not from memory."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_example import EXAMPLE, main  # noqa: E402


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_example_tune_is_current(tmp_path):
    main(tmp_path / "example")
    fresh, committed = _files(tmp_path / "example"), _files(EXAMPLE)
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"{stale} differ: run PYTHONPATH=. python tests/tune/make_example.py and commit docs/example-tune/"
