"""Capped exponential backoff with full jitter, for reconnecting to the coordinator.

The n-th retry (from 0) waits ``uniform(0, min(cap, initial * 2**n))``. Full jitter
spreads the agents of a fleet that lost the coordinator at the same moment over the
whole window, so they do not return in lock-step when it comes back.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# Past this many doublings any sane initial delay is far above any sane cap.
_MAX_DOUBLINGS = 60


class Backoff:
    def __init__(
        self, *, initial: float, cap: float, uniform: Callable[[], float] = random.random
    ) -> None:
        self.initial = initial
        self.cap = cap
        self._uniform = uniform
        self.attempts = 0

    def next_delay(self) -> float:
        """The delay before the next attempt; each call counts one more attempt."""
        bound = min(self.cap, self.initial * 2.0 ** min(self.attempts, _MAX_DOUBLINGS))
        self.attempts += 1
        return self._uniform() * bound

    def reset(self) -> None:
        """After a success: the next failure starts from the initial delay again."""
        self.attempts = 0
