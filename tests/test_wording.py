"""Small wording cases a user met (issue 25, item 26): each a table of what optkit says."""

from __future__ import annotations

import pytest

from optkit.resolve.resolver import _signed_ms


@pytest.mark.parametrize("ms, text", [
    (0.0, "no change"), (-0.0, "no change"), (0.0001, "−0.0001 ms"), (1.234, "−1.23 ms"),
    (-0.5, "+0.5 ms"),
], ids=["zero", "negative-zero", "small", "saved", "added"])
def test_a_tpot_change_is_signed_and_never_minus_zero(ms, text):
    assert _signed_ms(ms) == text
