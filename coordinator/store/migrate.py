"""Copy a SQLite store into an empty etcd prefix, exactly: every key with its value.

    copied = await migrate(Path("/var/lib/allot/allot.db"), EtcdSettings(endpoints=...))

The SQLite file is opened with its lock, so no coordinator may be running on it. The
target must hold no key under the prefix; each chunk of the copy also compares its keys
as absent, so a writer racing the copy makes it stop rather than mix. Revisions are not
copied: etcd gives each chunk its own (its cluster revision), so create and mod
revisions start afresh, and the coordinator reads them anew when it starts; agents take
the new numbers with the full state they get on reconnecting. The copy is read back and
compared before it is declared done. It is not one transaction (a large store exceeds
etcd's limits): if it stops half-way, the message says how to clear the prefix and
start again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from coordinator.store import Compare, Entry, StoreError, Txn
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdSettings
from coordinator.store.sqlite import SqliteStore

# Within etcd's defaults (--max-txn-ops 128, --max-request-bytes 1.5 MiB), so a
# migration needs no tuning of the target.
CHUNK_KEYS = 60
CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Migrated:
    keys: int
    value_bytes: int
    source_revision: int
    target_revision: int


async def migrate(source: Path, target: EtcdSettings) -> Migrated:
    if not await asyncio.to_thread(source.is_file):
        raise StoreError(f"{source} does not exist: nothing to migrate")
    sqlite = await SqliteStore.open(source)
    try:
        entries = await sqlite.range("")
        source_revision = sqlite.revision
    finally:
        await sqlite.close()
    etcd = await EtcdStore.open(target)
    try:
        await _refuse_non_empty(etcd, target)
        for chunk in _chunks(entries):
            await _copy(etcd, chunk, target)
        await _compare(etcd, entries, target)
        return Migrated(
            keys=len(entries),
            value_bytes=sum(len(e.value) for e in entries),
            source_revision=source_revision,
            target_revision=etcd.revision,
        )
    finally:
        await etcd.close()


async def _refuse_non_empty(etcd: EtcdStore, target: EtcdSettings) -> None:
    present = await etcd.range("")
    if present:
        raise StoreError(
            f"etcd already holds {len(present)} key(s) under {target.prefix!r} (the first:"
            f" {present[0].key!r}); migrate copies only into an empty prefix. Choose another"
            f" etcd_prefix, or delete this one first (etcdctl del --prefix '{target.prefix}/')"
        )


def _chunks(entries: Sequence[Entry]) -> Iterator[Sequence[Entry]]:
    start, size = 0, 0
    for index, entry in enumerate(entries):
        weight = len(entry.key) + len(entry.value)
        if index > start and (index - start >= CHUNK_KEYS or size + weight > CHUNK_BYTES):
            yield entries[start:index]
            start, size = index, 0
        size += weight
    if start < len(entries):
        yield entries[start:]


async def _copy(etcd: EtcdStore, chunk: Sequence[Entry], target: EtcdSettings) -> None:
    txn = Txn(
        compares=tuple(Compare(e.key, 0) for e in chunk),
        puts={e.key: e.value for e in chunk},
    )
    if not (await etcd.commit(txn)).succeeded:
        raise StoreError(
            f"another writer put keys under {target.prefix!r} during the migration (one of"
            f" {chunk[0].key!r} .. {chunk[-1].key!r}); stop it, delete the prefix"
            f" (etcdctl del --prefix '{target.prefix}/') and migrate again"
        )


async def _compare(etcd: EtcdStore, entries: Sequence[Entry], target: EtcdSettings) -> None:
    copied = [(e.key, e.value) for e in await etcd.range("")]
    if copied != [(e.key, e.value) for e in entries]:
        raise StoreError(
            f"the copy under {target.prefix!r} differs from the source after the migration;"
            f" delete the prefix (etcdctl del --prefix '{target.prefix}/') and migrate again"
        )
