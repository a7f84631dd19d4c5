"""SqliteStore against its contract: etcd v3 revisions, compare-and-swap, group commit,
durability, the lock file and the schema check, always on a real SQLite file."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from coordinator.store import Compare, Entry, StoreError, Txn, TxnResult
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


# --- revisions ------------------------------------------------------------------------


async def test_revisions_follow_etcd(store: SqliteStore) -> None:
    first = await store.commit(put("/k", b"1"))
    assert first == TxnResult(succeeded=True, revision=1)
    assert await store.get("/k") == Entry("/k", b"1", create_revision=1, mod_revision=1)

    assert (await store.commit(put("/k", b"2"))).revision == 2
    assert await store.get("/k") == Entry("/k", b"2", create_revision=1, mod_revision=2)

    assert (await store.commit(put("/other"))).revision == 3
    assert (await store.get("/k")) == Entry("/k", b"2", create_revision=1, mod_revision=2)

    assert await store.commit(Txn(deletes=("/k",))) == TxnResult(succeeded=True, revision=4)
    assert await store.get("/k") is None

    assert (await store.commit(put("/k", b"3"))).revision == 5
    assert await store.get("/k") == Entry("/k", b"3", create_revision=5, mod_revision=5)
    assert store.revision == 5


async def test_one_revision_per_transaction_however_many_keys(store: SqliteStore) -> None:
    result = await store.commit(Txn(puts={"/a": b"1", "/b": b"2", "/c": b"3"}))

    assert result == TxnResult(succeeded=True, revision=1)
    assert {e.mod_revision for e in await store.range("")} == {1}


async def test_failed_and_compare_only_transactions_keep_the_revision(
    store: SqliteStore,
) -> None:
    await store.commit(put("/k"))

    compare_only = await store.commit(Txn(compares=(Compare("/k", 1),)))
    failed = await store.commit(put("/k", b"late", expect=0))

    assert compare_only == TxnResult(succeeded=True, revision=1)
    assert failed == TxnResult(succeeded=False, revision=1)
    assert store.revision == 1
    assert await store.get("/k") == Entry("/k", b"v", create_revision=1, mod_revision=1)


async def test_deleting_a_missing_key_changes_nothing_and_keeps_the_revision(
    store: SqliteStore,
) -> None:
    await store.commit(put("/k"))

    result = await store.commit(Txn(deletes=("/absent",)))

    assert result == TxnResult(succeeded=True, revision=1)
    assert store.revision == 1


# --- compare-and-swap -----------------------------------------------------------------


async def test_compare_with_zero_means_the_key_must_not_exist(store: SqliteStore) -> None:
    created = await store.commit(put("/k", b"first", expect=0))
    again = await store.commit(put("/k", b"second", expect=0))

    assert created.succeeded
    assert not again.succeeded
    assert (await store.get("/k")) == Entry("/k", b"first", 1, 1)


async def test_a_stale_mod_revision_loses_the_race(store: SqliteStore) -> None:
    await store.commit(put("/k", b"seen"))
    seen = await store.get("/k")
    assert seen is not None
    await store.commit(put("/k", b"someone else"))
    before = snapshot(await store.range(""))

    stale = await store.commit(put("/k", b"mine", expect=seen.mod_revision))

    assert stale == TxnResult(succeeded=False, revision=2)
    assert store.revision == 2
    assert snapshot(await store.range("")) == before


async def test_a_multi_key_transaction_is_all_or_nothing(store: SqliteStore) -> None:
    await store.commit(Txn(puts={"/x": b"x0", "/y": b"y0"}))
    before = snapshot(await store.range(""))
    puts = {"/x": b"x1", "/y": b"y1", "/z": b"z1"}

    one_wrong = Txn(compares=(Compare("/x", 1), Compare("/y", 0)), puts=puts, deletes=("/w",))
    assert not (await store.commit(one_wrong)).succeeded
    assert snapshot(await store.range("")) == before

    all_right = Txn(compares=(Compare("/x", 1), Compare("/y", 1), Compare("/z", 0)), puts=puts)
    assert await store.commit(all_right) == TxnResult(succeeded=True, revision=2)
    assert snapshot(await store.range("")) == {
        "/x": (b"x1", 1, 2),
        "/y": (b"y1", 1, 2),
        "/z": (b"z1", 2, 2),
    }


# --- range ----------------------------------------------------------------------------

RANGE_KEYS = (
    "/",
    "/`",  # the character before "a"
    "/a",
    "/a/x",
    "/a0",
    "/a\u00ff",
    "/a\u00ff/y",
    "/a\u0100",  # the character after "\u00ff"
    "/a\ud7ff",  # the last code point before the surrogates
    "/a\ud7ff/z",
    "/a\ue000",  # the first code point after them
    "/a\U0001f600",
    "/a\U0010ffff",  # the largest code point
    "/a\U0010ffff/z",
    "/b",  # "a" incremented
    "/b/y",
    "/\u00e9t\u00e9",
)


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("", id="everything"),
        pytest.param("/", id="root"),
        pytest.param("/a", id="stops-before-b"),
        pytest.param("/a/", id="slash"),
        pytest.param("/a\u00ff", id="latin1-last-char"),
        pytest.param("/a\U0001f600", id="astral"),
        pytest.param("/\u00e9", id="accented"),
        pytest.param("/b", id="b"),
        pytest.param("/c", id="nothing"),
        pytest.param("/a\ud7ff", id="last-char-before-surrogates"),
        pytest.param("/a\U0010ffff", id="last-char-is-max-code-point"),
    ],
)
async def test_range_returns_exactly_the_prefix_in_key_order(
    store: SqliteStore, prefix: str
) -> None:
    await store.commit(Txn(puts={key: key.encode() for key in RANGE_KEYS}))

    entries = await store.range(prefix)

    assert [e.key for e in entries] == sorted(k for k in RANGE_KEYS if k.startswith(prefix))
    assert all(e.value == e.key.encode() for e in entries)


# --- group commit ---------------------------------------------------------------------


async def test_one_turn_of_commits_is_one_sqlite_transaction(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    apply = store._apply

    def counting_apply(batch: Sequence[Txn]) -> tuple[list[TxnResult], int]:
        batches.append(len(batch))
        return apply(batch)

    monkeypatch.setattr(store, "_apply", counting_apply)

    results = await asyncio.gather(*(store.commit(put(f"/k/{i:03}")) for i in range(200)))

    assert results == [TxnResult(succeeded=True, revision=i + 1) for i in range(200)]
    assert batches == [200]
    entries = await store.range("/k/")
    assert [e.mod_revision for e in entries] == list(range(1, 201))


async def test_a_later_transaction_in_a_batch_sees_the_earlier_ones(
    store: SqliteStore,
) -> None:
    first, second = await asyncio.gather(
        store.commit(put("/k", b"first", expect=0)),
        store.commit(put("/k", b"second", expect=0)),
    )

    assert first == TxnResult(succeeded=True, revision=1)
    assert second == TxnResult(succeeded=False, revision=1)
    assert await store.get("/k") == Entry("/k", b"first", 1, 1)


# --- durability -----------------------------------------------------------------------


async def test_values_and_revision_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    first = await SqliteStore.open(path)
    await first.commit(put("/a", b"1"))
    await first.commit(put("/b", b"2"))
    await first.commit(Txn(deletes=("/a",)))
    before = await first.range("")
    await first.close()

    second = await SqliteStore.open(path)
    try:
        assert second.revision == 3
        assert await second.range("") == before
        assert (await second.commit(put("/c"))).revision == 4
    finally:
        await second.close()


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


# --- bad input and failing batches ----------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(Txn(puts={"": b"x"}), id="empty-key-put"),
        pytest.param(Txn(compares=(Compare("", 0),)), id="empty-key-compare"),
        pytest.param(Txn(deletes=("",)), id="empty-key-delete"),
        pytest.param(Txn(puts=cast(Any, {b"/k": b"x"})), id="bytes-key"),
        pytest.param(Txn(deletes=cast(Any, (7,))), id="int-key"),
        pytest.param(Txn(puts=cast(Any, {"/k": "text"})), id="str-value"),
        pytest.param(Txn(puts={"/k": b"x"}, deletes=("/k",)), id="put-and-delete"),
        pytest.param(Txn(puts={"/\ud800": b"x"}), id="lone-surrogate-key"),
    ],
)
async def test_a_malformed_transaction_is_refused_alone(store: SqliteStore, bad: Txn) -> None:
    """Refused before it joins a batch, so a good transaction of the same turn commits."""
    good, refused = await asyncio.gather(
        store.commit(put("/good")), store.commit(bad), return_exceptions=True
    )

    assert isinstance(refused, ValueError)
    assert good == TxnResult(succeeded=True, revision=1)
    assert [e.key for e in await store.range("")] == ["/good"]
    assert store.revision == 1


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


# --- a model-based test ---------------------------------------------------------------

MODEL_KEYS = ("/a", "/a/x", "/ab", "/b", "/\u00e9", "/a\u00ff")
RANGE_PREFIXES = ("", "/", "/a", "/a/", "/b", "/\u00e9", "/c")


class Model:
    """The store's contract in a few lines: key -> (value, create, mod) and a revision."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[bytes, int, int]] = {}
        self.revision = 0

    def mod_revision(self, key: str) -> int:
        entry = self.entries.get(key)
        return entry[2] if entry else 0

    def commit(self, txn: Txn) -> TxnResult:
        if any(self.mod_revision(c.key) != c.mod_revision for c in txn.compares):
            return TxnResult(succeeded=False, revision=self.revision)
        # As in etcd, only a transaction that changes something takes a new revision.
        if txn.puts or any(key in self.entries for key in txn.deletes):
            self.revision += 1
        for key, value in txn.puts.items():
            old = self.entries.get(key)
            created = old[1] if old else self.revision
            self.entries[key] = (value, created, self.revision)
        for key in txn.deletes:
            self.entries.pop(key, None)
        return TxnResult(succeeded=True, revision=self.revision)


