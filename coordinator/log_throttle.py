"""Events counted, logged at most once a period: the first at once, each later line with
the count since the line before. Time is passed in; nothing here logs.

    throttle = LogThrottle(every=60.0)
    throttle.event(now=0.0)    # -> 1: log it, one event
    throttle.event(now=5.0)    # -> None: counted, not logged
    throttle.event(now=61.0)   # -> 2: log it, two events since the last line
    throttle.due(now=200.0)    # -> None: nothing counted since

Invariant: the counts returned by ``event`` and ``due`` plus ``pending`` always sum to
the events seen, and two counts are returned at least ``every`` seconds apart.
"""

from __future__ import annotations


class LogThrottle:
    __slots__ = ("_last", "every", "pending")

    def __init__(self, every: float = 60.0) -> None:
        if every <= 0:
            raise ValueError(f"every must be positive, not {every!r}")
        self.every = every
        self.pending = 0  # events counted since the last line
        self._last: float | None = None  # when the last line was due

    def event(self, now: float) -> int | None:
        """One more event: the count to log now, or None (it waits for a later line).
        O(1)."""
        self.pending += 1
        return self.due(now)

    def due(self, now: float) -> int | None:
        """The count to log now, if any is pending and the period since the last line has
        passed; None otherwise. O(1)."""
        # Compared with last + every, the very sum next_line_at gives: now - last might
        # round below every at that time.
        if not self.pending or (self._last is not None and now < self._last + self.every):
            return None
        count, self.pending, self._last = self.pending, 0, now
        return count

    def next_line_at(self) -> float | None:
        """When the pending count may be logged (None: nothing pending)."""
        if not self.pending:
            return None
        return self._last + self.every if self._last is not None else float("-inf")
