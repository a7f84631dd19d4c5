"""A loop-lag probe: a task that sleeps 1 ms at a time on the running event loop and notes
how late each waking was, which is how long something else held the loop (plus whatever
the machine's other processes took from this one meanwhile).

    probe = LoopLag()             # on the running loop, from now on
    ...                           # the work measured
    await probe.stop()
    probe.worst, probe.p99        # seconds late: the longest, and the 99th percentile
    probe.held_cpu                # the most CPU this thread spent between two wakings

``held_cpu`` leaves out what other processes took, so on a loaded machine it is the
nearer figure for what the code itself holds; lateness is what a client would see.
"""

from __future__ import annotations

import asyncio
import time

TICK_SECONDS = 0.001


class LoopLag:
    def __init__(self, tick_seconds: float = TICK_SECONDS) -> None:
        self.late: list[float] = []
        self.held_cpu = 0.0
        self._tick = tick_seconds
        self._stopping = False
        self._task = asyncio.create_task(self._probe())

    async def stop(self) -> None:
        """Stop after the probe's next waking: the work measured may have held the loop
        right up to this call, and that hold is seen only when the probe wakes."""
        self._stopping = True
        await self._task

    @property
    def worst(self) -> float:
        return max(self.late, default=0.0)

    @property
    def p99(self) -> float:
        if not self.late:
            return 0.0
        ordered = sorted(self.late)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]

    def summary(self) -> str:
        """``N ms late at most (p99 N ms, N wakings), N ms of CPU at most``"""
        return (
            f"{self.worst * 1000:.0f} ms late at most (p99 {self.p99 * 1000:.1f} ms,"
            f" {len(self.late):,} wakings), {self.held_cpu * 1000:.0f} ms of CPU at most"
        )

    async def _probe(self) -> None:
        while not self._stopping:
            due, cpu = time.perf_counter() + self._tick, time.thread_time()
            await asyncio.sleep(self._tick)
            self.late.append(max(0.0, time.perf_counter() - due))
            self.held_cpu = max(self.held_cpu, time.thread_time() - cpu)
