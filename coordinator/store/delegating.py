"""A store that hands every call of the ``Store`` interface on to another one: the base
of the wrappers that change only some of them (``FencedStore`` fences commits,
``TimedStore`` times them, tests' stores fail or hold them).

    class Counted(DelegatingStore):
        async def commit(self, txn: Txn) -> TxnResult:
            self.commits += 1
            return await super().commit(txn)

A wrapper overrides what it changes and inherits the rest, ``quorum`` included, so what
the store underneath says of itself is still seen through any number of wrappers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.store import Entry, Store, Txn, TxnResult

if TYPE_CHECKING:
    from coordinator.store.quorum import Quorum


class DelegatingStore:
    def __init__(self, inner: Store) -> None:
        self.inner = inner

    @property
    def revision(self) -> int:
        return self.inner.revision

    @property
    def quorum(self) -> Quorum | None:
        return self.inner.quorum

    async def get(self, key: str) -> Entry | None:
        return await self.inner.get(key)

    async def range(self, prefix: str) -> list[Entry]:
        return await self.inner.range(prefix)

    async def commit(self, txn: Txn) -> TxnResult:
        return await self.inner.commit(txn)

    async def close(self) -> None:
        await self.inner.close()
