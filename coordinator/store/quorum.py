"""Whether etcd can take the leader's writes now, so that it refuses them at once when not.

    quorum = Quorum(etcd)                # looks every POLL_SECONDS from here on
    quorum.check()                       # raises QuorumLost while quorum is known lost
    quorum.listen(refuse_queued)         # told once each time quorum is lost
    await quorum.close()

Without it, a commit sent as etcd lost its quorum is settled (``coordinator.store.fenced``)
for up to ``SETTLE_SECONDS``, and every write queued behind it waits as long, only to
be refused: with two members of three killed, the first write was refused 3.02-3.11 s
after, and 0.26-0.36 s with it (``bench/etcd_failover.py --quorum``, load average 12-14).
Here quorum is taken for lost when both say so:

1. a majority of the members are not connected (their channels' state, read every
   ``POLL_SECONDS`` without a request: a killed member's connection drops at once);
2. no member confirms a quorum within ``PROBE_SECONDS`` (a linearizable read, see
   ``EtcdStore.answers_writes``): a member that has no raft leader refuses it at once,
   one whose leader is gone holds it until then.

Either alone is not enough: the first is true for a moment at every start, and of a
coordinator cut off from members that still hold a quorum among themselves; the second
is a slow answer on a loaded host, or etcd electing a raft leader after one member of
three died, which the settling waits out without refusing anything. Once lost, the read
is tried every ``POLL_SECONDS``, and the first that is answered ends it: writes are taken
again within about ``POLL_SECONDS`` of etcd's raft electing a leader.

A quorum lost without a member's connection dropping (members paused, or cut off from
each other but not from the coordinator) is not seen here: the commit in flight is then
settled, as before, for up to ``SETTLE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from coordinator.store import StoreError
from coordinator.store.etcd import EtcdStore
from shared.logs import get_logger

log = get_logger("allot.coordinator.store")

# 20 looks a second at the channels' state (no request) while quorum holds, and 20 reads
# a second while it is lost.
POLL_SECONDS = 0.05
# A live raft leader confirms a read within a few milliseconds; a member whose leader is
# gone answers nothing. Short enough that a loss is answered within half a second.
PROBE_SECONDS = 0.25


class QuorumLost(StoreError):
    """etcd has no quorum (as last seen): the write was not sent, and nothing changed."""

    def __init__(self) -> None:
        super().__init__("etcd has lost its quorum (most members are gone); nothing was committed")


class Quorum:
    def __init__(self, etcd: EtcdStore) -> None:
        self._etcd = etcd
        self._lost_at: float | None = None  # monotonic time it was seen lost; None: held
        self._listeners: list[Callable[[QuorumLost], None]] = []
        self._looking = asyncio.create_task(self._look())

    @property
    def held(self) -> bool:
        return self._lost_at is None

    def check(self) -> None:
        """Raise ``QuorumLost`` while quorum is known lost."""
        if self._lost_at is not None:
            raise QuorumLost()

    def listen(self, listener: Callable[[QuorumLost], None]) -> None:
        """``listener(error)`` is called each time quorum is seen lost; it must not block."""
        self._listeners.append(listener)

    async def close(self) -> None:
        self._looking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._looking

    async def _look(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            if self._lost_at is not None:
                if await self._etcd.answers_writes(PROBE_SECONDS):
                    self._regain(self._lost_at)
            elif self._most_unreachable() and not await self._etcd.answers_writes(PROBE_SECONDS):
                self._lose()

    def _most_unreachable(self) -> bool:
        return 2 * self._etcd.members_unreachable() > self._etcd.members

    def _regain(self, lost_at: float) -> None:
        self._lost_at = None
        lost_s = round(time.monotonic() - lost_at, 3)
        log.warning("etcd quorum back; writes are taken again", lost_s=lost_s)

    def _lose(self) -> None:
        self._lost_at = time.monotonic()
        unreachable = self._etcd.members_unreachable()
        log.warning(
            "etcd quorum lost; writes are refused until it is back",
            unreachable=unreachable,
            members=self._etcd.members,
        )
        error = QuorumLost()
        for listener in list(self._listeners):
            listener(error)
