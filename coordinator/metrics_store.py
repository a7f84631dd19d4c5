"""The store as the services use it, with every commit timed and its size counted in
``allot_store_commit_seconds`` and ``allot_store_commit_operations``.

    store = TimedStore(await open_store(config), metrics)

Everything else passes straight through; ``inner`` is the store itself (the SQLite
store's write health is asked of it).
"""

from __future__ import annotations

import time

from prometheus_client import Histogram

from coordinator.store import Store, Txn, TxnResult
from coordinator.store.delegating import DelegatingStore


class TimedStore(DelegatingStore):
    def __init__(self, inner: Store, seconds: Histogram, operations: Histogram) -> None:
        super().__init__(inner)
        self._seconds = seconds
        self._operations = operations

    async def commit(self, txn: Txn) -> TxnResult:
        started = time.perf_counter()
        try:
            return await self.inner.commit(txn)
        finally:
            self._seconds.observe(time.perf_counter() - started)
            self._operations.observe(len(txn.compares) + len(txn.puts) + len(txn.deletes))
