"""The embedded store: one SQLite file in WAL mode, written with group commit.

Durability without a loss of throughput: every transaction submitted in the same turn
of the event loop (and all that arrive while a batch is being written) is committed in
one SQLite transaction with ``synchronous=FULL``, so a batch costs one fsync, and each
caller is answered only after that fsync. Within a batch the transactions apply in the
order they were submitted, each seeing the writes of those before it, and each
successful one receives its own revision, exactly as if they had been committed alone.

SQLite calls block, so they run on one dedicated thread; the connection is only ever
used from that thread, one call at a time. The watch (``changes.ChangeFeed``) and the
leases (``local_leases.LocalLeases``) live in this process: see their modules for what
that means.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import itertools
import os
import sqlite3
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from coordinator.store import (
    Compare,
    CompareCreated,
    Entry,
    Event,
    Snapshot,
    StoreError,
    Txn,
    TxnResult,
    check_key,
    check_prefix,
    check_txn,
)
from coordinator.store.changes import ChangeFeed
from coordinator.store.local_leases import LocalLeases
from coordinator.store.write_health import WriteHealth, disk_note

# Schema 2 adds lease_keys (the keys put with a lease); a schema 1 file gains it on open.
SCHEMA_VERSION = 2
# Changing transactions the watch keeps in memory (a watch from before them is refused).
WATCH_HISTORY = 10_000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    create_revision INTEGER NOT NULL,
    mod_revision INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (name, value) VALUES ('revision', 0);
CREATE TABLE IF NOT EXISTS lease_keys (
    key TEXT PRIMARY KEY,
    lease INTEGER NOT NULL
) WITHOUT ROWID;
"""

_COLUMNS = "key, value, create_revision, mod_revision"
_REVISION = "SELECT value FROM meta WHERE name = 'revision'"
_UPSERT = (
    "INSERT INTO kv (key, value, create_revision, mod_revision) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, mod_revision = excluded.mod_revision"
)
_DELETE = "DELETE FROM kv WHERE key = ?"
_ATTACH = "INSERT OR REPLACE INTO lease_keys (key, lease) VALUES (?, ?)"
_DETACH = "DELETE FROM lease_keys WHERE key = ?"
R = TypeVar("R")
_Pending = tuple[Txn, "asyncio.Future[TxnResult]"]
_Applied = tuple[TxnResult, list[Event]]


