"""The rate limiter, on real time, driven by a rate the test sets.

Acquisitions are timed with the loop's clock right after each acquire returns. The
bounds on how many acquisitions a window holds are exact, as a loaded machine can only
lower those counts; the margins are generous where it can delay what a test waits for."""

from __future__ import annotations

import asyncio
import bisect
import math
from collections.abc import AsyncIterator

import pytest

from client.leases import LeaseClient
from client.rate_limiter import RateLimiter
from tests.client.lease_server import TOKEN, serving


class SettableRate:
    """A rate source the test turns by hand, announcing each change as a handle does."""

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self._changed = asyncio.Event()

    def set(self, capacity: float) -> None:
        self.capacity = capacity
        self._changed.set()
        self._changed = asyncio.Event()

    def changes(self) -> AsyncIterator[float]:
        return self._changes(self._changed)

    async def _changes(self, changed: asyncio.Event) -> AsyncIterator[float]:
        while True:
            await changed.wait()
            changed = self._changed
            yield self.capacity


def now() -> float:
    return asyncio.get_running_loop().time()


async def acquire_for(limiter: RateLimiter, seconds: float) -> list[float]:
    """Acquire one unit after another for ``seconds``; the time of each acquisition."""
    times: list[float] = []
    deadline = now() + seconds
    while now() < deadline:
        await limiter.acquire()
        times.append(now())
    return times


async def acquire_count(limiter: RateLimiter, count: int) -> list[float]:
    """Acquire one unit after another, ``count`` times; the time of each acquisition."""
    times: list[float] = []
    for _ in range(count):
        await limiter.acquire()
        times.append(now())
    return times


def most_in_any_window(times: list[float], window: float) -> int:
    """The largest number of acquisitions within ``window`` seconds of one of them."""
    return max(bisect.bisect_right(times, t + window) - i for i, t in enumerate(times))


async def blocks(limiter: RateLimiter, n: float = 1, within: float = 0.2) -> bool:
    try:
        async with asyncio.timeout(within):
            await limiter.acquire(n)
    except TimeoutError:
        return True
    return False


# --- the bucket --------------------------------------------------------------------------


async def test_a_greedy_consumer_gets_the_rate_and_never_more() -> None:
    limiter = RateLimiter(SettableRate(200))
    started = now()

    times = await acquire_for(limiter, 3.0)

    measured = (len(times) - 1) / (times[-1] - started)  # the first unit is the initial token
    # A loaded machine only lowers the rate a greedy consumer sees (make test measured 188
    # beside the VM), so its floor has room; its ceiling is exact, just below.
    assert 200 * 0.8 <= measured <= 200 * 1.05
    # Never above the grant: from one token, a bucket filling at 200/s can have handed
    # out at most 1 + 200 t by time t (one more for the clock's granularity).
    assert len(times) <= 1 + 200 * (times[-1] - started) + 1
    for window in (0.05, 0.2, 1.0, 2.0):
        assert most_in_any_window(times, window) <= 200 * window + 200, window


async def test_an_idle_bucket_fills_to_its_size_and_no_further() -> None:
    limiter = RateLimiter(SettableRate(200), burst_seconds=0.1)  # b = 20
    await limiter.acquire()
    await asyncio.sleep(0.3)  # enough for 60 tokens, of which 20 fit

    times = await acquire_for(limiter, 0.5)

    assert sum(1 for t in times if t - times[0] < 0.004) <= 20  # the burst, at most b
    for window in (0.01, 0.1, 0.3):
        assert most_in_any_window(times, window) <= 200 * window + 20, window
    # it goes on at the rate after the burst (a bucket that did not refill gives 20); a
    # loaded machine only lowers the count, and a small bucket loses what a stall leaves
    assert len(times) >= 0.7 * (20 + 200 * 0.5)


async def test_acquiring_more_than_the_bucket_holds_is_an_error() -> None:
    limiter = RateLimiter(SettableRate(10), burst_seconds=1.0)  # b = 10

    with pytest.raises(ValueError, match="never"):
        await limiter.acquire(11)
    for nonsense in (0, -1, math.nan):
        with pytest.raises(ValueError, match="positive"):
            await limiter.acquire(nonsense)


async def test_async_with_acquires_one_unit() -> None:
    limiter = RateLimiter(SettableRate(10))
    async with limiter:
        pass

    assert await blocks(limiter, within=0.05)  # the one initial token is spent


# --- special rates -----------------------------------------------------------------------


async def test_rate_zero_blocks_until_the_rate_turns_positive() -> None:
    rate = SettableRate(0)
    limiter = RateLimiter(rate)
    assert await blocks(limiter)

    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.1)
    assert not waiter.done()
    rate.set(100)
    await asyncio.wait_for(waiter, 0.5)


async def test_unlimited_never_blocks() -> None:
    limiter = RateLimiter(SettableRate(-1))
    started = now()

    for _ in range(10_000):
        await limiter.acquire(5)

    assert now() - started < 1.0


