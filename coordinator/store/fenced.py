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
puts a marker key, ``/coordinators/commits/<won_at>-<n>``, held by it alone while it is
in flight, on the compare that the marker's mod revision is still the one this leader
last knew (0 for a new one). To settle one, the marker is *burnt*: put, with the fence
and the same compare, holding ``BURNT``. If the burn succeeds, the commit never applied
and now never can (its compare fails); it is sent again on the burnt marker's revision.
If the burn is refused, the marker is read back: it changed, and only one of the commit
and its burns can have changed it, since each compares the same revision; holding
``BURNT``, an earlier burn of unknown outcome did it; otherwise the commit applied, at
the marker's revision, and that is its answer. A burn is itself settled the same way,
until ``SETTLE_SECONDS`` have passed; only then (etcd lost quorum meanwhile) does the
outcome stay unknown, and the leadership end: the services applied nothing of it, yet
the store may hold it, and their next commits would compare revisions it changed.

Once its commit is answered, a marker's revision is known again and the next commit
reuses it, so a leader has as many markers as it ever had commits in flight at once,
and a commit costs one compare and one put more than the fence alone. A new leader
deletes those of the leaders before it with its first commit. Before: a new marker per
commit, on the compare that it is absent, deleted by the commit after; at 32 clients
(``bench/etcd_commits.py``) that took etcd from about 1,350 commits/s without markers
to about 1,070. Reusing them took 6-8 % off etcd's CPU per commit, the delete's share;
the put and compare that remain are what the settling needs (the README has the
figures).

A commit with more writes than etcd's ``--max-txn-ops`` (``most_operations``) is made in
steps, each fenced and marked as above: a journal holding its writes, on its compares,
then its writes in pages (``coordinator.store.steps`` states the order and why each state
between steps is sound). A leader stopped between steps (deposed, cancelled, an outcome
it could not settle) gives up leadership; the next finishes the journal before serving
(``finish_journals``).

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
from dataclasses import dataclass, replace

from coordinator.store import (
    Compare,
    CompareCreated,
    OutcomeUnknown,
    Store,
    StoreError,
    Txn,
    TxnResult,
)
from coordinator.store.delegating import DelegatingStore
from coordinator.store.quorum import Quorum
from coordinator.store.steps import JOURNALS, decoded, encoded, operations, split
from shared.logs import get_logger

log = get_logger("allot.coordinator.store")

REFUSED_BY_THE_FENCE = "a commit was refused by the fence: another coordinator holds the leader key"
OUTCOME_UNKNOWN = (
    "a commit's outcome is unknown (etcd failed while it was in flight, and could not"
    " be asked within {seconds:g}s), so this coordinator's state may lag the store's"
)
MARKERS = "/coordinators/commits/"
APPLIED = b""  # a marker put by its commit
BURNT = b"burnt"  # a marker put to settle a commit: the commit did not apply
# Long enough for etcd to elect another raft leader when the member that died led it
# (1-2 s: its election timeout, 1 s by default, randomized up to twice that), short of a
# leader's TTL (5 s by default). Commits queued behind one being settled wait as long.
SETTLE_SECONDS = 3.0
SETTLE_PAUSE_SECONDS = 0.05  # between attempts, while no member answers


@dataclass
class Marker:
    """A marker key, held by one commit in flight at a time, and its mod revision as this
    leader last knew it (0: not put yet)."""

    key: str
    revision: int


class Deposed(StoreError):
    """This coordinator no longer leads: it may not commit."""

    def __init__(self, why: str) -> None:
        super().__init__(f"this coordinator no longer leads ({why}); nothing was committed")


