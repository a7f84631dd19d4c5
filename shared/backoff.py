"""Capped exponential backoff: with full jitter, for reconnecting to the coordinator, and
its bound alone, for a container's restarts (``agent.runtime.restarts``).

The n-th retry (from 0) waits ``uniform(0, bound(initial, cap, n))``, the bound being
``min(cap, initial * 2**n)``. Full jitter spreads the agents of a fleet that lost the
coordinator at the same moment over the whole window, so they do not return in
lock-step when it comes back.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# Past this many doublings any sane initial delay is far above any sane cap.
_MAX_DOUBLINGS = 60


def bound(initial: float, cap: float, attempts: int) -> float:
    """``min(cap, initial * 2**attempts)``, for any number of attempts. O(1)."""
    return min(cap, initial * 2.0 ** min(attempts, _MAX_DOUBLINGS))


class Backoff:
    def __init__(
        self, *, initial: float, cap: float, uniform: Callable[[], float] = random.random
    ) -> None:
        self.initial = initial
        self.cap = cap
        self._most = cap
        self._uniform = uniform
        self.attempts = 0

    def cap_at(self, limit: float) -> None:
        """Lower the cap to ``limit`` (the cap given at construction stays the most)."""
        self.cap = min(self._most, limit)

    def next_delay(self) -> float:
        """The delay before the next attempt; each call counts one more attempt."""
        most = bound(self.initial, self.cap, self.attempts)
        self.attempts += 1
        return self._uniform() * most

    def reset(self) -> None:
        """After a success: the next failure starts from the initial delay again."""
        self.attempts = 0