@pytest.mark.parametrize("capacity", [-2.0, math.nan])
async def test_a_nonsense_rate_blocks_rather_than_counting_as_unlimited(capacity: float) -> None:
    assert await blocks(RateLimiter(SettableRate(capacity)))


# --- rate changes ------------------------------------------------------------------------


async def test_tokens_accrue_at_the_old_rate_until_the_change() -> None:
    rate = SettableRate(10)
    limiter = RateLimiter(rate)  # b = 10 now, 1000 after the change
    idle_since = now()  # no later than the bucket's clock starts
    await limiter.acquire()
    await asyncio.sleep(0.5)  # about 5 tokens at 10/s
    rate.set(1000)  # nobody waits: the change is seen at the next acquire

    times = await acquire_count(limiter, 100)

    accrued_before_change = min(10, 10 * (times[0] - idle_since))
    at_once = sum(1 for t in times if t - times[0] < 0.01)
    assert at_once <= accrued_before_change + 1000 * 0.01 + 1e-6  # not 500 at 1000/s
    # then the new rate: about 0.1 s for the 100, where the old one would take 9.5 s (a
    # loaded machine only makes it longer, so the bound is on time, with room to spare:
    # a make test run once counted 28 acquisitions in a 50 ms window at 1000/s)
    assert times[-1] - times[0] < 2.0


async def test_a_rate_cut_clamps_the_tokens_to_the_new_bucket() -> None:
    rate = SettableRate(1000)
    limiter = RateLimiter(rate, burst_seconds=0.1)  # b = 100
    await limiter.acquire()
    await asyncio.sleep(0.15)  # full: 100 tokens
    rate.set(10)  # b = 1

    times = await acquire_for(limiter, 0.25)

    assert len(times) <= 1 + 10 * (times[-1] - times[0]) + 1e-6
    assert len(times) >= 2


async def test_a_waiter_recomputes_when_the_rate_rises() -> None:
    rate = SettableRate(1)
    limiter = RateLimiter(rate)
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())  # about 1 s away at 1/s
    await asyncio.sleep(0.1)

    rate.set(1000)

    await asyncio.wait_for(waiter, 0.3)


async def test_a_waiter_whose_units_no_longer_fit_after_a_cut_gets_an_error() -> None:
    rate = SettableRate(10)
    limiter = RateLimiter(rate)  # b = 10
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire(8))
    await asyncio.sleep(0.05)

    rate.set(2)  # b = 2

    with pytest.raises(ValueError, match="never"):
        await asyncio.wait_for(waiter, 0.5)


# --- the line of waiters -----------------------------------------------------------------


async def test_waiters_are_served_in_arrival_order() -> None:
    limiter = RateLimiter(SettableRate(20))  # b = 20, 50 ms per token
    await limiter.acquire()
    served: list[str] = []

    async def acquire(name: str, n: float) -> None:
        await limiter.acquire(n)
        served.append(name)

    waiters = []
    for name, n in (("big", 3), ("small", 1), ("middle", 2)):
        waiters.append(asyncio.create_task(acquire(name, n)))
        await asyncio.sleep(0)  # arrive in this order
    await asyncio.wait_for(asyncio.gather(*waiters), 2.0)

    assert served == ["big", "small", "middle"]  # small never overtakes big


async def test_a_cancelled_waiter_consumes_nothing_and_wakes_the_next() -> None:
    limiter = RateLimiter(SettableRate(10))  # b = 10
    await limiter.acquire()
    first = asyncio.create_task(limiter.acquire(8))  # about 0.8 s away
    await asyncio.sleep(0)
    second = asyncio.create_task(limiter.acquire(1))
    await asyncio.sleep(0.35)  # 3 or more tokens by now

    first.cancel()

    await asyncio.wait_for(second, 0.2)  # woken, and served at once
    assert first.cancelled()
    assert not await blocks(limiter, 2, within=0.05)  # the first one took none of them


async def test_cancelling_a_waiter_in_the_middle_of_the_line_keeps_the_order() -> None:
    rate = SettableRate(0)
    limiter = RateLimiter(rate)
    served: list[str] = []

    async def acquire(name: str) -> None:
        await limiter.acquire()
        served.append(name)

    tasks = {name: asyncio.create_task(acquire(name)) for name in ("a", "b", "c")}
    await asyncio.sleep(0.05)
    tasks["b"].cancel()
    rate.set(100)
    await asyncio.wait_for(asyncio.gather(tasks["a"], tasks["c"]), 1.0)

    assert served == ["a", "c"]


# --- with a lease ------------------------------------------------------------------------


async def test_the_limiter_follows_the_capacity_of_a_lease() -> None:
    async with serving() as server, LeaseClient(server.url, token=TOKEN) as client:
        server.grants["db.write"] = 0
        handle = await client.resource("db.write", 100)
        limiter = RateLimiter(handle)
        waiter = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0.1)
        assert not waiter.done()  # a grant of 0 blocks

        server.grants["db.write"] = 100
        await handle.ask(100)

        await asyncio.wait_for(waiter, 0.5)
        assert len(await acquire_for(limiter, 0.2)) >= 10
