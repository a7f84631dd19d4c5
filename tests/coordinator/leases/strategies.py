"""Hypothesis strategies and small helpers shared by the lease tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import strategies as st

# Wants mix round numbers (ties, exact fits) with arbitrary floats.
wants_values = st.one_of(
    st.sampled_from([0.0, 1.0, 5.0, 10.0, 50.0, 100.0]),
    st.floats(min_value=0, max_value=1000, allow_nan=False, allow_infinity=False),
)
capacities = st.one_of(
    st.sampled_from([0.0, 10.0, 120.0, 1000.0]),
    st.floats(min_value=0, max_value=5000, allow_nan=False, allow_infinity=False),
)


@st.composite
def claims(draw: st.DrawFn, max_size: int = 12) -> tuple[float, list[float], list[int], list[int]]:
    """(capacity, wants, weights, priorities) with equal lengths."""
    n = draw(st.integers(min_value=0, max_value=max_size))
    wants = draw(st.lists(wants_values, min_size=n, max_size=n))
    weights = draw(st.lists(st.integers(min_value=1, max_value=5), min_size=n, max_size=n))
    priorities = draw(st.lists(st.integers(min_value=-2, max_value=2), min_size=n, max_size=n))
    return draw(capacities), wants, weights, priorities


def band_offers(
    capacity: float, wants: Sequence[float], priorities: Sequence[int]
) -> dict[int, float]:
    """What each band is offered: capacity minus the wants of every higher band, >= 0."""
    return {
        p: max(
            0.0, capacity - math.fsum(w for w, q in zip(wants, priorities, strict=True) if q > p)
        )
        for p in set(priorities)
    }
