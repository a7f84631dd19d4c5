"""Each integral pool's accumulated volume over time, for the dashboard's plots.

The pool service keeps only the current volume, so the dashboard keeps its own history:
a bounded series per integral pool, sampled at every fair-share update period. A series
holds at most ``limit`` samples and covers the whole life of the process: when it is
full, every other sample is dropped and from then on only every other sample is kept
(its ``stride`` doubles), so a plot always spans from the first sample to now at a
resolution that halves as time passes. Memory: at most ``limit`` samples per pool.

    history = VolumeHistory(limit=256)
    history.record(at=12.0, volumes={"research": Volume(volume=3.5, capacity=86_400.0)})
    history.series("research")   -> [(12.0, Volume(volume=3.5, capacity=86400.0))]

It lives in memory: a restart starts the plots afresh (the volumes themselves persist).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_LIMIT = 256


@dataclass(frozen=True)
class Volume:
    """One sample: the pool's accumulated resource ratio volume and its capacity (both
    in share * seconds; the pool is full when volume == capacity)."""

    volume: float
    capacity: float


@dataclass
class _Series:
    samples: list[tuple[float, Volume]] = field(default_factory=list)
    stride: int = 1  # keep one offered sample in this many
    skipped: int = 0  # offered samples since the last one kept


class VolumeHistory:
    def __init__(self, *, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 3:  # with 2, thinning would leave the first sample alone for ever
            raise ValueError(f"limit={limit}: a series needs room for at least 3 samples")
        self._limit = limit
        self._series: dict[str, _Series] = {}

    def record(self, at: float, volumes: Mapping[str, Volume]) -> None:
        """Offer one sample per integral pool at time ``at``; a pool not in ``volumes``
        (deleted, or no longer integral) loses its series. O(pools) amortised."""
        for gone in self._series.keys() - volumes.keys():
            del self._series[gone]
        for pool, volume in volumes.items():
            series = self._series.setdefault(pool, _Series())
            if series.skipped + 1 < series.stride:
                series.skipped += 1
                continue
            series.skipped = 0
            series.samples.append((at, volume))
            if len(series.samples) >= self._limit:
                del series.samples[1::2]
                series.stride *= 2

    def series(self, pool: str) -> list[tuple[float, Volume]]:
        """The pool's samples, oldest first ([] for a pool never sampled)."""
        found = self._series.get(pool)
        return [] if found is None else list(found.samples)
