"""A token bucket that spends a lease's capacity as a rate (leases spec §9.1).

    writes = await client.resource("db.write", wants=25)
    limiter = RateLimiter(writes)          # writes.capacity units per second
    async with limiter:                    # one unit
        await db.write(row)
    await limiter.acquire(10)              # ten units

The bucket holds at most ``b = max(1, rate * burst_seconds)`` tokens, starts with one
at the first acquire, and refills continuously on the loop's monotonic clock, so in any
window of T seconds at most ``rate * T + b`` units are acquired, and a steady demand gets
the whole rate. Refilling is arithmetic done whenever the bucket is looked at: no
timer is re-armed per call, and a late wake-up loses no tokens.

A source capacity of -1 means unlimited (never blocks; the bucket counts as full when
a finite rate follows) and 0 blocks until it turns positive. When the rate changes,
tokens accrue at the old rate up to that moment, the new rate applies from then on, the
tokens are clamped to the new ``b``, and the waiters are woken to recompute: while
anyone waits, a task follows the source's ``changes()``; while nobody does, the change
is taken in at the next acquire (the old rate counting until then, within the old
``b``). ``n > b`` raises ``ValueError``, also for a waiter whose ``n`` a rate cut made
too large; at rate 0 ``n`` is judged once a rate is known.

Waiters are served strictly in arrival order: only the first in line takes tokens,
and it takes all it asked for at once, so a cancelled acquire has consumed nothing; its
successor is woken when it leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Protocol

# Tolerated shortfall when comparing token counts, for float rounding in the refill.
_EPSILON = 1e-9


class RateSource(Protocol):
    """Where the rate comes from: a lease client's ``ResourceHandle`` satisfies it."""

    @property
    def capacity(self) -> float:
        """Units per second: -1 unlimited, 0 blocked."""
        ...

    def changes(self) -> AsyncIterator[float]:
        """Yields after each change of ``capacity`` made after this call (not merely
        after the iterator was first awaited), coalescing changes a slow reader missed."""
        ...


class RateLimiter:
    """A token bucket refilled at ``source.capacity`` units per second."""

    def __init__(self, source: RateSource, burst_seconds: float = 1.0) -> None:
        if not (math.isfinite(burst_seconds) and burst_seconds > 0):
            raise ValueError(f"burst_seconds must be a positive number, got {burst_seconds!r}")
        self._source = source
        self._burst_seconds = burst_seconds
        self._rate = 0.0  # units per second; math.inf when unlimited
        self._tokens = 1.0
        self._counted_at: float | None = None  # loop time the tokens were counted at
        self._line: deque[asyncio.Future[None]] = deque()  # waiters, first in line first
        self._rate_changed = asyncio.Event()
        self._rate_watcher: asyncio.Task[None] | None = None  # runs while anyone waits

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    async def acquire(self, n: float = 1) -> None:
        """Wait until ``n`` units may be spent, after everyone who came earlier.

        Raises ``ValueError`` if ``n`` is not positive or can never fit the bucket at
        the current rate (also if a rate cut makes it so while waiting)."""
        if not (math.isfinite(n) and n > 0):
            raise ValueError(f"n must be a positive number, got {n!r}")
        self._catch_up()
        self._check_fits(n)
        if not self._line and self._take(n):
            return
        await self._wait_in_line(n)

    async def _wait_in_line(self, n: float) -> None:
        ticket = asyncio.get_running_loop().create_future()
        self._line.append(ticket)
        self._watch_rate()
        try:
            if self._line[0] is not ticket:
                await ticket  # set when everyone ahead has left
            while True:
                self._rate_changed.clear()
                self._catch_up()
                self._check_fits(n)
                if self._take(n):
                    return
                await self._until_refilled_or_rate_changed(self._seconds_until(n))
        finally:
            self._leave(ticket)

    def _leave(self, ticket: asyncio.Future[None]) -> None:
        first = self._line[0] is ticket
        self._line.remove(ticket)
        if not self._line:
            self._stop_watching_rate()
        elif first and not self._line[0].done():
            self._line[0].set_result(None)

    async def _until_refilled_or_rate_changed(self, delay: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._rate_changed.wait()

    def _watch_rate(self) -> None:
        if self._rate_watcher is None:
            # changes() is called now, before anyone waits, so no change is missed.
            self._rate_watcher = asyncio.create_task(self._follow(self._source.changes()))

    def _stop_watching_rate(self) -> None:
        if self._rate_watcher is not None:
            self._rate_watcher.cancel()
            self._rate_watcher = None

    async def _follow(self, changes: AsyncIterator[float]) -> None:
        async for _ in changes:
            self._catch_up()  # the old rate counts up to this very moment
            self._rate_changed.set()

    def _catch_up(self) -> None:
        """Accrue tokens at the rate in force until now, then switch to the source's."""
        now = asyncio.get_running_loop().time()
        if self._counted_at is not None:
            gained = math.inf if self._rate == math.inf else (now - self._counted_at) * self._rate
            self._tokens = min(self._bucket_size(), self._tokens + gained)
        self._counted_at = now
        rate = _rate_of(self._source.capacity)
        if rate != self._rate:
            self._rate = rate
            self._tokens = min(self._tokens, self._bucket_size())

    def _bucket_size(self) -> float:
        return max(1.0, self._rate * self._burst_seconds)

    def _check_fits(self, n: float) -> None:
        # At rate 0 the size says nothing yet: wait for a rate to judge n by.
        if 0 < self._rate < math.inf and n > self._bucket_size() + _EPSILON:
            raise ValueError(
                f"{n:g} units can never be acquired at once: the bucket holds "
                f"{self._bucket_size():g} at {self._rate:g}/s with {self._burst_seconds:g}s "
                "of burst"
            )

    def _take(self, n: float) -> bool:
        if self._rate == math.inf:
            return True
        if self._rate > 0 and self._tokens >= n - _EPSILON:
            self._tokens -= n
            return True
        return False

    def _seconds_until(self, n: float) -> float | None:
        """How long until ``n`` tokens are there; None at rate 0 (until the rate changes)."""
        if self._rate == 0:
            return None
        return max(0.0, (n - self._tokens) / self._rate)


def _rate_of(capacity: float) -> float:
    """A source capacity as a refill rate. Only exactly -1 is unlimited: any other
    negative (which should not occur) or NaN blocks, because reading a negative grant as
    unlimited was a Doorman defect."""
    if capacity == -1:
        return math.inf
    if capacity > 0:
        return capacity
    return 0.0
