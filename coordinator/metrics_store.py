"""The store as the services use it, with every commit timed and its size counted in
``allot_store_commit_seconds`` and ``allot_store_commit_operations``.

    store = TimedStore(await open_store(config), metrics)

Reads pass straight through; ``inner`` is the store itself (the SQLite store's write
health is asked of it).
"""

from __future__ import annotations

import time

from prometheus_client import Histogram

from coordinator.store import Entry, Store, Txn, TxnResult
from coordinator.store.fenced import FencedStore
from coordinator.store.quorum import Quorum


class TimedStore:
    def __init__(self, inner: Store, seconds: Histogram, operations: Histogram) -> None:
        self.inner = inner
        self._seconds = seconds
        self._operations = operations

    @property
    def quorum(self) -> Quorum | None:
        """A leader's etcd quorum watch (None on SQLite), seen through this wrapper so the
        sequencer still refuses writes at once while quorum is known lost."""
        return self.inner.quorum if isinstance(self.inner, FencedStore) else None

    @property
    def revision(self) -> int:
        return self.inner.revision

    async def get(self, key: str) -> Entry | None:
        return await self.inner.get(key)

    async def range(self, prefix: str) -> list[Entry]:
        return await self.inner.range(prefix)

    async def commit(self, txn: Txn) -> TxnResult:
        started = time.perf_counter()
        try:
            return await self.inner.commit(txn)
        finally:
            self._seconds.observe(time.perf_counter() - started)
            self._operations.observe(len(txn.compares) + len(txn.puts) + len(txn.deletes))

    async def close(self) -> None:
        await self.inner.close()
