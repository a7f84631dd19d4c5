"""Failed authentications by source address: how long to hold the next refusal, and when
to log. Time is passed in; nothing here sleeps or logs (``coordinator.http.auth`` does).

    book = FailureBook()
    book.failed("10.0.0.7", now=0.0)  # -> Verdict(delay_s=0.0, report=1): log "1 failure"
    ...                               # four more at now=0.0, then the sixth:
    book.failed("10.0.0.7", now=0.0)  # -> Verdict(delay_s=0.1, report=None)
    book.due(now=60.0)                # -> [("10.0.0.7", 5)]: log the rest

A source's *score* is its failures, each one weighing half as much every ``half_life_s``
seconds. The first ``free`` failures cost nothing (a mistyped token); past that every
failure doubles the delay, from ``base_delay_s`` up to ``max_delay_s``. Each source is
logged at most once every ``log_every_s`` seconds (``LogThrottle``).

The book holds at most ``max_sources`` sources, the least recently failed dropped first,
so a flood of addresses costs bounded memory; a dropped source starts afresh, and what it
had not yet logged is lost to the log (never to the metric, counted before).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from coordinator.log_throttle import LogThrottle


@dataclass(frozen=True, slots=True)
class Verdict:
    delay_s: float  # hold the refusal this long
    report: int | None  # log a line with this many failures now; None: not yet


class _Source:
    __slots__ = ("at", "score", "throttle")

    def __init__(self, log_every_s: float) -> None:
        self.score = 0.0
        self.at = 0.0
        self.throttle = LogThrottle(log_every_s)


class FailureBook:
    def __init__(
        self,
        *,
        max_sources: int = 10_000,
        free: int = 5,
        base_delay_s: float = 0.1,
        max_delay_s: float = 2.0,
        half_life_s: float = 60.0,
        log_every_s: float = 60.0,
    ) -> None:
        if max_sources < 1 or free < 0 or half_life_s <= 0:
            raise ValueError("max_sources >= 1, free >= 0 and half_life_s > 0, please")
        if not 0 <= base_delay_s <= max_delay_s:
            raise ValueError("0 <= base_delay_s <= max_delay_s, please")
        self.max_sources = max_sources
        self.free = free
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.half_life_s = half_life_s
        self.log_every_s = log_every_s
        self._sources: OrderedDict[str, _Source] = OrderedDict()  # least recent first

    def __len__(self) -> int:
        return len(self._sources)

    def failed(self, source: str, now: float) -> Verdict:
        """One more failure of ``source`` at ``now`` (never earlier than the one before).
        O(1)."""
        entry = self._sources.pop(source, None)
        if entry is None:
            entry = _Source(self.log_every_s)
            if len(self._sources) >= self.max_sources:
                self._sources.popitem(last=False)
        self._sources[source] = entry
        entry.score = self._decayed(entry, now) + 1
        entry.at = now
        return Verdict(self.delay_for(entry.score), entry.throttle.event(now))

    def delay_for(self, score: float) -> float:
        """0 up to ``free`` failures; then ``base_delay_s`` doubling with each one more,
        never above ``max_delay_s``."""
        over = score - self.free
        if over <= 0:
            return 0.0
        # 2**over overflows a float past 1024; by then the cap has long been reached.
        return min(self.max_delay_s, self.base_delay_s * math.pow(2.0, min(over - 1, 64.0)))

    def due(self, now: float) -> list[tuple[str, int]]:
        """Each source whose pending failures may be logged now, with their count. O(sources)."""
        lines = []
        for source, entry in self._sources.items():
            count = entry.throttle.due(now)
            if count is not None:
                lines.append((source, count))
        return lines

    def next_line_at(self) -> float | None:
        """The earliest time ``due`` will have a line (None: no failure waits). O(sources)."""
        times = [t for e in self._sources.values() if (t := e.throttle.next_line_at()) is not None]
        return min(times, default=None)

    def _decayed(self, entry: _Source, now: float) -> float:
        return entry.score * math.pow(0.5, max(0.0, now - entry.at) / self.half_life_s)
