"""Electing one leader among the coordinators of one etcd prefix.

The leader is whoever holds the leader key, which is put only if absent and bound to an
etcd lease of ``ttl`` seconds; its value is the leader's advertised URL, so standbys can
send agents and clients there:

    election = Election(store, replica, url="http://10.0.0.1:7600", ttl=5)
    won = await election.campaign()          # returns once this coordinator leads
    why = await election.hold(won)           # returns why it no longer does

The lease is renewed every ``ttl / 4`` by a thread of its own
(``coordinator.lease_keeper``), whatever the event loop is busy with. Leadership ends, and
``hold`` returns, as soon as any of these is seen: the key is gone or is another
coordinator's (the replica's watch says so), etcd says the lease is gone, or no renewal
sent in the last ``ttl`` succeeded (a pause, a partition: etcd may have let the lease
expire, so this coordinator must not assume it still leads). Whatever the leader was
deciding then is refused by the fence (``coordinator.store.fenced``) in any case.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from coordinator.lease_keeper import LeaseKeeper
from coordinator.store import (
    Compare,
    CompareCreated,
    Event,
    LeaseNotFound,
    StoreError,
    Txn,
)
from coordinator.store.etcd import EtcdStore
from coordinator.store.replica import Replica
from shared.logs import get_logger

log = get_logger("allot.coordinator.election")

LEADER_KEY = "/coordinators/leader"
RETRY_SECONDS = 0.2  # between attempts to campaign while etcd does not answer


@dataclass(frozen=True)
class Leadership:
    won_at: int  # the leader key's create revision: what the fence compares
    lease: int


class Election:
    def __init__(self, store: EtcdStore, replica: Replica, *, url: str, ttl: int) -> None:
        self._store = store
        self._replica = replica
        self._url = url
        self._ttl = ttl
        self._key_changed = asyncio.Event()
        replica.listen(self._heard)

    @property
    def ttl(self) -> int:
        return self._ttl

    async def leader_url(self) -> str:
        """The leader's advertised URL as this coordinator last heard it ("": none)."""
        entry = await self._replica.get(LEADER_KEY)
        return entry.value.decode() if entry is not None else ""

    async def leader_elsewhere(self) -> str:
        """The leader's URL, unless it is this coordinator's own ("" then, as with none):
        what a standby names. A standby that sees its own URL there sees a leadership it
        gave up that etcd has not yet let go (its quorum lost, say); a client sent there
        would only be sent back to it."""
        leader = await self.leader_url()
        return "" if leader == self._url else leader

    async def campaign(self) -> Leadership:
        """Return once this coordinator holds the leader key (waiting while another does).
        While etcd does not answer (its quorum lost), it asks again every
        ``RETRY_SECONDS``, so a leader is back within a moment of quorum returning, not a
        TTL later."""
        failing = False
        while True:
            self._key_changed.clear()
            try:
                won = await self._attempt()
            except StoreError as error:
                if not failing:  # one line for the outage, not one per attempt
                    log.warning("campaign for the leader key failed; trying again", reason=error)
                failing = True
                await asyncio.sleep(RETRY_SECONDS)
                continue
            failing = False
            if won is not None:
                return won
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._ttl):  # in case the watch is behind
                    await self._key_changed.wait()

    async def try_to_lead(self) -> Leadership | None:
        """One attempt: the key if nobody holds it (or only a dead earlier run of this
        coordinator: see ``_forget_own_key``), else None (also when etcd did not answer:
        a key put by an attempt whose outcome is unknown goes with its lease)."""
        try:
            return await self._attempt()
        except StoreError as error:
            log.warning("campaign for the leader key failed; trying again", reason=error)
            return None

    async def _attempt(self) -> Leadership | None:
        entry = await self._replica.get(LEADER_KEY)
        if entry is not None and entry.value == self._url.encode():
            await self._forget_own_key(entry.mod_revision)
            entry = None
        if entry is not None:
            return None
        return await self._try_to_win()

    async def hold(self, leadership: Leadership) -> str:
        """Renew the lease until leadership is lost; why it was lost. The renewals run on
        a thread of their own (``LeaseKeeper``), so a busy event loop here cannot let the
        lease run out; this loop only watches the key."""
        keeper = LeaseKeeper(self._store.settings, leadership.lease, ttl=self._ttl)
        renewing = asyncio.create_task(keeper.lost())
        try:
            # The key is read from the replica, which may not have seen the win yet: read
            # before, it is still absent, and a new leader stepped down 0.06 s after
            # winning (and, resigning, left the cluster leaderless for seconds).
            seen = asyncio.create_task(self._replica.caught_up(leadership.won_at))
            await asyncio.wait({renewing, seen}, return_when=asyncio.FIRST_COMPLETED)
            seen.cancel()
            while not renewing.done():
                self._key_changed.clear()
                entry = await self._replica.get(LEADER_KEY)
                if entry is None or entry.create_revision != leadership.won_at:
                    return "the leader key is gone or another coordinator's"
                changed = asyncio.create_task(self._key_changed.wait())
                await asyncio.wait({renewing, changed}, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
            return renewing.result()
        finally:
            renewing.cancel()

    async def resign(self, leadership: Leadership) -> None:
        """Give the key up now (a clean stop), so a standby need not wait for the TTL."""
        try:
            await self._store.revoke_lease(leadership.lease)
        except StoreError as error:
            log.warning("leader lease not revoked; it expires by itself", reason=error)

    async def _forget_own_key(self, seen: int) -> None:
        """The key names this coordinator's own URL while it does not lead: it was put by
        an earlier run of this coordinator (this one holds the address now), killed
        before its lease ran out. It is deleted, so a restart need not wait for the TTL.
        Two coordinators wrongly given one URL would only depose each other in turn: the
        fence keeps either from writing once the other holds the key."""
        log.warning("the leader key names this coordinator's URL: an earlier run; deleting it")
        await self._store.commit(Txn(compares=(Compare(LEADER_KEY, seen),), deletes=(LEADER_KEY,)))

    async def _try_to_win(self) -> Leadership | None:
        lease = await self._store.grant_lease(self._ttl)
        absent = CompareCreated(LEADER_KEY, 0)
        txn = Txn(compares=(absent,), puts={LEADER_KEY: self._url.encode()}, lease=lease)
        try:
            result = await self._store.commit(txn)
        except LeaseNotFound:
            return None  # granted, then expired before the commit (a long pause)
        except StoreError:
            await self._store.revoke_lease(lease)
            raise
        if result.succeeded:
            return Leadership(won_at=result.revision, lease=lease)
        await self._store.revoke_lease(lease)
        return None

    def _heard(self, events: list[Event]) -> None:
        if any(event.key == LEADER_KEY for event in events):
            self._key_changed.set()
