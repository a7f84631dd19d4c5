"""Electing one leader among the coordinators of one etcd prefix.

The leader is whoever holds the leader key, which is put only if absent and bound to an
etcd lease of ``ttl`` seconds; its value is the leader's advertised URL, so standbys can
send agents and clients there:

    election = Election(store, replica, url="http://10.0.0.1:7600", ttl=5)
    won = await election.campaign()          # returns once this coordinator leads
    why = await election.hold(won)           # returns why it no longer does

The lease is renewed every ``ttl / 4``. Leadership ends, and ``hold`` returns, as soon as
any of these is seen: the key is gone or is another coordinator's (the replica's watch
says so), etcd says the lease is gone, or no renewal succeeded for a whole ``ttl`` (a
pause, a partition: etcd may have let the lease expire, so this coordinator must not
assume it still leads). Whatever the leader was deciding then is refused by the fence
(``coordinator.store.fenced``) in any case.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from coordinator.store import ClusterStore, CompareCreated, Event, LeaseNotFound, StoreError, Txn
from coordinator.store.replica import Replica
from shared.logs import get_logger

log = get_logger("allot.coordinator.election")

LEADER_KEY = "/coordinators/leader"


@dataclass(frozen=True)
class Leadership:
    won_at: int  # the leader key's create revision: what the fence compares
    lease: int


class Election:
    def __init__(self, store: ClusterStore, replica: Replica, *, url: str, ttl: int) -> None:
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

    async def campaign(self) -> Leadership:
        """Return once this coordinator holds the leader key (waiting while another does)."""
        while True:
            self._key_changed.clear()
            if await self._replica.get(LEADER_KEY) is None:
                won = await self._try_to_win()
                if won is not None:
                    return won
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._ttl):  # in case the watch is behind
                    await self._key_changed.wait()

    async def hold(self, leadership: Leadership) -> str:
        """Renew the lease until leadership is lost; why it was lost."""
        renewed = time.monotonic()
        while True:
            self._key_changed.clear()
            entry = await self._replica.get(LEADER_KEY)
            if entry is None or entry.create_revision != leadership.won_at:
                return "the leader key is gone or another coordinator's"
            silent = time.monotonic() - renewed
            if silent > self._ttl:
                return f"the lease was not renewed for {silent:.1f}s (TTL {self._ttl}s)"
            try:
                async with asyncio.timeout(self._ttl / 4):
                    await self._store.keep_alive(leadership.lease)
                renewed = time.monotonic()
            except LeaseNotFound:
                return "etcd says the lease expired"
            except (StoreError, TimeoutError) as error:
                why = str(error) or f"no answer within {self._ttl / 4:g}s"
                log.warning("leader lease not renewed; trying again", reason=why)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._ttl / 4):
                    await self._key_changed.wait()

    async def resign(self, leadership: Leadership) -> None:
        """Give the key up now (a clean stop), so a standby need not wait for the TTL."""
        try:
            await self._store.revoke_lease(leadership.lease)
        except StoreError as error:
            log.warning("leader lease not revoked; it expires by itself", reason=error)

    async def _try_to_win(self) -> Leadership | None:
        lease = await self._store.grant_lease(self._ttl)
        absent = CompareCreated(LEADER_KEY, 0)
        txn = Txn(compares=(absent,), puts={LEADER_KEY: self._url.encode()}, lease=lease)
        try:
            result = await self._store.commit(txn)
        except LeaseNotFound:
            return None  # granted, then expired before the commit (a long pause)
        if result.succeeded:
            return Leadership(won_at=result.revision, lease=lease)
        await self._store.revoke_lease(lease)
        return None

    def _heard(self, events: list[Event]) -> None:
        if any(event.key == LEADER_KEY for event in events):
            self._key_changed.set()
