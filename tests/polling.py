"""Waiting in async tests for something that happens on its own time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

POLL_SECONDS = 0.01


async def eventually(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Return once ``condition()`` holds; fail the test if it has not within ``within`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition never held within {within:g}s")
        await asyncio.sleep(POLL_SECONDS)
