"""The integral pools' volume history: bounded, spanning from the first sample to the
newest kept, oldest first."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.ui.history import Volume, VolumeHistory


def sample(volume: float) -> dict[str, Volume]:
    return {"research": Volume(volume=volume, capacity=100.0)}


@given(limit=st.integers(min_value=3, max_value=40), offered=st.integers(1, 500))
def test_a_series_stays_within_its_limit_and_keeps_the_first_sample(
    limit: int, offered: int
) -> None:
    history = VolumeHistory(limit=limit)
    for at in range(offered):
        history.record(float(at), sample(float(at)))
    series = history.series("research")
    times = [at for at, _ in series]
    assert 1 <= len(series) < limit
    assert times[0] == 0.0
    assert times == sorted(set(times))
    assert times[-1] >= (offered - 1) / 2  # the plot reaches at least half way to now


def test_thinning_keeps_every_other_sample_and_then_every_second_one() -> None:
    history = VolumeHistory(limit=4)
    for at in range(8):
        history.record(float(at), sample(0.0))
    # 0 1 2 3 -> thinned to 0 2 (stride 2); 5 kept; 7 kept -> 0 2 5 7 -> 0 5 (stride 4)
    assert [at for at, _ in history.series("research")] == [0.0, 5.0]


def test_a_pool_no_longer_sampled_loses_its_series() -> None:
    history = VolumeHistory()
    history.record(1.0, sample(2.0) | {"burst": Volume(volume=1.0, capacity=5.0)})
    history.record(2.0, sample(3.0))
    assert history.series("burst") == []
    assert history.series("research") == [
        (1.0, Volume(volume=2.0, capacity=100.0)),
        (2.0, Volume(volume=3.0, capacity=100.0)),
    ]
    assert history.series("never") == []


@pytest.mark.parametrize("limit", [0, 2])
def test_a_limit_below_three_is_refused(limit: int) -> None:
    with pytest.raises(ValueError, match="at least 3 samples"):
        VolumeHistory(limit=limit)
