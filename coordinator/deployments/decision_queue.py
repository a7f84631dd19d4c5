"""The order in which queued decisions are taken: by urgency, first come first served
within one, and none starves.

    queue = DecisionQueue[Job](clock=time.monotonic)
    queue.push(job, Urgency.FREES)
    taken = queue.take(256)          # the earliest due first
    queue.put_back(taken[3:])        # not decided after all: each keeps its place

What goes first, and why:

1. ``FREES``: decisions that give capacity back or change nodes -- deletes, scale-downs,
   drains, cordons, a node's capacity or inventory, a lost node's release, an agent's
   report that stopped containers are gone (which places the preemptors waiting for them
   in the same decision). Every decision behind them sees the room they free, and the
   churn fence answers a DELETE only once the hosts acknowledged it, so its latency is
   the user's.
2. ``SCHEDULES``: a scheduler pass. Its pending containers were accepted before anything
   still queued; a new deploy should not take the room a removal made for them.
3. ``INTERACTIVE``: small deploys and scale-ups, reallocations, replaces, quotas, events,
   pool shares: a person or a script waits on each, and each decides in milliseconds.
4. ``BULK``: deploys and scale-ups that place more than ``SMALL_PLACING`` containers. One
   takes hundreds of milliseconds to decide; a small one queued behind it would wait
   that long for nothing.

Nothing starves: an entry is due at its arrival plus its urgency's ``HEAD_START``, and
the queue takes the earliest due first (ties in arrival order). An urgent entry goes
ahead of a less urgent one that came at most the difference of their head starts
before it; a bulk deploy waits at most ``HEAD_START[BULK]`` seconds longer than in
plain arrival order, however many small ones keep coming. This is aging by a fixed
rate, and as its order never changes once an entry is in, a heap keeps it (Nomad's plan
queue is a priority heap too; its equal priorities go first come first served).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, TypeVar

T = TypeVar("T")


class Urgency(IntEnum):
    FREES = 0
    SCHEDULES = 1
    INTERACTIVE = 2
    BULK = 3


# Seconds an entry of each urgency may be passed by more urgent ones that came later.
HEAD_START: dict[Urgency, float] = {
    Urgency.FREES: 0.0,
    Urgency.SCHEDULES: 0.25,
    Urgency.INTERACTIVE: 0.5,
    Urgency.BULK: 5.0,
}
# A decision that places at most this many containers is interactive, not bulk.
SMALL_PLACING = 50


def placing(count: int) -> Urgency:
    """The urgency of a decision that places ``count`` new containers."""
    return Urgency.INTERACTIVE if count <= SMALL_PLACING else Urgency.BULK


@dataclass(order=True, frozen=True)
class Entry(Generic[T]):
    due: float  # its arrival plus its urgency's head start
    arrival: int  # first come first served among equal dues
    item: T = field(compare=False)


class DecisionQueue(Generic[T]):
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: list[Entry[T]] = []
        self._arrivals = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, item: T, urgency: Urgency) -> None:
        """O(log n)."""
        due = self._clock() + HEAD_START[urgency]
        heapq.heappush(self._heap, Entry(due, next(self._arrivals), item))

    def take(self, most: int) -> list[Entry[T]]:
        """Up to ``most`` entries, the earliest due first. O(most log n)."""
        return [heapq.heappop(self._heap) for _ in range(min(most, len(self._heap)))]

    def put_back(self, entries: Iterable[Entry[T]]) -> None:
        """Entries taken and not decided: each goes back to its place, ahead of any that
        came after it with the same urgency."""
        for entry in entries:
            heapq.heappush(self._heap, entry)

    def drop(self, which: Callable[[T], bool]) -> list[T]:
        """Take out every item for which ``which`` holds; those, in queue order. O(n log n)."""
        dropped: list[Entry[T]] = []
        kept: list[Entry[T]] = []
        for entry in self._heap:
            (dropped if which(entry.item) else kept).append(entry)
        heapq.heapify(kept)
        self._heap = kept
        return [entry.item for entry in sorted(dropped)]
