"""The pure parts of failed-authentication accounting: the log throttle (one line a
period, with the count since the last) and the per-source penalty book."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.auth_failures import FailureBook
from coordinator.log_throttle import LogThrottle

# Failures as (source, seconds since the one before): sources from a small alphabet so
# that they repeat.
failures = st.lists(
    st.tuples(st.sampled_from("abcdefgh"), st.floats(0, 200, allow_nan=False)), max_size=200
)


def test_the_first_event_is_logged_at_once_and_later_ones_as_a_count() -> None:
    throttle = LogThrottle(every=60.0)
    assert [throttle.event(now) for now in (0.0, 1.0, 59.9)] == [1, None, None]
    assert throttle.pending == 2
    assert throttle.next_line_at() == 60.0
    assert throttle.due(59.99) is None
    assert throttle.due(60.0) == 2
    assert throttle.due(500.0) is None  # nothing counted since
    assert throttle.event(500.0) == 1


@pytest.mark.parametrize("every", [0.0, -1.0])
def test_a_throttle_needs_a_positive_period(every: float) -> None:
    with pytest.raises(ValueError, match="every must be positive"):
        LogThrottle(every=every)


@given(st.lists(st.tuples(st.booleans(), st.floats(0, 100, allow_nan=False)), max_size=100))
def test_lines_are_a_period_apart_and_count_every_event(steps: list[tuple[bool, float]]) -> None:
    """Steps: an event (True) or a look for a due line (False), each after a gap."""
    throttle = LogThrottle(every=60.0)
    now, events, lines = 0.0, 0, []
    for is_event, gap in steps:
        now += gap
        events += is_event
        count = throttle.event(now) if is_event else throttle.due(now)
        if count is not None:
            lines.append((now, count))
    times = [t for t, _ in lines]
    assert all(later >= earlier + 60.0 for earlier, later in itertools.pairwise(times))
    assert sum(count for _, count in lines) + throttle.pending == events


def test_the_first_failures_are_free_then_each_doubles_the_delay_up_to_the_cap() -> None:
    book = FailureBook(free=3, base_delay_s=0.1, max_delay_s=1.0)
    delays = [book.failed("10.0.0.7", now=0.0).delay_s for _ in range(10)]
    assert delays == [0.0, 0.0, 0.0, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]


def test_a_quiet_source_is_forgiven_and_others_never_pay_for_it() -> None:
    book = FailureBook(free=3, base_delay_s=0.1, max_delay_s=1.0, half_life_s=60.0)
    for _ in range(20):
        book.failed("10.0.0.7", now=0.0)
    assert book.failed("10.0.0.8", now=0.0).delay_s == 0.0
    assert book.failed("10.0.0.7", now=1.0).delay_s == 1.0
    assert book.failed("10.0.0.7", now=1.0 + 10 * 60.0).delay_s == 0.0  # 21/1024 left


def test_each_source_is_logged_once_a_minute_with_the_count_since() -> None:
    book = FailureBook(log_every_s=60.0)
    assert book.failed("a", 0.0).report == 1
    assert book.failed("b", 0.0).report == 1
    assert [book.failed("a", t).report for t in (1.0, 2.0, 3.0)] == [None] * 3
    assert book.next_line_at() == 60.0
    assert book.due(59.0) == []
    assert book.due(60.0) == [("a", 3)]
    assert book.next_line_at() is None
    assert book.failed("a", 61.0).report is None  # a line was logged at 60
    assert book.failed("a", 120.0).report == 2


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_sources": 0}, "max_sources >= 1"),
        ({"half_life_s": 0.0}, "half_life_s > 0"),
        ({"base_delay_s": 3.0, "max_delay_s": 2.0}, "base_delay_s <= max_delay_s"),
    ],
)
def test_a_book_refuses_settings_that_make_no_sense(
    settings: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        FailureBook(**settings)  # type: ignore[arg-type]


@given(failures)
def test_delays_stay_within_bounds_and_logs_count_every_failure(
    sequence: list[tuple[str, float]],
) -> None:
    book = FailureBook(free=2, base_delay_s=0.05, max_delay_s=0.5, log_every_s=60.0)
    now, logged, last_line = 0.0, 0, {}
    for source, gap in sequence:
        now += gap
        for line_source, count in book.due(now):
            logged += count
            last_line[line_source] = now
        verdict = book.failed(source, now)
        assert 0.0 <= verdict.delay_s <= 0.5
        if verdict.report is not None:
            assert now >= last_line.get(source, -1e9) + 60.0
            logged += verdict.report
            last_line[source] = now
    logged += sum(count for _, count in book.due(now + 60.0))
    assert logged == len(sequence)


@given(failures)
def test_more_failures_at_once_never_lower_the_delay(sequence: list[tuple[str, float]]) -> None:
    book = FailureBook()
    now = 0.0
    for source, gap in sequence:
        now += gap
        first = book.failed(source, now).delay_s
        assert book.failed(source, now).delay_s >= first


@given(st.lists(st.integers(0, 10_000), max_size=300))
def test_a_flood_of_sources_costs_bounded_memory(sources: list[int]) -> None:
    book = FailureBook(max_sources=50)
    for index, source in enumerate(sources):
        book.failed(f"10.0.{source // 256}.{source % 256}", now=float(index))
        assert len(book) <= 50
