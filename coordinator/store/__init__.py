"""The coordinator's state store: one small interface with etcd v3's semantics.

Keys map to byte values, each with the revision that created it and the one that last
modified it; a global revision grows by one per transaction that changes something (a
failed one, a compare-only one or a delete of missing keys leaves it). A transaction
commits its writes only if every key it read still has the revision it saw
(compare-and-swap), so two deciders can never both spend the same capacity:

    entry = await store.get("/nodes/n1")
    seen = entry.mod_revision if entry else 0            # 0: the key must not exist
    result = await store.commit(Txn(compares=(Compare("/nodes/n1", seen),),
                                    puts={"/nodes/n1": b"..."}))
    if not result.succeeded: ...                          # someone else wrote first

Nothing above the store touches SQL; ``SqliteStore`` is the embedded engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Entry:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int


@dataclass(frozen=True)
class Compare:
    """Holds when ``key``'s modification revision is ``mod_revision`` (0: key absent)."""

    key: str
    mod_revision: int


@dataclass(frozen=True)
class Txn:
    compares: tuple[Compare, ...] = ()
    puts: Mapping[str, bytes] = field(default_factory=dict)
    deletes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int  # the store's revision after this transaction (unchanged if it failed)


class StoreError(Exception):
    """The store cannot be opened or written; the message says what to do."""


class Store(Protocol):
    @property
    def revision(self) -> int: ...

    async def get(self, key: str) -> Entry | None: ...

    async def range(self, prefix: str) -> list[Entry]:
        """Every entry whose key starts with ``prefix``, in key order."""
        ...

    async def commit(self, txn: Txn) -> TxnResult:
        """Apply ``txn`` atomically and durably if its compares hold."""
        ...

    async def close(self) -> None: ...
