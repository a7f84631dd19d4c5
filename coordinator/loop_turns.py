"""Handing the event loop back, in the middle of long work, to what is already waiting.

``await asyncio.sleep(0)`` does not quite do that: it queues the caller's next step at
once, and at the loop's next turn that step runs *before* the I/O callbacks and timers
that came due meanwhile (the loop queues those after it, when it polls). A task woken by
a timer that came due during one slice of the work then waited through two more slices
(the timer's callback after the next one, the task it wakes after the one after): a
timer on a standby building its state in slices of 10 ms woke up to 49 ms late
(bench/takeover_build.py, 100,000 containers on SQLite), and 27 ms at most with this.

    for part in parts:
        work(part)
        await let_waiting_run()   # polled I/O and due timers first, then on
"""

from __future__ import annotations

import asyncio


async def let_waiting_run() -> None:
    """Return once the I/O callbacks and timers due by now have run. The loop runs the
    callbacks of a turn in the order I/O, then due timers by due time; this one waits as
    a timer due now, so everything that came due before it goes first."""
    loop = asyncio.get_running_loop()
    resumed = loop.create_future()
    loop.call_at(loop.time(), _resume, resumed)
    await resumed


def _resume(resumed: asyncio.Future[None]) -> None:
    if not resumed.done():  # a cancelled caller cancelled it
        resumed.set_result(None)
