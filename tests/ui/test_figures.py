"""The quota bars and the volume plots, from the numbers the services give."""

from __future__ import annotations

import pytest

from coordinator.ui.figures import PLOT_HEIGHT, PLOT_WIDTH, QuotaBar, quota_bars, volume_plot
from coordinator.ui.history import Volume
from shared.api.quotas import QuotaStatus, QuotaView

MI = 2**20


def quota(
    min_: dict[str, int | str],
    max_: dict[str, int | str] | None,
    used: dict[str, int | str],
    over: dict[str, int | str],
) -> QuotaView:
    return QuotaView(
        name="team-a",
        kind="ElasticQuota",
        namespaces=["team-a"],
        min=min_,
        max=max_,
        status=QuotaStatus(used=used, over_quota=over),
    )


@pytest.mark.parametrize(
    ("view", "bar"),
    [
        pytest.param(
            quota({"cpu": "0.5"}, {"cpu": "2"}, {"cpu": "1"}, {"cpu": "0.5"}),
            QuotaBar("cpu", "0.5", "1", "2", 25.0, 50.0, "0.5", over_max=False),
            id="borrowing-within-max",
        ),
        pytest.param(
            quota({"cpu": "2"}, {"cpu": "4"}, {"cpu": "1.5"}, {"cpu": "0"}),
            QuotaBar("cpu", "2", "1.5", "4", 50.0, 37.5, "", over_max=False),
            id="within-min",
        ),
        pytest.param(
            quota({}, None, {"memory": 512 * MI}, {}),
            QuotaBar("memory", "0", "512.0Mi", "no max", 0.0, 80.0, "", over_max=False),
            id="no-min-no-max",
        ),
        pytest.param(
            quota({"cpu": "1"}, {"cpu": "1"}, {"cpu": "1.5"}, {"cpu": "0.5"}),
            QuotaBar("cpu", "1", "1.5", "1", 100.0, 100.0, "0.5", over_max=True),
            id="over-max-after-the-max-was-lowered",
        ),
        pytest.param(
            quota({"cpu": "0"}, {"cpu": "0"}, {"cpu": "0"}, {"cpu": "0"}),
            QuotaBar("cpu", "0", "0", "0", 0.0, 0.0, "", over_max=False),
            id="all-zero",
        ),
    ],
)
def test_a_quota_bar(view: QuotaView, bar: QuotaBar) -> None:
    assert quota_bars(view, share_base=100) == [bar]


def test_every_resource_named_anywhere_gets_a_bar_by_name() -> None:
    view = quota({"cpu": "1"}, {"memory": 64 * MI}, {"nvidia.com/gpu": 1}, {"cpu": "0"})
    assert [bar.resource for bar in quota_bars(view, share_base=100)] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
    ]


def test_a_volume_far_below_its_capacity_still_fills_the_plot() -> None:
    plot = volume_plot([(10.0, Volume(0.0, 1000.0)), (20.0, Volume(2.0, 1000.0))])
    assert plot.points == f"0.0,{PLOT_HEIGHT:.1f} {PLOT_WIDTH:.1f},{PLOT_HEIGHT * 0.2:.1f}"
    assert (plot.capacity_y, plot.spans_s, plot.fill_pct) == (None, 10.0, 0.2)


def test_a_volume_near_its_capacity_is_plotted_under_the_capacity_line() -> None:
    plot = volume_plot([(0.0, Volume(80.0, 100.0)), (5.0, Volume(100.0, 100.0))])
    assert plot.capacity_y == 0.0
    assert plot.points == f"0.0,{PLOT_HEIGHT * 0.2:.1f} {PLOT_WIDTH:.1f},0.0"
    assert plot.fill_pct == 100.0


def test_no_samples_or_one() -> None:
    assert volume_plot([]).points == ""
    one = volume_plot([(3.0, Volume(0.0, 0.0))])
    assert (one.points, one.capacity_y, one.spans_s) == (f"0.0,{PLOT_HEIGHT:.1f}", None, 0.0)
