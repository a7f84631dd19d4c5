"""Loading the whole store into memory: with the cyclic garbage collector paused, and,
for a standby that must go on answering meanwhile, in slices that let the event loop run.

    with gc_paused():                                  # a restart's load
        books = books_of(entries)
    following = FollowedAfterBuild(replica, take_in)   # a standby's build: listening from
    await in_slices(steps)                             # the scan on, each step of a
    following.built()                                  # generator run, then what the
                                                       # watch brought meanwhile taken in
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterable, Iterator

from coordinator.loop_turns import let_waiting_run
from coordinator.store import Event
from coordinator.store.replica import Listener, Replica
from shared.logs import get_logger

log = get_logger("allot.coordinator.store")

# What waits on the loop waits for one slice plus one step at most (``let_waiting_run``
# hands it the loop first at each suspension): 10 ms leaves room under the 50 ms a
# standby promises even when the machine's other processes take the CPU away mid-slice.
# A suspension costs one turn of the loop (tens of microseconds), so the build is not
# measurably slower for it.
SLICE_SECONDS = 0.01
# A load makes about 17 tracked objects a container (measured over 40,000), and the
# collector walks about 2.4 million a second here: 50,000 is about 3,000 containers,
# a walk of about 20 ms.
FREEZE_OBJECTS = 50_000


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block and on again after it; when the block made
    at least ``FREEZE_OBJECTS`` objects the collector tracks, every object then alive is
    first put out of its reach for good (``gc.freeze``). Nothing is done when the
    collector is off already: a coordinator starting alone turns it off for the whole
    of its start-up and then collects once and freezes (``main.settle_heap``), which a
    standby cannot do (that one collection walks the whole heap).

    Why paused: a load makes millions of objects that all live on, and while the heap
    grows the collector walks the whole of it again at every 25% of growth: 40,000
    container records took 0.38 to 0.76 s of CPU to decode with it on, 0.08 to 0.14 s
    with it off. Reference counting still frees what is not in a cycle meanwhile.

    Why frozen: else the first collections after the load walk every object it made,
    and every full collection after them does again (a standby's loop was held 124 ms
    by one after a build of 40,000 containers; a full collection of 40,000 containers'
    books took 0.18 s of CPU). The books hold records without cycles, replaced rather
    than changed, so reference counting frees each when it goes; what it cannot free is
    a cycle that was garbage at the moment of the freeze, a one-off leak per large load.
    Small loads (tests, small clusters) are not frozen: a walk of what they made is
    short. (While the collector is off, its first count is the tracked objects made
    and not freed since its last run.)"""
    if not gc.isenabled():  # paused by the caller, who settles the heap (main.settle_heap)
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] >= FREEZE_OBJECTS:
            gc.freeze()
        gc.enable()


async def in_slices(steps: Iterable[None], *, slice_seconds: float | None = None) -> None:
    """Run ``steps`` to their end, suspending once ``slice_seconds`` (by default
    ``SLICE_SECONDS``, read at the call) have gone by since the last suspension (checked
    after each step), so the event loop is never held for more than a slice and one step.
    A slice of 0 suspends after every step."""
    if slice_seconds is None:
        slice_seconds = SLICE_SECONDS
    since = time.perf_counter()
    for _ in steps:
        if time.perf_counter() - since >= slice_seconds:
            await let_waiting_run()
            since = time.perf_counter()


class FollowedAfterBuild:
    """Tells ``take_in`` each transaction the replica's watch brings, from the moment
    this is made (make it right after the scan the build reads, without a suspension
    between them). While the build is under way the transactions wait; ``built`` takes
    them in, in order, and from then on each is taken in as it comes.

    If ``take_in`` raises, the transaction is logged and nothing more is told, as the
    replica does with any follower that fails; ``stop`` then says False."""

    def __init__(self, replica: Replica, take_in: Listener) -> None:
        self._replica = replica
        self._take_in = take_in
        self._waiting: list[list[Event]] | None = []
        replica.listen(self._told)

    def built(self) -> None:
        waiting, self._waiting = self._waiting or [], None
        try:
            for events in waiting:
                self._take_in(events)
        except Exception:
            log.exception("a follower of the store failed after its build; it is told no more")
            self._replica.unlisten(self._told)

    def stop(self) -> bool:
        """Tell nothing more; False if following had failed already."""
        return self._replica.unlisten(self._told)

    def _told(self, events: list[Event]) -> None:
        if self._waiting is None:
            self._take_in(events)
        else:
            self._waiting.append(events)
