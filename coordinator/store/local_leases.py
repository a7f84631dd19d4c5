"""The embedded store's leases: etcd's TTL leases on this process's monotonic clock.

A lease ends when its TTL passes without a ``keep_alive`` or when it is revoked; its
keys are then deleted in one transaction through the store's ordinary commit, so the
revision, the watch and the file see an expiry exactly like any other delete. The keys
of a lease are known from the commits that attached them (``attached``), which the store
reports after each one. No lease outlives the process: the store deletes the keys of
every earlier process's leases when it opens the file.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable

from coordinator.store import LeaseNotFound, Txn, TxnResult, check_ttl


class LocalLeases:
    def __init__(self, commit: Callable[[Txn], Awaitable[TxnResult]]) -> None:
        self._commit = commit
        self._ids = itertools.count(1)
        self._timers: dict[int, tuple[int, asyncio.TimerHandle]] = {}  # id -> (ttl, timer)
        self._keys: dict[int, set[str]] = {}
        self._lease_of: dict[str, int] = {}
        self._endings: set[asyncio.Task[None]] = set()

    def grant(self, ttl: int) -> int:
        check_ttl(ttl)
        lease = next(self._ids)
        self._start(lease, ttl)
        return lease

    def keep_alive(self, lease: int) -> int:
        ttl, timer = self._live(lease)
        timer.cancel()
        self._start(lease, ttl)
        return ttl

    def check(self, lease: int) -> None:
        """Raise ``LeaseNotFound`` unless ``lease`` is 0 (none) or live."""
        if lease:
            self._live(lease)

    async def revoke(self, lease: int) -> None:
        if lease in self._timers:
            await self._end(lease)

    def attached(self, txn: Txn) -> None:
        """Take note of what the committed ``txn`` did to the keys' leases."""
        for key in itertools.chain(txn.puts, txn.deletes):
            owner = self._lease_of.pop(key, None)
            if owner is not None and owner in self._keys:
                self._keys[owner].discard(key)
        if txn.lease:
            self._keys.setdefault(txn.lease, set()).update(txn.puts)
            self._lease_of.update(dict.fromkeys(txn.puts, txn.lease))

    def is_leased(self, keys: Iterable[str]) -> bool:
        return any(key in self._lease_of for key in keys)

    async def close(self) -> None:
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._endings):
            task.cancel()

    def _live(self, lease: int) -> tuple[int, asyncio.TimerHandle]:
        try:
            return self._timers[lease]
        except KeyError:
            raise LeaseNotFound(lease) from None

    def _start(self, lease: int, ttl: int) -> None:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(ttl, self._expire, lease)
        self._timers[lease] = (ttl, timer)

    def _expire(self, lease: int) -> None:
        task = asyncio.get_running_loop().create_task(self._end(lease))
        self._endings.add(task)
        task.add_done_callback(self._endings.discard)

    async def _end(self, lease: int) -> None:
        """The lease is dead at once (no commit may attach to it from now on); once every
        commit submitted before has been applied, its keys go in one transaction."""
        _, timer = self._timers.pop(lease)
        timer.cancel()
        await self._commit(Txn())  # commits are applied in order: this one comes last
        keys = self._keys.pop(lease, set())
        if keys:
            await self._commit(Txn(deletes=tuple(sorted(keys))))
