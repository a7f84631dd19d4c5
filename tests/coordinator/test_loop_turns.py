"""``let_waiting_run``: long work handing the loop back lets what came due meanwhile run
before it goes on, which ``asyncio.sleep(0)`` does not."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable

import pytest

from coordinator.loop_turns import let_waiting_run

Suspend = Callable[[], Awaitable[None]]


def _hold_the_loop(seconds: float) -> None:
    """Work that does not suspend, as a slice of a build is."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def _plain_sleep() -> None:
    await asyncio.sleep(0)


async def _order_of_a_timer_among_slices(suspend: Suspend) -> list[str]:
    """Three slices of 20 ms of work with ``suspend`` between them, and a timer that
    came due 1 ms into the first: where it ran among them."""
    order: list[str] = []

    async def timer() -> None:
        await asyncio.sleep(0.001)
        order.append("timer")

    waiting = asyncio.create_task(timer())
    await asyncio.sleep(0)  # the timer is set
    for number in range(1, 4):
        _hold_the_loop(0.02)
        order.append(f"slice {number}")
        await suspend()
    await waiting
    return order


async def test_a_timer_due_during_a_slice_runs_before_the_next_slice() -> None:
    assert await _order_of_a_timer_among_slices(let_waiting_run) == [
        "slice 1",
        "timer",
        "slice 2",
        "slice 3",
    ]


async def test_sleep_zero_runs_the_next_slices_first_which_is_why_this_exists() -> None:
    # The timer's callback runs after slice 2, and the task it wakes after slice 3.
    assert await _order_of_a_timer_among_slices(_plain_sleep) == [
        "slice 1",
        "slice 2",
        "slice 3",
        "timer",
    ]


async def test_bytes_that_came_in_during_a_slice_are_read_before_the_next_slice() -> None:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    order: list[str] = []

    def readable() -> None:
        order.append(f"read {ours.recv(16)!r}")

    try:
        ours.setblocking(False)
        loop.add_reader(ours, readable)
        theirs.send(b"hello")
        _hold_the_loop(0.02)
        order.append("slice 1")
        await let_waiting_run()
        order.append("slice 2")
    finally:
        loop.remove_reader(ours)
        ours.close()
        theirs.close()
    assert order == ["slice 1", "read b'hello'", "slice 2"]


async def test_a_cancelled_wait_raises_in_the_caller_and_nothing_in_the_loop() -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    try:
        waiting = asyncio.create_task(let_waiting_run())
        await asyncio.sleep(0)  # it waits
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0.01)  # the timer it set has fired
    finally:
        loop.set_exception_handler(None)
    assert errors == []
