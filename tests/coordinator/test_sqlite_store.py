"""What only the SQLite engine has: the file, its lock and schema, group commit,
durability through SIGKILL, and what "in process" means for its watch and leases. The
contract both engines share is test_store.py's; always on a real SQLite file."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import closing
from pathlib import Path

import pytest

from coordinator.store import (
    Compare,
    Entry,
    Event,
    LeaseNotFound,
    StoreError,
    Txn,
    TxnResult,
    WatchCompacted,
)
from coordinator.store.sqlite import SCHEMA_VERSION, SqliteStore

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "store.db")
    yield opened
    await opened.close()


def put(key: str, value: bytes = b"v", *, expect: int | None = None) -> Txn:
    """A put of one key, guarded by its mod revision when ``expect`` is given."""
    compares = () if expect is None else (Compare(key, expect),)
    return Txn(compares=compares, puts={key: value})


def raw(path: Path) -> closing[sqlite3.Connection]:
    """A plain SQLite connection to the store's file, in autocommit mode."""
    return closing(sqlite3.connect(path, isolation_level=None))


def snapshot(entries: Sequence[Entry]) -> dict[str, tuple[bytes, int, int]]:
    return {e.key: (e.value, e.create_revision, e.mod_revision) for e in entries}


# --- opening --------------------------------------------------------------------------


async def test_open_creates_an_empty_store_at_revision_zero(tmp_path: Path) -> None:
    path = tmp_path / "data" / "store.db"  # the parent does not exist yet

    opened = await SqliteStore.open(path)
    try:
        assert path.is_file()
        assert opened.revision == 0
        assert await opened.range("") == []
        assert await opened.get("/nodes/n1") is None
    finally:
        await opened.close()

    with raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- group commit ---------------------------------------------------------------------


async def test_one_turn_of_commits_is_one_sqlite_transaction(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    apply = store._apply

    def counting_apply(batch: Sequence[Txn]) -> tuple[list[tuple[TxnResult, list[Event]]], int]:
        batches.append(len(batch))
        return apply(batch)

    monkeypatch.setattr(store, "_apply", counting_apply)

    results = await asyncio.gather(*(store.commit(put(f"/k/{i:03}")) for i in range(200)))

    assert results == [TxnResult(succeeded=True, revision=i + 1) for i in range(200)]
    assert batches == [200]
    entries = await store.range("/k/")
    assert [e.mod_revision for e in entries] == list(range(1, 201))


# --- durability -----------------------------------------------------------------------


_CRASHING_WRITER = """
import asyncio, sys
from pathlib import Path
from coordinator.store import Txn
from coordinator.store.sqlite import SqliteStore

async def main():
    store = await SqliteStore.open(Path(sys.argv[1]))
    result = await store.commit(Txn(puts={"/crash": b"committed"}))
    print("committed", result.revision, flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


async def test_a_commit_survives_sigkill_right_after_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CRASHING_WRITER,
        str(path),
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), timeout=20)
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert line == b"committed 1\n"
    assert child.returncode == -signal.SIGKILL

    reopened = await SqliteStore.open(path)  # the dead writer's lock went with it
    try:
        assert reopened.revision == 1
        assert await reopened.get("/crash") == Entry("/crash", b"committed", 1, 1)
    finally:
        await reopened.close()


# --- the lock and the schema ----------------------------------------------------------


async def test_only_one_store_may_hold_a_file(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    first = await SqliteStore.open(path)
    try:
        with pytest.raises(StoreError, match=r"store\.db\.lock"):
            await SqliteStore.open(path)
    finally:
        await first.close()

    second = await SqliteStore.open(path)
    await second.close()


async def test_a_store_from_a_newer_allot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with raw(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")

    with pytest.raises(StoreError, match="newer"):
        await SqliteStore.open(path)
    with raw(path) as db:  # refused, and left as it was
        assert db.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


async def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"definitely not a database\n" * 100)

    with pytest.raises(StoreError, match="not an allot store"):
        await SqliteStore.open(path)


# --- failing batches ------------------------------------------------------------------


async def test_a_batch_that_fails_in_sqlite_fails_every_caller_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    store = await SqliteStore.open(path)
    try:
        await store.commit(put("/before"))
        with raw(path) as db:  # a real failure, in the middle of the batch
            db.execute(
                "CREATE TRIGGER refuse_boom BEFORE INSERT ON kv WHEN NEW.key = '/boom'"
                " BEGIN SELECT RAISE(ABORT, 'boom refused'); END"
            )
        before = await store.range("")

        outcomes = await asyncio.gather(
            store.commit(put("/a")),
            store.commit(put("/boom")),
            store.commit(Txn(puts={"/c": b"c"}, deletes=("/before",))),
            return_exceptions=True,
        )

        assert [type(o) for o in outcomes] == [StoreError] * 3
        assert all("boom refused" in str(o) for o in outcomes)
        assert store.revision == 1
        assert await store.range("") == before

        assert await store.commit(put("/after")) == TxnResult(succeeded=True, revision=2)
        assert [e.key for e in await store.range("")] == ["/after", "/before"]
    finally:
        await store.close()


# --- in process: the watch's history and the leases ------------------------------------


async def test_the_watch_keeps_a_bounded_history_and_nothing_from_before_the_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    first = await SqliteStore.open(path, watch_history=2)
    try:
        for key in ("/a", "/b", "/c"):
            await first.commit(put(key))
        with pytest.raises(WatchCompacted) as refused:
            await anext(first.watch("/", 1))
        assert refused.value.oldest == 2
        following = first.watch("/", 2)
        assert [e.key for e in await anext(following)] == ["/b"]
        await following.aclose()
    finally:
        await first.close()

    reopened = await SqliteStore.open(path)
    try:
        with pytest.raises(WatchCompacted) as refused:
            await anext(reopened.watch("/", 3))
        assert refused.value.oldest == 4
    finally:
        await reopened.close()


async def test_no_lease_outlives_the_process_that_granted_it(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    first = await SqliteStore.open(path)
    lease = await first.grant_lease(600)
    await first.commit(Txn(puts={"/leader": b"me", "/kept": b"k"}, lease=lease))
    await first.commit(put("/kept", b"detached"))  # put again without it: not leased
    await first.commit(put("/plain"))
    await first.close()

    second = await SqliteStore.open(path)
    try:
        assert [e.key for e in await second.range("")] == ["/kept", "/plain"]
        assert second.revision == 4  # the leader key's deletion took one
        with pytest.raises(LeaseNotFound):
            await second.keep_alive(lease)
    finally:
        await second.close()
    third = await SqliteStore.open(path)
    try:
        assert third.revision == 4
    finally:
        await third.close()


async def test_a_schema_1_file_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with raw(path) as db:
        db.executescript(
            "CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL,"
            " create_revision INTEGER NOT NULL, mod_revision INTEGER NOT NULL) WITHOUT ROWID;"
            "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
            "INSERT INTO meta VALUES ('revision', 7);"
            "INSERT INTO kv VALUES ('/old', x'6f6c64', 3, 7);"
            "PRAGMA user_version = 1;"
        )

    store = await SqliteStore.open(path)
    try:
        assert store.revision == 7
        assert await store.get("/old") == Entry("/old", b"old", 3, 7)
    finally:
        await store.close()
    with raw(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
