"""The embedded store: one SQLite file in WAL mode, written with group commit.

Durability without a loss of throughput: every transaction submitted in the same turn
of the event loop (and all that arrive while a batch is being written) is committed in
one SQLite transaction with ``synchronous=FULL``, so a batch costs one fsync, and each
caller is answered only after that fsync. Within a batch the transactions apply in the
order they were submitted, each seeing the writes of those before it, and each
successful one receives its own revision, exactly as if they had been committed alone.

SQLite calls block, so they run on one dedicated thread; the connection is only ever
used from that thread, one call at a time.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from coordinator.store import Entry, StoreError, Txn, TxnResult

SCHEMA_VERSION = 1
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
"""

_COLUMNS = "key, value, create_revision, mod_revision"
_UPSERT = (
    "INSERT INTO kv (key, value, create_revision, mod_revision) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, mod_revision = excluded.mod_revision"
)
_DELETE = "DELETE FROM kv WHERE key = ?"
R = TypeVar("R")
_Pending = tuple[Txn, "asyncio.Future[TxnResult]"]


class SqliteStore:
    """``Store`` on a SQLite file; only one process may open a file at a time."""

    def __init__(self, connection: sqlite3.Connection, lock_fd: int, revision: int) -> None:
        self._db = connection
        self._lock_fd = lock_fd
        self._revision = revision
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="allot-store")
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, path: Path) -> SqliteStore:
        """Open (creating if needed) the store at ``path``, holding an exclusive lock."""
        return await asyncio.to_thread(cls._open_blocking, path)

    @classmethod
    def _open_blocking(cls, path: Path) -> SqliteStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(path.with_name(path.name + ".lock"))
        connection: sqlite3.Connection | None = None
        try:
            connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            revision = _prepare(connection, path)
        except BaseException:
            if connection is not None:
                connection.close()
            os.close(lock_fd)
            raise
        return cls(connection, lock_fd, revision)

    @property
    def revision(self) -> int:
        return self._revision

    async def get(self, key: str) -> Entry | None:
        _check_key(key)
        rows = await self._run(
            lambda: self._db.execute(f"SELECT {_COLUMNS} FROM kv WHERE key = ?", (key,)).fetchall()
        )
        return _entry(rows[0]) if rows else None

    async def range(self, prefix: str) -> list[Entry]:
        if prefix:
            _check_key(prefix)
        end = _prefix_end(prefix)
        if end is None:
            sql = f"SELECT {_COLUMNS} FROM kv WHERE key >= ? ORDER BY key"
            args: tuple[str, ...] = (prefix,)
        else:
            sql = f"SELECT {_COLUMNS} FROM kv WHERE key >= ? AND key < ? ORDER BY key"
            args = (prefix, end)
        rows = await self._run(lambda: self._db.execute(sql, args).fetchall())
        return [_entry(row) for row in rows]

    async def commit(self, txn: Txn) -> TxnResult:
        _check(txn)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[TxnResult] = loop.create_future()
        self._pending.append((txn, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        return await future

    async def close(self) -> None:
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
                results, revision = await self._run(functools.partial(self._apply, txns))
            except Exception as error:  # the batch was rolled back: fail each caller
                failure = StoreError(f"store write failed, nothing was committed: {error}")
                for _, future in batch:
                    if not future.done():
                        future.set_exception(failure)
                continue
            self._revision = revision
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    def _apply(self, batch: Sequence[Txn]) -> tuple[list[TxnResult], int]:
        """Runs on the store thread: the whole batch in one SQLite transaction.

        Puts are buffered and written with one ``executemany``, a loop in C: updating
        2,000 leases took 6.5 ms one ``execute`` each and 4.9 ms this way, time in
        which this thread holds the GIL the event loop needs. The buffer is written
        before anything reads or deletes, so every transaction still sees the writes
        of those before it.
        """
        db = self._db
        revision = self._revision
        results: list[TxnResult] = []
        puts: list[tuple[str, bytes, int, int]] = []

        def write_puts() -> None:
            db.executemany(_UPSERT, puts)
            puts.clear()

        db.execute("BEGIN IMMEDIATE")
        try:
            for txn in batch:
                if txn.compares:
                    write_puts()
                    if not all(self._mod_revision(c.key) == c.mod_revision for c in txn.compares):
                        results.append(TxnResult(succeeded=False, revision=revision))
                        continue
                deleted = 0
                if txn.deletes:
                    write_puts()
                    deleted = sum(db.execute(_DELETE, (key,)).rowcount for key in txn.deletes)
                if txn.puts or deleted:
                    revision += 1  # like etcd: only a transaction that changed something
                    puts.extend((key, value, revision, revision) for key, value in txn.puts.items())
                results.append(TxnResult(succeeded=True, revision=revision))
            write_puts()
            db.execute("UPDATE meta SET value = ? WHERE name = 'revision'", (revision,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return results, revision

    def _mod_revision(self, key: str) -> int:
        row = self._db.execute("SELECT mod_revision FROM kv WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

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
    return int(db.execute("SELECT value FROM meta WHERE name = 'revision'").fetchone()[0])


def _check_key(key: object) -> None:
    if not isinstance(key, str) or not key:
        raise ValueError(f"store keys must be non-empty strings, got {key!r}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"store key {key!r} is not valid Unicode text") from None


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


def _check(txn: Txn) -> None:
    """Refuse a malformed transaction before it joins a batch (it would fail them all)."""
    for key in [c.key for c in txn.compares] + list(txn.puts) + list(txn.deletes):
        _check_key(key)
    for key, value in txn.puts.items():
        if not isinstance(value, bytes):
            raise ValueError(f"value of {key!r} must be bytes, got {type(value).__name__}")
    both = set(txn.puts) & set(txn.deletes)
    if both:
        raise ValueError(f"a transaction may not both put and delete {sorted(both)}")


def _entry(row: tuple[str, bytes, int, int]) -> Entry:
    key, value, create_revision, mod_revision = row
    return Entry(key=key, value=value, create_revision=create_revision, mod_revision=mod_revision)
