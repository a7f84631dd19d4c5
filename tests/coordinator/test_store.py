"""The store interface's conformance suite: every test here runs on both engines (the
``engine`` fixture: a real SQLite file, and a prefix of its own on a real 3-member etcd
cluster). What only one engine has is tested in test_sqlite_store.py and
test_etcd_store.py.

On etcd the revision is the cluster's, so tests count from the revision the store had
when they began (``base``); nothing else writes to their cluster (``quiet_etcd_cluster``,
not the session's shared one), so each changing transaction still moves it by exactly
one there too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Any, cast

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from coordinator.store import (
    ClusterStore,
    Compare,
    CompareCreated,
    Entry,
    Event,
    LeaseNotFound,
    Txn,
    TxnResult,
    WatchCompacted,
)
from tests.coordinator.store_engines import Engine

# etcd's least lease TTL with its default election timeout (a shorter one is raised).
TTL = 2


def put(key: str, value: bytes = b"v", *, expect: int | None = None) -> Txn:
    """A put of one key, guarded by its mod revision when ``expect`` is given."""
    compares = () if expect is None else (Compare(key, expect),)
    return Txn(compares=compares, puts={key: value})


def snapshot(entries: Sequence[Entry], base: int = 0) -> dict[str, tuple[bytes, int, int]]:
    """Entries as key -> (value, create, mod), revisions counted from ``base``."""
    return {e.key: (e.value, e.create_revision - base, e.mod_revision - base) for e in entries}


# --- revisions ------------------------------------------------------------------------


async def test_revisions_follow_etcd(store: ClusterStore) -> None:
    base = store.revision
    first = await store.commit(put("/k", b"1"))
    assert first == TxnResult(succeeded=True, revision=base + 1)
    assert await store.get("/k") == Entry("/k", b"1", base + 1, base + 1)

    assert (await store.commit(put("/k", b"2"))).revision == base + 2
    assert await store.get("/k") == Entry("/k", b"2", base + 1, base + 2)

    assert (await store.commit(put("/other"))).revision == base + 3
    assert (await store.get("/k")) == Entry("/k", b"2", base + 1, base + 2)

    deleted = await store.commit(Txn(deletes=("/k",)))
    assert deleted == TxnResult(succeeded=True, revision=base + 4)
    assert await store.get("/k") is None

    assert (await store.commit(put("/k", b"3"))).revision == base + 5
    assert await store.get("/k") == Entry("/k", b"3", base + 5, base + 5)
    assert store.revision == base + 5


async def test_one_revision_per_transaction_however_many_keys(store: ClusterStore) -> None:
    base = store.revision
    result = await store.commit(Txn(puts={"/a": b"1", "/b": b"2", "/c": b"3"}))

    assert result == TxnResult(succeeded=True, revision=base + 1)
    assert {e.mod_revision for e in await store.range("")} == {base + 1}


async def test_failed_and_compare_only_transactions_keep_the_revision(store: ClusterStore) -> None:
    written = (await store.commit(put("/k"))).revision

    compare_only = await store.commit(Txn(compares=(Compare("/k", written),)))
    failed = await store.commit(put("/k", b"late", expect=0))

    assert compare_only == TxnResult(succeeded=True, revision=written)
    assert failed == TxnResult(succeeded=False, revision=written)
    assert store.revision == written
    assert await store.get("/k") == Entry("/k", b"v", written, written)


async def test_deleting_a_missing_key_changes_nothing_and_keeps_the_revision(
    store: ClusterStore,
) -> None:
    written = (await store.commit(put("/k"))).revision

    result = await store.commit(Txn(deletes=("/absent",)))

    assert result == TxnResult(succeeded=True, revision=written)
    assert store.revision == written


# --- compare-and-swap -----------------------------------------------------------------


async def test_compare_with_zero_means_the_key_must_not_exist(store: ClusterStore) -> None:
    created = await store.commit(put("/k", b"first", expect=0))
    again = await store.commit(put("/k", b"second", expect=0))

    assert created.succeeded
    assert not again.succeeded
    assert (await store.get("/k")) == Entry("/k", b"first", created.revision, created.revision)


async def test_a_stale_mod_revision_loses_the_race(store: ClusterStore) -> None:
    await store.commit(put("/k", b"seen"))
    seen = await store.get("/k")
    assert seen is not None
    latest = (await store.commit(put("/k", b"someone else"))).revision
    before = snapshot(await store.range(""))

    stale = await store.commit(put("/k", b"mine", expect=seen.mod_revision))

    assert stale == TxnResult(succeeded=False, revision=latest)
    assert store.revision == latest
    assert snapshot(await store.range("")) == before


async def test_a_multi_key_transaction_is_all_or_nothing(store: ClusterStore) -> None:
    base = (await store.commit(Txn(puts={"/x": b"x0", "/y": b"y0"}))).revision - 1
    before = snapshot(await store.range(""))
    puts = {"/x": b"x1", "/y": b"y1", "/z": b"z1"}

    one_wrong = Txn(
        compares=(Compare("/x", base + 1), Compare("/y", 0)), puts=puts, deletes=("/w",)
    )
    assert not (await store.commit(one_wrong)).succeeded
    assert snapshot(await store.range("")) == before

    right = (Compare("/x", base + 1), Compare("/y", base + 1), Compare("/z", 0))
    assert await store.commit(Txn(compares=right, puts=puts)) == TxnResult(True, base + 2)
    assert snapshot(await store.range(""), base) == {
        "/x": (b"x1", 1, 2),
        "/y": (b"y1", 1, 2),
        "/z": (b"z1", 2, 2),
    }


async def test_of_two_racing_creates_exactly_one_wins(store: ClusterStore) -> None:
    """Concurrent commits each see the ones applied before them, on either engine."""
    first, second = await asyncio.gather(
        store.commit(put("/k", b"first", expect=0)),
        store.commit(put("/k", b"second", expect=0)),
    )

    assert sorted([first.succeeded, second.succeeded]) == [False, True]
    winner = b"first" if first.succeeded else b"second"
    stored = await store.get("/k")
    assert stored is not None
    assert stored.value == winner


async def test_concurrent_commits_each_get_their_own_revision(store: ClusterStore) -> None:
    base = store.revision

    results = await asyncio.gather(*(store.commit(put(f"/k/{i:03}")) for i in range(50)))

    assert all(r.succeeded for r in results)
    assert sorted(r.revision for r in results) == list(range(base + 1, base + 51))
    entries = await store.range("/k/")
    assert [e.mod_revision for e in entries] == [r.revision for r in results]


# --- create revisions: fencing on a key's incarnation ---------------------------------


async def test_compare_created_tells_one_incarnation_of_a_key_from_the_next(
    store: ClusterStore,
) -> None:
    created = (await store.commit(put("/leader", b"a"))).revision
    fenced = Txn(compares=(CompareCreated("/leader", created),), puts={"/work": b"1"})
    assert (await store.commit(fenced)).succeeded
    assert (await store.commit(put("/leader", b"a, still"))).succeeded  # same incarnation
    assert (await store.commit(fenced)).succeeded

    await store.commit(Txn(deletes=("/leader",)))
    assert not (await store.commit(fenced)).succeeded  # absent: create revision 0
    await store.commit(put("/leader", b"a"))  # same value, a new incarnation

    refused = await store.commit(Txn(compares=fenced.compares, puts={"/work": b"stale"}))
    assert not refused.succeeded
    assert (await store.get("/work")) is not None
    assert (await store.get("/work")).value == b"1"  # type: ignore[union-attr]
    absent = Txn(compares=(CompareCreated("/nobody", 0),), puts={"/nobody": b"x"})
    assert (await store.commit(absent)).succeeded


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
    store: ClusterStore, prefix: str
) -> None:
    await store.commit(Txn(puts={key: key.encode() for key in RANGE_KEYS}))

    entries = await store.range(prefix)

    assert [e.key for e in entries] == sorted(k for k in RANGE_KEYS if k.startswith(prefix))
    assert all(e.value == e.key.encode() for e in entries)


async def test_a_snapshot_is_a_range_with_the_revision_it_was_read_at(store: ClusterStore) -> None:
    written = (await store.commit(Txn(puts={"/a/1": b"1", "/a/2": b"2", "/b": b"3"}))).revision

    taken = await store.snapshot("/a/")

    assert [e.key for e in taken.entries] == ["/a/1", "/a/2"]
    assert taken.revision == written


@pytest.mark.parametrize("prefix", ["a", "nodes/"])
async def test_a_prefix_is_empty_or_starts_with_a_slash(store: ClusterStore, prefix: str) -> None:
    with pytest.raises(ValueError, match="starting with '/'"):
        await store.range(prefix)


# --- durability -----------------------------------------------------------------------


async def test_values_and_revisions_survive_a_reopen(engine: Engine) -> None:
    first = await engine.open()
    await first.commit(put("/a", b"1"))
    await first.commit(put("/b", b"2"))
    last = (await first.commit(Txn(deletes=("/a",)))).revision
    before = await first.range("")
    await first.close()

    second = await engine.open()
    try:
        assert second.revision == last
        assert await second.range("") == before
        assert (await second.commit(put("/c"))).revision == last + 1
    finally:
        await second.close()


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(Txn(puts={"": b"x"}), id="empty-key-put"),
        pytest.param(Txn(puts={"k": b"x"}), id="key-without-slash"),
        pytest.param(Txn(compares=(Compare("", 0),)), id="empty-key-compare"),
        pytest.param(Txn(compares=(CompareCreated("", 0),)), id="empty-key-compare-created"),
        pytest.param(Txn(deletes=("",)), id="empty-key-delete"),
        pytest.param(Txn(puts=cast(Any, {b"/k": b"x"})), id="bytes-key"),
        pytest.param(Txn(deletes=cast(Any, (7,))), id="int-key"),
        pytest.param(Txn(puts=cast(Any, {"/k": "text"})), id="str-value"),
        pytest.param(Txn(puts={"/k": b"x"}, deletes=("/k",)), id="put-and-delete"),
        pytest.param(Txn(puts={"/\ud800": b"x"}), id="lone-surrogate-key"),
        pytest.param(Txn(puts={"/k": b"x"}, lease=-1), id="negative-lease"),
    ],
)
async def test_a_malformed_transaction_is_refused_alone(store: ClusterStore, bad: Txn) -> None:
    """Refused before it reaches the engine, so a good transaction beside it commits."""
    base = store.revision
    good, refused = await asyncio.gather(
        store.commit(put("/good")), store.commit(bad), return_exceptions=True
    )

    assert isinstance(refused, ValueError)
    assert good == TxnResult(succeeded=True, revision=base + 1)
    assert [e.key for e in await store.range("")] == ["/good"]
    assert store.revision == base + 1


# --- leases ---------------------------------------------------------------------------


async def test_a_key_put_with_a_lease_vanishes_when_the_lease_expires(store: ClusterStore) -> None:
    lease = await store.grant_lease(TTL)
    await store.commit(Txn(puts={"/leader": b"me", "/leader/address": b"x"}, lease=lease))
    await store.commit(put("/plain"))
    following = store.watch("/", store.revision + 1)

    deletion = await asyncio.wait_for(anext(following), timeout=TTL + 5)

    assert [(e.key, e.deleted) for e in deletion] == [("/leader", True), ("/leader/address", True)]
    assert [e.key for e in await store.range("")] == ["/plain"]
    with pytest.raises(LeaseNotFound):
        await store.keep_alive(lease)
    with pytest.raises(LeaseNotFound):
        await store.commit(Txn(puts={"/leader": b"late"}, lease=lease))
    assert await store.get("/leader") is None
    await following.aclose()


async def test_keep_alive_holds_a_lease_past_its_ttl(store: ClusterStore) -> None:
    lease = await store.grant_lease(TTL)
    await store.commit(Txn(puts={"/leader": b"me"}, lease=lease))

    for _ in range(4):  # 2 s in all: past the TTL without the keep-alives
        await asyncio.sleep(TTL / 4)
        assert await store.keep_alive(lease) >= TTL

    assert await store.get("/leader") is not None
    await store.revoke_lease(lease)


async def test_revoking_a_lease_deletes_its_keys_in_one_transaction(store: ClusterStore) -> None:
    lease = await store.grant_lease(30)
    await store.commit(Txn(puts={"/a": b"1", "/b": b"2"}, lease=lease))
    await store.commit(put("/c"))
    base = store.revision

    await store.revoke_lease(lease)
    await store.revoke_lease(lease)  # already gone: no error

    assert [e.key for e in await store.range("")] == ["/c"]
    assert (await store.commit(put("/d"))).revision == base + 2  # the revoke took one
    with pytest.raises(LeaseNotFound):
        await store.keep_alive(lease)


async def test_a_key_put_again_without_its_lease_outlives_it(store: ClusterStore) -> None:
    lease = await store.grant_lease(30)
    await store.commit(Txn(puts={"/kept": b"1", "/gone": b"2"}, lease=lease))
    await store.commit(put("/kept", b"mine now"))

    await store.revoke_lease(lease)

    assert [(e.key, e.value) for e in await store.range("")] == [("/kept", b"mine now")]


async def test_an_unknown_lease_is_refused_and_nothing_is_written(store: ClusterStore) -> None:
    base = store.revision
    with pytest.raises(LeaseNotFound):
        await store.commit(Txn(puts={"/k": b"x"}, lease=0x7FFF_0000_1234))
    with pytest.raises(LeaseNotFound):
        await store.keep_alive(0x7FFF_0000_1234)
    with pytest.raises(ValueError, match="TTL"):
        await store.grant_lease(0)
    assert await store.range("") == []
    assert store.revision == base


# --- watch ----------------------------------------------------------------------------


async def next_changes(
    following: AsyncGenerator[list[Event], None], count: int
) -> list[list[Event]]:
    return [await asyncio.wait_for(anext(following), timeout=5) for _ in range(count)]


async def test_a_watch_replays_from_its_revision_then_follows(store: ClusterStore) -> None:
    first = (await store.commit(Txn(puts={"/n/b": b"1", "/n/a": b"2", "/other": b"x"}))).revision
    second = (await store.commit(Txn(deletes=("/n/a", "/n/missing")))).revision
    following = store.watch("/n/", first)

    replayed = await next_changes(following, 2)
    live = store.commit(Txn(puts={"/n/c": b"3"}))
    third = (await live).revision
    (followed,) = await next_changes(following, 1)

    assert replayed == [
        [Event("/n/a", b"2", first), Event("/n/b", b"1", first)],
        [Event("/n/a", b"", second, deleted=True)],
    ]
    assert followed == [Event("/n/c", b"3", third)]
    await following.aclose()


async def test_a_watch_sees_only_its_prefix_and_skips_what_changed_nothing(
    store: ClusterStore,
) -> None:
    following = store.watch("/mine/", store.revision + 1)
    await store.commit(put("/theirs"))
    await store.commit(Txn(deletes=("/mine/absent",)))  # changes nothing: no event
    await store.commit(Txn(compares=(Compare("/mine/x", 99),), puts={"/mine/x": b"no"}))
    mine = (await store.commit(put("/mine/x", b"yes"))).revision

    (changes,) = await next_changes(following, 1)

    assert changes == [Event("/mine/x", b"yes", mine)]
    await following.aclose()


async def test_a_snapshot_and_a_watch_from_its_next_revision_miss_nothing(
    store: ClusterStore,
) -> None:
    """How a follower starts: read, then watch from the revision read + 1."""
    await store.commit(put("/s/1"))
    taken = await store.snapshot("/s/")
    later = (await store.commit(put("/s/2"))).revision
    following = store.watch("/s/", taken.revision + 1)

    (changes,) = await next_changes(following, 1)

    assert [e.key for e in taken.entries] == ["/s/1"]
    assert changes == [Event("/s/2", b"v", later)]
    await following.aclose()


async def test_a_watch_from_revision_zero_is_refused(store: ClusterStore) -> None:
    with pytest.raises(ValueError, match="revision 1"):
        await anext(store.watch("/", 0))


async def test_a_watch_from_before_the_kept_history_is_compacted(store: ClusterStore) -> None:
    first = (await store.commit(put("/h", b"1"))).revision
    for value in (b"2", b"3", b"4"):
        kept = (await store.commit(put("/h", value))).revision
    await store.compact(kept)

    with pytest.raises(WatchCompacted) as refused:
        await anext(store.watch("/", first))

    assert refused.value.oldest == kept
    following = store.watch("/", kept)  # from what is kept, it works
    latest = (await store.commit(put("/h", b"5"))).revision
    assert await next_changes(following, 2) == [
        [Event("/h", b"4", kept)],
        [Event("/h", b"5", latest)],
    ]
    await following.aclose()


# --- a model-based test ---------------------------------------------------------------

MODEL_KEYS = ("/a", "/a/x", "/ab", "/b", "/\u00e9", "/a\u00ff")
RANGE_PREFIXES = ("", "/", "/a", "/a/", "/b", "/\u00e9", "/c")


class Model:
    """The store's contract in a few lines: key -> (value, create, mod) and a revision
    that counts from the store's when the model began."""

    def __init__(self, base: int) -> None:
        self.entries: dict[str, tuple[bytes, int, int]] = {}
        self.revision = base

    def mod_revision(self, key: str) -> int:
        entry = self.entries.get(key)
        return entry[2] if entry else 0

    def commit(self, txn: Txn) -> TxnResult:
        compares = [c for c in txn.compares if isinstance(c, Compare)]
        if any(self.mod_revision(c.key) != c.mod_revision for c in compares):
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
    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = engine
        self.runner = asyncio.Runner()
        self.store = self.runner.run(engine.open())
        self.model = Model(self.store.revision)

    @rule(data=st.data())
    def commit_one(self, data: st.DataObject) -> None:
        txn = data.draw(transactions(self.model))
        assert self.runner.run(self.store.commit(txn)) == self.model.commit(txn)

    @rule(data=st.data(), size=st.integers(2, 4))
    def commit_in_order(self, data: st.DataObject, size: int) -> None:
        """Transactions apply in order, each after the ones before it (on SQLite these
        are one group commit)."""
        txns = [data.draw(transactions(self.model)) for _ in range(size)]

        async def in_order() -> list[TxnResult]:
            if self.engine.name == "sqlite":
                return list(await asyncio.gather(*(self.store.commit(t) for t in txns)))
            return [await self.store.commit(t) for t in txns]

        assert self.runner.run(in_order()) == [self.model.commit(t) for t in txns]

    @rule(prefix=st.sampled_from(RANGE_PREFIXES))
    def range_agrees(self, prefix: str) -> None:
        got = snapshot(self.runner.run(self.store.range(prefix)))
        assert got == {k: v for k, v in self.model.entries.items() if k.startswith(prefix)}

    @precondition(lambda self: self.model.entries)
    @rule()
    def reopen(self) -> None:
        self.runner.run(self.store.close())
        self.store = self.runner.run(self.engine.open())

    @invariant()
    def everything_agrees(self) -> None:
        entries = self.runner.run(self.store.range(""))
        assert [e.key for e in entries] == sorted(self.model.entries)
        assert snapshot(entries) == self.model.entries
        assert self.store.revision == self.model.revision

    def teardown(self) -> None:
        self.runner.run(self.store.close())
        self.runner.close()


def test_store_matches_the_model(engine: Engine) -> None:
    class OnItsOwnData(StoreMatchesModel):
        def __init__(self) -> None:
            super().__init__(engine.fresh())

    run_state_machine_as_test(
        OnItsOwnData,
        settings=settings(max_examples=25, stateful_step_count=15, deadline=None),
    )
