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

A commit whose outcome is unknown (``OutcomeUnknown``: etcd's connection or deadline
failed while it was in flight) ends the leadership too. The services applied nothing
of it, yet the store may hold it, and their next commits would compare revisions it
changed. So nothing more is committed here, and the leader gives its key up: a commit
still in flight is then refused by the fence, and whoever leads next starts from the
store, holding that commit or not.
"""

from __future__ import annotations

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

REFUSED_BY_THE_FENCE = "a commit was refused by the fence: another coordinator holds the leader key"
OUTCOME_UNKNOWN = (
    "a commit's outcome is unknown (etcd failed while it was in flight), so this"
    " coordinator's state may lag the store's"
)


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
    ) -> None:
        self._store = store
        self._witness = witness
        self._fence = CompareCreated(key, won_at)
        self._on_deposed = on_deposed
        self._deposed: str | None = None  # why, once deposed

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
        try:
            result = await self._store.commit(replace(txn, compares=(*txn.compares, self._fence)))
        except OutcomeUnknown:
            self._depose(OUTCOME_UNKNOWN)
            raise
        if not result.succeeded and not await self._fence_holds():
            self._depose(REFUSED_BY_THE_FENCE)
            raise Deposed(REFUSED_BY_THE_FENCE)
        return result

    async def close(self) -> None:
        """The store under the fence outlives it (it goes on as a standby's)."""

    def _depose(self, why: str) -> None:
        if self._deposed is None:
            self._deposed = why
            self._on_deposed(why)

    async def _fence_holds(self) -> bool:
        entry = await self._witness.get(self._fence.key)
        return entry is not None and entry.create_revision == self._fence.create_revision
