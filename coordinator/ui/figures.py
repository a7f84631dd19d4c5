"""The numbers behind the dashboard's bars and plots, as plain data for the templates.

bars = quota_bars(view, share_base=100)
bars[0]   -> QuotaBar(resource="cpu", used_text="0.5", min_pct=40.0, used_pct=50.0, ...)
plot = volume_plot([(0.0, Volume(2.0, 8.0)), (60.0, Volume(4.0, 8.0))])
plot.points   -> "0.0,40.0 300.0,20.0"   (an SVG polyline, y grows downwards)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from coordinator.quotas.resources import parse_amount
from coordinator.ui.history import Volume
from shared.api.quotas import QuotaView
from shared.quantity import format_memory_approx
from shared.resources import MEMORY

PLOT_WIDTH = 300
PLOT_HEIGHT = 80
# Without a max, a bar's full width is this much above the larger of min and used, so
# that neither sits at the very end as if it were a limit.
HEADROOM = Fraction(5, 4)


@dataclass(frozen=True)
class QuotaBar:
    """One resource of a quota: its min, used and max as text, and where min and used
    fall on a bar whose full width is the max (or, without one, the headroom above the
    larger of min and used), in percent. ``borrowed_text``: the API's over-quota amount
    (used above the min, for a resource the min names), "" when there is none."""

    resource: str
    min_text: str
    used_text: str
    max_text: str  # "no max" without one
    min_pct: float
    used_pct: float
    borrowed_text: str  # "" when nothing is borrowed
    over_max: bool


def quota_bars(view: QuotaView, *, share_base: int) -> list[QuotaBar]:
    """A bar for every resource the quota's min, max or status names, by name."""
    limits = view.max or {}
    names = sorted({*view.min, *limits, *view.status.used})

    def amount(amounts: dict[str, int | str], name: str) -> Fraction | None:
        value = amounts.get(name)
        return None if value is None else parse_amount(name, value, share_base=share_base)

    bars = []
    for name in names:
        low = amount(view.min, name) or Fraction(0)
        used = amount(view.status.used, name) or Fraction(0)
        high = amount(limits, name)
        full = high if high else max(low, used) * HEADROOM
        borrowed = amount(view.status.over_quota, name)
        bars.append(
            QuotaBar(
                resource=name,
                min_text=_text(name, low),
                used_text=_text(name, used),
                max_text="no max" if high is None else _text(name, high),
                min_pct=_percent(low, full),
                used_pct=_percent(used, full),
                borrowed_text=_text(name, borrowed) if borrowed else "",
                over_max=high is not None and used > high,
            )
        )
    return bars


def _text(resource: str, amount: Fraction) -> str:
    if resource == MEMORY:
        return format_memory_approx(int(amount))
    return f"{float(amount):g}"


def _percent(part: Fraction, whole: Fraction) -> float:
    """``part`` of ``whole`` in percent, at most 100; 0 when ``whole`` is 0."""
    return 0.0 if not whole else round(float(min(part / whole, Fraction(1))) * 100, 1)


@dataclass(frozen=True)
class VolumePlot:
    """An integral pool's volume over time as an SVG polyline in a PLOT_WIDTH x
    PLOT_HEIGHT box, with the figures around it. The box's top is a quarter above the
    largest volume sampled, or the pool's capacity when that is lower: a volume far
    below its capacity is still seen to grow. ``capacity_y`` is where the capacity's
    line goes, None when it is above the box."""

    points: str  # "" without samples
    capacity_y: float | None
    spans_s: float  # from the first sample to the last
    last_volume: float
    capacity: float
    fill_pct: float  # the last volume, in percent of the capacity


def volume_plot(samples: Sequence[tuple[float, Volume]]) -> VolumePlot:
    """The plot of ``samples`` (oldest first): time on x from the first sample to the
    last, volume on y from 0 at the bottom. O(samples)."""
    if not samples:
        return VolumePlot("", None, spans_s=0.0, last_volume=0.0, capacity=0.0, fill_pct=0.0)
    start, end = samples[0][0], samples[-1][0]
    span = end - start
    last = samples[-1][1]
    highest = max(volume.volume for _, volume in samples) * float(HEADROOM)
    top = min(highest, last.capacity) if last.capacity and highest else highest or 1.0

    def y(volume: float) -> float:
        return PLOT_HEIGHT - min(volume / top, 1.0) * PLOT_HEIGHT

    points = " ".join(
        f"{(at - start) / span * PLOT_WIDTH if span else 0.0:.1f},{y(v.volume):.1f}"
        for at, v in samples
    )
    fill = 0.0 if not last.capacity else min(100.0, last.volume / last.capacity * 100)
    return VolumePlot(
        points=points,
        capacity_y=y(last.capacity) if last.capacity and last.capacity <= top else None,
        spans_s=span,
        last_volume=last.volume,
        capacity=last.capacity,
        fill_pct=round(fill, 1),
    )