@st.composite
def transactions(draw: st.DrawFn, model: Model) -> Txn:
    """Mostly plausible compares (the current revision, 0 or one off), puts, deletes."""
    compares = []
    for key in draw(st.lists(st.sampled_from(MODEL_KEYS), max_size=2, unique=True)):
        current = model.mod_revision(key)
        expected = draw(st.sampled_from((current, current, 0, current + 1, max(current - 1, 0))))
        compares.append(Compare(key, expected))
    puts = draw(st.dictionaries(st.sampled_from(MODEL_KEYS), st.binary(max_size=3), max_size=3))
    free = [key for key in MODEL_KEYS if key not in puts]
    deletes = draw(st.lists(st.sampled_from(free), max_size=2, unique=True)) if free else []
    return Txn(compares=tuple(compares), puts=puts, deletes=tuple(deletes))


class StoreMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.path = Path(self.directory.name) / "store.db"
        self.runner = asyncio.Runner()
        self.store = self.runner.run(SqliteStore.open(self.path))
        self.model = Model()

    @rule(data=st.data())
    def commit_one(self, data: st.DataObject) -> None:
        txn = data.draw(transactions(self.model))
        assert self.runner.run(self.store.commit(txn)) == self.model.commit(txn)

    @rule(data=st.data(), size=st.integers(2, 4))
    def commit_a_batch(self, data: st.DataObject, size: int) -> None:
        """Transactions of one turn apply in order, each after the ones before it."""
        txns = [data.draw(transactions(self.model)) for _ in range(size)]

        async def together() -> list[TxnResult]:
            return list(await asyncio.gather(*(self.store.commit(t) for t in txns)))

        assert self.runner.run(together()) == [self.model.commit(t) for t in txns]

    @rule(prefix=st.sampled_from(RANGE_PREFIXES))
    def range_agrees(self, prefix: str) -> None:
        got = snapshot(self.runner.run(self.store.range(prefix)))
        assert got == {k: v for k, v in self.model.entries.items() if k.startswith(prefix)}

    @precondition(lambda self: self.model.revision > 0)
    @rule()
    def reopen(self) -> None:
        self.runner.run(self.store.close())
        self.store = self.runner.run(SqliteStore.open(self.path))

    @invariant()
    def everything_agrees(self) -> None:
        entries = self.runner.run(self.store.range(""))
        assert [e.key for e in entries] == sorted(self.model.entries)
        assert snapshot(entries) == self.model.entries
        assert self.store.revision == self.model.revision

    def teardown(self) -> None:
        self.runner.run(self.store.close())
        self.runner.close()
        self.directory.cleanup()


StoreMatchesModel.TestCase.settings = settings(
    max_examples=25, stateful_step_count=15, deadline=None
)
test_store_matches_the_model = StoreMatchesModel.TestCase
