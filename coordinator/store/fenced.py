"""Commits fenced by the leader key: only the coordinator whose key it is can write.

    fenced = FencedStore(replica, LEADER_KEY, won_at, witness=etcd, on_deposed=step_down)

Every transaction is sent with one more compare: the leader key still has the create
revision it had when this coordinator won it. Once the key expired or another
coordinator holds it, etcd refuses every commit of this one, whatever the services
decided meanwhile; a paused or cut-off leader can never write. A refused commit whose
fence no longer holds is reported (``on_deposed``, once, with the reason) and raised as
``Deposed``, so the request that made it is answered with an error and changes nothing.
The key is read for that from ``witness``, the store itself, not from a copy that may lag
behind it.

A commit whose outcome is unknown (``OutcomeUnknown``: the etcd member died or hung
while it was in flight) is settled, not given up: sending it again as it was could apply
it twice (a commit of puts alone compares nothing but the fence). So every commit also
puts a marker key of its own, ``/coordinators/commits/<won_at>-<n>``, on the compare
that the marker is absent. To settle one, the marker is *burnt*: put, with the fence and
the same compare, holding ``BURNT``. If the burn succeeds, the commit never applied and
now never can (its compare fails); it is sent again with a new marker. If the burn is
refused, the marker is read back: holding ``BURNT``, an earlier burn of unknown outcome
did it; otherwise the commit applied, at the marker's revision, and that is its answer.
A burn is itself settled the same way, until ``SETTLE_SECONDS`` have passed; only then
(etcd lost quorum meanwhile) does the outcome stay unknown, and the leadership end: the
services applied nothing of it, yet the store may hold it, and their next commits would
compare revisions it changed. A marker is deleted by the next commit after its own was
answered; a new leader deletes those left by the one before it with its first commit.

While etcd's quorum is known lost (``quorum``, see ``coordinator.store.quorum``), a
commit is refused at once with ``QuorumLost``, unsent; one already in flight is settled
as above, and a write queued behind it need not wait for that.

Rejected: sending again only commits that compare revisions they change (a second
apply then fails its compare) leaves out commits of puts alone (quotas, leases, events),
the common case; reading back what a commit wrote cannot tell its own apply from a
later one, nor stop one still in flight from applying after the read.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import replace

from coordinator.store import (
    CompareCreated,
    Entry,
    OutcomeUnknown,
    Store,
    StoreError,
    Txn,
    TxnResult,
)
from coordinator.store.quorum import Quorum

REFUSED_BY_THE_FENCE = "a commit was refused by the fence: another coordinator holds the leader key"
OUTCOME_UNKNOWN = (
    "a commit's outcome is unknown (etcd failed while it was in flight, and could not"
    " be asked within {seconds:g}s), so this coordinator's state may lag the store's"
)
MARKERS = "/coordinators/commits/"
BURNT = b"burnt"  # a marker put to settle a commit: the commit did not apply
# Long enough for etcd to elect another raft leader when the member that died led it
# (1-2 s: its election timeout, 1 s by default, randomized up to twice that), short of a
# leader's TTL (5 s by default). Commits queued behind one being settled wait as long.
SETTLE_SECONDS = 3.0
SETTLE_PAUSE_SECONDS = 0.05  # between attempts, while no member answers


class Deposed(StoreError):
    """This coordinator no longer leads: it may not commit."""

    def __init__(self, why: str) -> None:
        super().__init__(f"this coordinator no longer leads ({why}); nothing was committed")


class FencedStore:
    def __init__(
        self,
        store: Store,
        key: str,
        won_at: int,
        *,
        witness: Store,
        on_deposed: Callable[[str], None],
        quorum: Quorum | None = None,
    ) -> None:
        self._store = store
        # Known lost: a commit is refused at once, unsent (one in flight is still settled).
        self.quorum = quorum
        self._witness = witness
        self._fence = CompareCreated(key, won_at)
        self._on_deposed = on_deposed
        self._deposed: str | None = None  # why, once deposed
        self._serial = itertools.count(1)  # of the markers
        # Markers whose commits were answered, deleted by the next commit (None until
        # the first, which deletes what earlier leaders left).
        self._spent: set[str] | None = None

    @property
    def revision(self) -> int:
        return self._store.revision

    async def get(self, key: str) -> Entry | None:
        return await self._store.get(key)

    async def range(self, prefix: str) -> list[Entry]:
        return await self._store.range(prefix)

    async def commit(self, txn: Txn) -> TxnResult:
        if self._deposed is not None:
            raise Deposed(self._deposed)
        if self.quorum is not None:
            self.quorum.check()
        if not (txn.puts or txn.deletes):  # nothing to apply twice: no marker needed
            return await self._fenced(replace(txn, compares=(*txn.compares, self._fence)))
        if self._spent is None:
            # Earlier leaders' markers only: the first commits run concurrently, each
            # reading them, and one of this leader's seen here may be a commit's that
            # applied and is being settled, which its deletion would take for not applied.
            own = f"{MARKERS}{self._fence.create_revision}-"
            left = {e.key for e in await self._store.range(MARKERS) if not e.key.startswith(own)}
            if self._spent is None:
                self._spent = left
        settling_until = time.monotonic() + SETTLE_SECONDS
        while True:
            marker = f"{MARKERS}{self._fence.create_revision}-{next(self._serial)}"
            # Taken out while this commit is in flight, so that concurrent commits do
            # not all carry the same deletes; given back unless it applied.
            spent = tuple(self._spent - txn.puts.keys() - set(txn.deletes))
            self._spent.difference_update(spent)
            marked = replace(
                txn,
                compares=(*txn.compares, self._fence, CompareCreated(marker, 0)),
                puts={**txn.puts, marker: b""},
                deletes=(*txn.deletes, *spent),
            )
            result: TxnResult | None = None
            try:
                result = await self._settled(marked, marker, settling_until)
            finally:
                if result is None or not result.succeeded:
                    self._spent.update(spent)
            if result is not None:  # None: it never applied, and now never will: again
                if result.succeeded:
                    self._spent.add(marker)
                return result

    async def _settled(self, marked: Txn, marker: str, until: float) -> TxnResult | None:
        """``marked`` (which puts ``marker``) committed, settled if its outcome is
        unknown: its result, or None if it did not apply."""
        try:
            return await self._fenced(marked)
        except OutcomeUnknown:
            applied_at = await self._settle(marker, until)
        return None if applied_at is None else TxnResult(succeeded=True, revision=applied_at)

    async def _fenced(self, txn: Txn) -> TxnResult:
        """``txn`` (which carries the fence) committed; ``Deposed`` if the fence failed."""
        result = await self._store.commit(txn)
        if not result.succeeded and not await self._fence_holds():
            self._depose(REFUSED_BY_THE_FENCE)
            raise Deposed(REFUSED_BY_THE_FENCE)
        return result

    async def _settle(self, marker: str, until: float) -> int | None:
        """The revision the commit that put ``marker`` applied at, or None if it did not
        apply (and never will: the marker is burnt)."""
        assert self._spent is not None
        burn = Txn(compares=(self._fence, CompareCreated(marker, 0)), puts={marker: BURNT})
        while True:
            try:
                if (await self._fenced(burn)).succeeded:
                    self._spent.add(marker)
                    return None
                entry = await self._witness.get(marker)
                if entry is not None:
                    self._spent.add(marker)
                    return None if entry.value == BURNT else entry.mod_revision
            except Deposed:
                raise
            except StoreError:
                pass  # no member answers (yet): quorum lost, or all were tried
            if time.monotonic() > until:
                why = OUTCOME_UNKNOWN.format(seconds=SETTLE_SECONDS)
                self._depose(why)
                raise OutcomeUnknown(why)
            await asyncio.sleep(SETTLE_PAUSE_SECONDS)

    async def close(self) -> None:
        """The store under the fence outlives it (it goes on as a standby's)."""

    def _depose(self, why: str) -> None:
        if self._deposed is None:
            self._deposed = why
            self._on_deposed(why)

    async def _fence_holds(self) -> bool:
        entry = await self._witness.get(self._fence.key)
        return entry is not None and entry.create_revision == self._fence.create_revision
