"""Commits fenced by the leader key: only the coordinator whose key it is can write.

    fenced = FencedStore(replica, LEADER_KEY, won_at, witness=etcd, on_deposed=step_down)

Every transaction is sent with one more compare: the leader key still has the create
revision it had when this coordinator won it. Once the key expired or another
coordinator holds it, etcd refuses every commit of this one, whatever the services
decided meanwhile; a paused or cut-off leader can never write. A refused commit whose
fence no longer holds is reported (``on_deposed``, once) and raised as ``Deposed``, so
the request that made it is answered with an error and changes nothing. The key is read
for that from ``witness``, the store itself, not from a copy that may lag behind it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from coordinator.store import CompareCreated, Entry, Store, StoreError, Txn, TxnResult


class Deposed(StoreError):
    """This coordinator no longer holds the leader key: it may not commit."""

    def __init__(self, key: str, won_at: int) -> None:
        super().__init__(
            f"the leader key {key} is no longer the one this coordinator created at revision"
            f" {won_at}; another coordinator leads and nothing was committed"
        )


class FencedStore:
    def __init__(
        self,
        store: Store,
        key: str,
        won_at: int,
        *,
        witness: Store,
        on_deposed: Callable[[], None],
    ) -> None:
        self._store = store
        self._witness = witness
        self._fence = CompareCreated(key, won_at)
        self._on_deposed = on_deposed
        self._deposed = False

    @property
    def revision(self) -> int:
        return self._store.revision

    async def get(self, key: str) -> Entry | None:
        return await self._store.get(key)

    async def range(self, prefix: str) -> list[Entry]:
        return await self._store.range(prefix)

    async def commit(self, txn: Txn) -> TxnResult:
        if self._deposed:
            raise Deposed(self._fence.key, self._fence.create_revision)
        result = await self._store.commit(replace(txn, compares=(*txn.compares, self._fence)))
        if not result.succeeded and not await self._fence_holds():
            self._deposed = True
            self._on_deposed()
            raise Deposed(self._fence.key, self._fence.create_revision)
        return result

    async def close(self) -> None:
        """The store under the fence outlives it (it goes on as a standby's)."""

    async def _fence_holds(self) -> bool:
        entry = await self._witness.get(self._fence.key)
        return entry is not None and entry.create_revision == self._fence.create_revision