class SqliteStore:
    """``Store`` on a SQLite file; only one process may open a file at a time."""

    quorum = None  # one file, no quorum to lose (``Store.quorum``)

    def __init__(
        self,
        connection: sqlite3.Connection,
        lock_fd: int,
        revision: int,
        watch_history: int,
        directory: Path,
    ) -> None:
        self._db = connection
        self._lock_fd = lock_fd
        self._revision = revision
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="allot-store")
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._changes = ChangeFeed(revision=revision, keep=watch_history)
        self._leases = LocalLeases(self.commit)
        self._lease_rows = False  # store thread only: may lease_keys hold a row?
        self.write_health = WriteHealth(directory)

    @classmethod
    async def open(cls, path: Path, *, watch_history: int = WATCH_HISTORY) -> SqliteStore:
        """Open (creating if needed) the store at ``path``, holding an exclusive lock."""
        return await asyncio.to_thread(cls._open_blocking, path, watch_history)

    @classmethod
    def _open_blocking(cls, path: Path, watch_history: int) -> SqliteStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(path.with_name(path.name + ".lock"))
        connection: sqlite3.Connection | None = None
        try:
            connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            revision = _prepare(connection, path)
        except BaseException as error:
            if connection is not None:
                connection.close()
            os.close(lock_fd)
            if isinstance(error, sqlite3.Error):
                # A full disk, an I/O error: said in one line by whoever opens the store.
                raise StoreError(f"{path}: {error} ({disk_note(path.parent)})") from None
            raise
        return cls(connection, lock_fd, revision, watch_history, path.parent)

    @property
    def revision(self) -> int:
        return self._revision

    async def get(self, key: str) -> Entry | None:
        check_key(key)
        rows = await self._run(
            lambda: self._db.execute(f"SELECT {_COLUMNS} FROM kv WHERE key = ?", (key,)).fetchall()
        )
        return _entry(rows[0]) if rows else None

    async def range(self, prefix: str) -> list[Entry]:
        return (await self.snapshot(prefix)).entries

    async def snapshot(self, prefix: str) -> Snapshot:
        check_prefix(prefix)
        end = _prefix_end(prefix)
        if end is None:
            sql = f"SELECT {_COLUMNS} FROM kv WHERE key >= ? ORDER BY key"
            args: tuple[str, ...] = (prefix,)
        else:
            sql = f"SELECT {_COLUMNS} FROM kv WHERE key >= ? AND key < ? ORDER BY key"
            args = (prefix, end)

        def read() -> Snapshot:
            # Between batches (this thread runs one call at a time), so the rows and the
            # stored revision agree. The entries are made here too, not on the event loop:
            # 430,400 of them (200,000 containers) took 1.2 s of its CPU in one go, which a
            # standby's loop could not answer in; this thread hands the interpreter back
            # every switch interval. Made positionally: 0.44 s where keywords took 0.68.
            rows = self._db.execute(sql, args).fetchall()
            revision = int(self._db.execute(_REVISION).fetchone()[0])
            return Snapshot(list(itertools.starmap(Entry, rows)), revision)

        return await self._run(read)

    def watch(self, prefix: str, start_revision: int) -> AsyncGenerator[list[Event], None]:
        return self._changes.follow(prefix, start_revision)

    async def compact(self, revision: int) -> None:
        self._changes.forget_before(revision)

    async def grant_lease(self, ttl: int) -> int:
        return self._leases.grant(ttl)

    async def keep_alive(self, lease: int) -> int:
        return self._leases.keep_alive(lease)

    async def revoke_lease(self, lease: int) -> None:
        await self._leases.revoke(lease)

    async def commit(self, txn: Txn) -> TxnResult:
        check_txn(txn)
        self._leases.check(txn.lease)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[TxnResult] = loop.create_future()
        self._pending.append((txn, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        return await future

    async def close(self) -> None:
        await self._leases.close()
        self._changes.close()
        if self._flusher is not None:
            await self._flusher
        await self._run(self._db.close)
        self._thread.shutdown(wait=True)
        os.close(self._lock_fd)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                txns = [txn for txn, _ in batch]
                applied, revision = await self._run(functools.partial(self._apply, txns))
            except Exception as error:  # the batch was rolled back: fail each caller
                self.write_health.failed(str(error))
                failure = StoreError(
                    f"store write failed, nothing was committed: {self.write_health.problem}"
                )
                for _, future in batch:
                    if not future.done():
                        future.set_exception(failure)
                continue
            self.write_health.succeeded()
            self._revision = revision
            for (txn, future), (result, events) in zip(batch, applied, strict=True):
                if result.succeeded:
                    self._leases.attached(txn)
                if events:
                    self._changes.publish(result.revision, events)
                if not future.done():
                    future.set_result(result)

    def _apply(self, batch: Sequence[Txn]) -> tuple[list[_Applied], int]:
        """Runs on the store thread: the whole batch in one SQLite transaction; each
        transaction's result and the events of what it changed.

        Puts are buffered and written with one ``executemany``, a loop in C: updating
        2,000 leases took 6.5 ms one ``execute`` each and 4.9 ms this way, time in
        which this thread holds the GIL the event loop needs. The buffer is written
        before anything reads or deletes, so every transaction still sees the writes
        of those before it.
        """
        db = self._db
        revision = self._revision
        applied: list[_Applied] = []
        puts: list[tuple[str, bytes, int, int]] = []

        def write_puts() -> None:
            db.executemany(_UPSERT, puts)
            puts.clear()

        db.execute("BEGIN IMMEDIATE")
        try:
            for txn in batch:
                if txn.compares:
                    write_puts()
                    if not all(self._holds(c) for c in txn.compares):
                        applied.append((TxnResult(succeeded=False, revision=revision), []))
                        continue
                deleted = []
                if txn.deletes:
                    write_puts()
                    deleted = [k for k in txn.deletes if db.execute(_DELETE, (k,)).rowcount]
                if txn.puts or deleted:
                    revision += 1  # like etcd: only a transaction that changed something
                    puts.extend((key, value, revision, revision) for key, value in txn.puts.items())
                    self._write_lease_keys(txn, deleted)
                events = [Event(k, v, revision) for k, v in txn.puts.items()]
                events += [Event(k, b"", revision, deleted=True) for k in deleted]
                applied.append((TxnResult(succeeded=True, revision=revision), events))
            write_puts()
            db.execute("UPDATE meta SET value = ? WHERE name = 'revision'", (revision,))
            db.execute("COMMIT")
        except BaseException:
            _roll_back(db)
            raise
        return applied, revision

    def _write_lease_keys(self, txn: Txn, deleted: list[str]) -> None:
        """Keep lease_keys naming exactly the keys put with a lease (store thread)."""
        if txn.lease:
            self._db.executemany(_ATTACH, ((key, txn.lease) for key in txn.puts))
            self._lease_rows = True
        elif self._lease_rows:
            self._db.executemany(_DETACH, ((key,) for key in [*txn.puts, *deleted]))

    def _holds(self, compare: Compare | CompareCreated) -> bool:
        column = "mod_revision" if isinstance(compare, Compare) else "create_revision"
        row = self._db.execute(f"SELECT {column} FROM kv WHERE key = ?", (compare.key,)).fetchone()
        expected = compare.mod_revision if isinstance(compare, Compare) else compare.create_revision
        return (int(row[0]) if row else 0) == expected

    async def _run(self, call: Callable[[], R]) -> R:
        return await asyncio.get_running_loop().run_in_executor(self._thread, call)


def _lock(lock_path: Path) -> int:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"another process holds {lock_path}: only one coordinator may use a store;"
            " stop the other one or give this one its own data_dir"
        ) from None
    return fd


def _prepare(db: sqlite3.Connection, path: Path) -> int:
    """Check the schema version, set the pragmas, create the schema if new, and return
    the stored revision. A file it refuses is left exactly as it was."""
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as error:
        if error.sqlite_errorname != "SQLITE_NOTADB":
            raise  # it could not be read (a full disk, an I/O error): said by the opener
        raise StoreError(f"{path} is not an allot store (SQLite says: {error})") from error
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema {version}, written by a newer allot than this one"
            f" (which knows schema {SCHEMA_VERSION}); upgrade the coordinator"
        )
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise StoreError(f"{path}: SQLite refused WAL mode (got {mode!r}); is it on NFS?")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
    revision = int(db.execute(_REVISION).fetchone()[0])
    return _end_earlier_leases(db, revision)


