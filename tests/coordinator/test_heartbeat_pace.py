"""The heartbeat pace: intervals that stretch with the fleet under the ceiling of
heartbeats per second, leases that follow them, and as few re-paces as the rule allows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.heartbeat_pace import Pace, Pacer, pace_of

fleets = st.lists(st.integers(min_value=0, max_value=2_000), min_size=1, max_size=20)
ceilings = st.sampled_from([1.0, 7.5, 50.0, 400.0])


@pytest.mark.parametrize(
    ("agents", "expected"),
    [
        (0, Pace(5.0, 15.0)),
        (250, Pace(5.0, 15.0)),
        (1_000, Pace(20.0, 60.0)),
        (10_000, Pace(200.0, 600.0)),
    ],
    ids=["none", "at-the-knee", "1k", "10k"],
)
def test_the_interval_is_the_larger_of_the_setting_and_the_fleet_over_the_ceiling(
    agents: int, expected: Pace
) -> None:
    assert (
        pace_of(agents, heartbeat_seconds=5.0, lease_seconds=15.0, max_per_second=50.0) == expected
    )


@given(fleets, ceilings)
def test_the_fleet_never_beats_faster_than_the_ceiling(sizes: list[int], ceiling: float) -> None:
    """Each agent beats at the pace it was last given (on connecting, or the re-pace the
    pacer asks for); whatever the fleet does, the fleet's rate stays under the ceiling,
    no interval is below the setting and every lease is three of its intervals."""
    pacer = Pacer(heartbeat_seconds=5.0, lease_seconds=15.0, max_per_second=ceiling)
    given_pace: list[Pace] = []
    for size in sizes:
        del given_pace[size:]  # agents leave
        while len(given_pace) < size:  # agents connect, one at a time
            pace, grew = pacer.pace_for(agents=len(given_pace) + 1)
            given_pace.append(pace)
            if grew:
                given_pace = [pace] * len(given_pace)
        rate = sum(1 / pace.heartbeat_seconds for pace in given_pace)
        assert rate <= ceiling * (1 + 1e-9)
        for pace in given_pace:
            assert pace.heartbeat_seconds >= 5.0
            assert pace.lease_seconds == pytest.approx(3 * pace.heartbeat_seconds)


@given(fleets)
def test_the_pace_never_shrinks_and_grows_only_when_it_says_so(sizes: list[int]) -> None:
    pacer = Pacer(heartbeat_seconds=5.0, lease_seconds=15.0, max_per_second=50.0)
    before = pacer.pace
    for size in sizes:
        pace, grew = pacer.pace_for(agents=size)
        assert pace >= before
        assert grew == (pace > before)
        before = pace


def test_a_fleet_of_ten_thousand_is_re_paced_a_few_times_not_once_per_agent() -> None:
    pacer = Pacer(heartbeat_seconds=5.0, lease_seconds=15.0, max_per_second=50.0)
    re_paces = sum(pacer.pace_for(agents=n)[1] for n in range(1, 10_001))
    assert re_paces <= 17
    assert 10_000 / pacer.pace.heartbeat_seconds <= 50.0


@pytest.mark.parametrize(
    ("beat", "lease", "ceiling", "message"),
    [
        (
            5.0,
            5.0,
            50.0,
            "heartbeat_seconds (5) must be above 0 and shorter than lease_seconds (5)",
        ),
        (0.0, 5.0, 50.0, "heartbeat_seconds (0) must be above 0"),
        (5.0, 15.0, 0.0, "max_heartbeats_per_second (0) must be above 0"),
    ],
    ids=["beat-not-shorter", "beat-zero", "ceiling-zero"],
)
def test_bad_settings_are_refused_with_their_numbers(
    beat: float, lease: float, ceiling: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Pacer(heartbeat_seconds=beat, lease_seconds=lease, max_per_second=ceiling)