class FencedStore(DelegatingStore):
    def __init__(
        self,
        store: Store,
        key: str,
        won_at: int,
        *,
        witness: Store,
        on_deposed: Callable[[str], None],
        quorum: Quorum | None = None,
        most_operations: int | None = None,
        tag: str = "",
    ) -> None:
        super().__init__(store)
        # Another process of the same leader (the lease process) fences its commits with
        # the same key: its markers carry a tag of their own, so the two never share one.
        self._tag = tag
        # etcd's --max-txn-ops: a commit with more writes is made in steps (None: never).
        self._page = most_operations
        # Known lost: a commit is refused at once, unsent (one in flight is still settled).
        self._quorum = quorum
        self._witness = witness
        self._fence = CompareCreated(key, won_at)
        self._on_deposed = on_deposed
        self._deposed: str | None = None  # why, once deposed
        self._serial = itertools.count(1)  # of the markers
        self._free: list[Marker] = []  # markers no commit in flight holds
        # Earlier leaders' markers, deleted by the first commit that applies (None until
        # read, by the first commit).
        self._left: set[str] | None = None

    @property
    def quorum(self) -> Quorum | None:
        return self._quorum

    async def commit(self, txn: Txn) -> TxnResult:
        if self._deposed is not None:
            raise Deposed(self._deposed)
        if self._quorum is not None:
            self._quorum.check()
        if not (txn.puts or txn.deletes):  # nothing to apply twice: no marker needed
            return await self._fenced(replace(txn, compares=(*txn.compares, self._fence)))
        if self._left is None:
            # Earlier leaders' markers only: this leader's own (of any of its processes)
            # are in use or free.
            own = f"{MARKERS}{self._fence.create_revision}-"
            left = {e.key for e in await self.inner.range(MARKERS) if not e.key.startswith(own)}
            if self._left is None:  # not read meanwhile by a concurrent first commit
                self._left = left
        marker = self._free.pop() if self._free else self._new_marker()
        try:
            if self._page is not None and operations(txn) > self._room():
                result = await self._in_steps(txn, marker)
            else:
                result = await self._marked(txn, marker, time.monotonic() + SETTLE_SECONDS)
        except OutcomeUnknown:
            raise  # the marker's revision is unknown: it is never used again
        except StoreError:
            self._free.append(marker)  # refused, not applied: the marker is as it was
            raise
        # (Cancelled, the commit may yet apply: its marker is never used again either.)
        self._free.append(marker)
        return result

    async def _marked(self, txn: Txn, marker: Marker, until: float) -> TxnResult:
        """``txn`` committed with ``marker`` (settled, and sent again, as needed until
        ``until``); the marker's revision is brought up to date on the way."""
        assert self._left is not None
        while True:
            # Taken out while this commit is in flight, so that concurrent commits do
            # not all carry the same deletes; given back unless it applied.
            left = tuple(self._left - txn.puts.keys() - set(txn.deletes))
            self._left.difference_update(left)
            marked = replace(
                txn,
                compares=(*txn.compares, self._fence, Compare(marker.key, marker.revision)),
                puts={**txn.puts, marker.key: APPLIED},
                deletes=(*txn.deletes, *left),
            )
            result: TxnResult | None = None
            try:
                result = await self._settled(marked, marker, until)
            finally:
                if result is None or not result.succeeded:
                    self._left.update(left)
            if result is not None:  # None: it never applied, and now never will: again
                if result.succeeded:
                    marker.revision = result.revision
                return result

    async def _settled(self, marked: Txn, marker: Marker, until: float) -> TxnResult | None:
        """``marked`` (which puts ``marker``) committed, settled if its outcome is
        unknown: its result, or None if it did not apply."""
        try:
            return await self._fenced(marked)
        except OutcomeUnknown:
            applied_at = await self._settle(marker, until)
        return None if applied_at is None else TxnResult(succeeded=True, revision=applied_at)

    async def _fenced(self, txn: Txn) -> TxnResult:
        """``txn`` (which carries the fence) committed; ``Deposed`` if the fence failed."""
        result = await self.inner.commit(txn)
        if not result.succeeded and not await self._fence_holds():
            self._depose(REFUSED_BY_THE_FENCE)
            raise Deposed(REFUSED_BY_THE_FENCE)
        return result

    async def _settle(self, marker: Marker, until: float) -> int | None:
        """The revision the commit that put ``marker`` applied at, or None if it did not
        apply (and never will: the marker is burnt). Either way ``marker.revision`` is
        its revision now."""
        seen = marker.revision
        burn = Txn(compares=(self._fence, Compare(marker.key, seen)), puts={marker.key: BURNT})
        while True:
            try:
                burnt = await self._fenced(burn)
                if burnt.succeeded:
                    marker.revision = burnt.revision
                    return None
                # Refused with the fence holding: the commit, or an earlier burn of
                # unknown outcome, changed the marker (each compares ``seen``, so only
                # the first of them to reach etcd can have applied).
                entry = await self._witness.get(marker.key)
                if entry is not None and entry.mod_revision != seen:
                    marker.revision = entry.mod_revision
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

    def _room(self) -> int:
        """The caller's writes that fit in one step: etcd's limit less the marker's put,
        the journal's delete and the deletes of earlier leaders' markers still to go."""
        assert self._page is not None
        return max(1, self._page - 2 - len(self._left or ()))

    async def _in_steps(self, txn: Txn, marker: Marker) -> TxnResult:
        """``txn``, too large for one etcd transaction, committed in steps (see
        ``coordinator.store.steps``): the journal with ``txn``'s compares, then its
        writes in pages. Stopped between steps, the leadership ends, so that the next
        leader finishes it: this one's memory would lag the store meanwhile."""
        compares = len(txn.compares) + 2  # with the fence and the marker's
        if self._page is not None and compares > self._page:
            raise StoreError(
                f"a commit comparing {len(txn.compares)} keys: more than this etcd's"
                f" --max-txn-ops ({self._page}) allows in one transaction; start every"
                " member with a larger --max-txn-ops; nothing was committed"
            )
        started = time.monotonic()
        journal = f"{JOURNALS}{self._fence.create_revision}-{next(self._serial)}"
        writes = encoded(txn)
        begin = Txn(compares=txn.compares, puts={journal: writes}, lease=txn.lease)
        try:
            begun = await self._marked(begin, marker, time.monotonic() + SETTLE_SECONDS)
        except asyncio.CancelledError:  # the journal may yet apply, unknown to memory
            self._depose("a commit in steps was cancelled while its journal was in flight")
            raise
        if not begun.succeeded:
            return begun
        pages = split(txn, most=self._room())
        try:
            result = await self._finish(journal, begun.revision, pages, marker)
        except BaseException as error:
            self._depose(f"a commit in steps stopped between two of them ({error!r})")
            raise
        log.info(
            "commit made in steps",
            journal=journal,
            writes=operations(txn),
            journal_bytes=len(writes),
            steps=len(pages) + 1,
            revision=result.revision,
            took_s=round(time.monotonic() - started, 3),
        )
        return result

    async def _finish(self, journal: str, seen: int, pages: list[Txn], marker: Marker) -> TxnResult:
        """``pages`` committed in order, each compared on ``journal`` still being at
        ``seen``; the last one deletes it."""
        pages[-1] = replace(pages[-1], deletes=(*pages[-1].deletes, journal))
        revisions: dict[str, int] = {}
        result = TxnResult(succeeded=True, revision=seen)
        for page in pages:
            step = replace(page, compares=(Compare(journal, seen),))
            result = await self._marked(step, marker, time.monotonic() + SETTLE_SECONDS)
            if not result.succeeded:  # the fence held: no leader may touch its journal
                raise StoreError(f"the journal {journal} changed under its own steps")
            revisions.update(dict.fromkeys(page.puts, result.revision))
        return replace(result, revisions=revisions)

    async def finish_journals(self) -> int:
        """Finish every commit that a leader before this one left between its steps
        (each journal's writes made again, then the journal deleted); the store's
        revision after. To be called once elected, before anything is read to serve."""
        for entry in await self.inner.range(JOURNALS):
            txn = decoded(entry.value)
            if self._left is None:
                self._left = {e.key for e in await self.inner.range(MARKERS)}
            marker = self._free.pop() if self._free else self._new_marker()
            pages = split(txn, most=self._room()) if self._page else [txn]
            await self._finish(entry.key, entry.mod_revision, pages, marker)
            self._free.append(marker)
            log.warning(
                "finished a commit an earlier leader left between steps",
                journal=entry.key,
                writes=operations(txn),
            )
        return self.inner.revision

    def _new_marker(self) -> Marker:
        serial = next(self._serial)
        return Marker(f"{MARKERS}{self._fence.create_revision}-{self._tag}{serial}", 0)

    async def close(self) -> None:
        """The store under the fence outlives it (it goes on as a standby's)."""

    def _depose(self, why: str) -> None:
        if self._deposed is None:
            self._deposed = why
            self._on_deposed(why)

    async def _fence_holds(self) -> bool:
        entry = await self._witness.get(self._fence.key)
        return entry is not None and entry.create_revision == self._fence.create_revision
