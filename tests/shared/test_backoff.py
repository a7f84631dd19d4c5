"""Capped exponential backoff with full jitter, with the randomness injected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.backoff import Backoff


def delays(backoff: Backoff, count: int) -> list[float]:
    return [backoff.next_delay() for _ in range(count)]


def test_the_upper_bound_doubles_up_to_the_cap() -> None:
    backoff = Backoff(initial=0.5, cap=30, uniform=lambda: 1.0)

    assert delays(backoff, 9) == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert backoff.attempts == 9


@pytest.mark.parametrize(
    ("draw", "expected"),
    [
        pytest.param(0.0, [0.0] * 5, id="bottom"),
        pytest.param(0.5, [0.5, 1, 2, 4, 5], id="middle"),
    ],
)
def test_the_delay_is_the_drawn_fraction_of_the_bound(draw: float, expected: list[float]) -> None:
    backoff = Backoff(initial=1, cap=10, uniform=lambda: draw)

    assert delays(backoff, 5) == expected


def test_reset_starts_over() -> None:
    backoff = Backoff(initial=1, cap=60, uniform=lambda: 1.0)
    delays(backoff, 4)

    backoff.reset()

    assert backoff.attempts == 0
    assert delays(backoff, 3) == [1, 2, 4]
    assert backoff.attempts == 3


def test_thousands_of_attempts_stay_at_the_cap() -> None:
    backoff = Backoff(initial=0.1, cap=30, uniform=lambda: 1.0)

    assert set(delays(backoff, 2000)[-1500:]) == {30}
    assert backoff.attempts == 2000


@given(
    initial=st.floats(0.001, 10),
    cap=st.floats(0.001, 600),
    draws=st.lists(st.floats(0, 1, exclude_max=True), max_size=80),
)
def test_every_delay_is_within_the_window(initial: float, cap: float, draws: list[float]) -> None:
    remaining = iter(draws)
    backoff = Backoff(initial=initial, cap=cap, uniform=lambda: next(remaining))

    for n, delay in enumerate(delays(backoff, len(draws))):
        assert 0 <= delay <= min(cap, initial * 2**n)


def test_a_lower_cap_takes_effect_at_once_and_the_first_cap_stays_the_most() -> None:
    backoff = Backoff(initial=1, cap=30, uniform=lambda: 1.0)
    delays(backoff, 6)

    backoff.cap_at(3.75)
    assert delays(backoff, 2) == [3.75, 3.75]

    backoff.cap_at(100)
    assert delays(backoff, 1) == [30]


@given(
    cap=st.floats(min_value=0.01, max_value=1e6),
    limit=st.floats(min_value=0.01, max_value=1e6),
    attempts=st.integers(min_value=0, max_value=200),
)
def test_no_delay_exceeds_the_lower_of_the_two_caps(
    cap: float, limit: float, attempts: int
) -> None:
    backoff = Backoff(initial=0.5, cap=cap, uniform=lambda: 1.0)
    backoff.cap_at(limit)

    assert max(delays(backoff, attempts + 1)) <= min(cap, limit)