def _end_earlier_leases(db: sqlite3.Connection, revision: int) -> int:
    """Delete the keys of an earlier process's leases (their clock died with it), in
    one transaction of its own; the store's revision afterwards."""
    db.execute("BEGIN IMMEDIATE")
    try:
        gone = db.execute("DELETE FROM kv WHERE key IN (SELECT key FROM lease_keys)").rowcount
        db.execute("DELETE FROM lease_keys")
        if gone:
            revision += 1
            db.execute("UPDATE meta SET value = ? WHERE name = 'revision'", (revision,))
        db.execute("COMMIT")
    except BaseException:
        _roll_back(db)
        raise
    return revision


def _roll_back(db: sqlite3.Connection) -> None:
    """Undo the open transaction, unless SQLite already has (it does itself on a full
    disk or an I/O error): the error that goes up is then the cause, not ROLLBACK's
    "cannot rollback - no transaction is active"."""
    if db.in_transaction:
        db.execute("ROLLBACK")


def _prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (None: none is).

    Keys compare as their UTF-8 bytes, which order like their code points, so it is the
    prefix with its last character raised to the next code point, skipping the
    surrogates (no valid key holds one); a last character already at U+10FFFF carries
    into the one before it.
    """
    stem = prefix
    while stem:
        last = ord(stem[-1])
        if last < 0x10FFFF:
            following = 0xE000 if last == 0xD7FF else last + 1
            return stem[:-1] + chr(following)
        stem = stem[:-1]
    return None


def _entry(row: tuple[str, bytes, int, int]) -> Entry:
    key, value, create_revision, mod_revision = row
    return Entry(key=key, value=value, create_revision=create_revision, mod_revision=mod_revision)
