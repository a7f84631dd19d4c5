"""Commits with more writes than etcd's --max-txn-ops, made in fenced steps: the pages
(pure), and the steps, the journal and its finishing by a new leader on a real etcd
member started with etcd's default limit (128)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.etcd_cluster import EtcdCluster
from coordinator.election import LEADER_KEY
from coordinator.store import Compare, CompareCreated, Store, StoreError, Txn, TxnResult
from coordinator.store.delegating import DelegatingStore
from coordinator.store.etcd import EtcdStore
from coordinator.store.fenced import Deposed, FencedStore
from coordinator.store.steps import JOURNALS, decoded, encoded, split
from tests.conftest import SMALL_TXN_OPS
from tests.coordinator.store_engines import etcd_settings

# --- the pages (pure) -------------------------------------------------------------------

keys = st.text(alphabet="abcxyz/0", min_size=1, max_size=6).map(lambda k: "/" + k)


@given(
    puts=st.dictionaries(keys, st.binary(max_size=4), max_size=40),
    deletes=st.sets(keys, max_size=40),
    most=st.integers(min_value=1, max_value=12),
)
def test_pages_applied_in_order_write_what_the_transaction_writes(
    puts: dict[str, bytes], deletes: set[str], most: int
) -> None:
    deletes -= puts.keys()
    txn = Txn(puts=puts, deletes=tuple(deletes))
    before = dict.fromkeys(deletes | {"/kept"}, b"old")
    at_once = {k: v for k, v in before.items() if k not in deletes} | puts
    stepped = dict(before)
    pages = split(txn, most=most)
    for page in pages:
        assert len(page.puts) + len(page.deletes) <= most
        assert not page.compares
        stepped |= page.puts
        for key in page.deletes:
            stepped.pop(key, None)
    assert stepped == at_once
    order = [key for page in pages for key in [*page.deletes, *page.puts]]
    assert order == [*txn.deletes, *puts]  # the deletes first, each in the given order


def test_a_journal_gives_back_the_writes_and_an_empty_split_is_one_empty_page() -> None:
    txn = Txn(puts={"/a": b"\x00\xff", "/b": b""}, deletes=("/c",))
    assert decoded(encoded(txn)) == Txn(puts=txn.puts, deletes=txn.deletes)
    assert split(Txn(), most=5) == [Txn()]
    with pytest.raises(ValueError, match="at least one operation"):
        split(txn, most=0)


# --- the steps on a real etcd member (--max-txn-ops=128) --------------------------------


class Held(DelegatingStore):
    """The real store, whose commits after the first ``allowed`` wait until ``go`` is
    set: a leader frozen between two steps (a paused process), for a test to take over
    from it meanwhile."""

    def __init__(self, store: EtcdStore) -> None:
        super().__init__(store)
        self.allowed: int | None = None  # None: every commit goes through
        self.holding = asyncio.Event()
        self.go = asyncio.Event()

    async def commit(self, txn: Txn) -> TxnResult:
        if self.allowed is not None:
            if self.allowed == 0:
                self.holding.set()
                await self.go.wait()
            else:
                self.allowed -= 1
        return await super().commit(txn)

    async def close(self) -> None:
        """The store is the test's to close."""

    async def __aenter__(self) -> Held:
        return self

    async def __aexit__(self, *_: object) -> None:
        """Lets the held commit go, on a failure too: a frozen leader's shutdown would
        wait for it."""
        self.go.set()


@dataclass
class Leader:
    fenced: FencedStore
    lease: int
    won_at: int
    deposed: list[str]


async def elected(
    store: EtcdStore, under: Store | None = None, *, most: int | None = SMALL_TXN_OPS
) -> Leader:
    """``store``'s coordinator holding the leader key (for 30 s unless revoked), its
    commits fenced on it and sent through ``under`` (default: ``store`` itself)."""
    lease = await store.grant_lease(30)
    won = await store.commit(
        Txn(compares=(CompareCreated(LEADER_KEY, 0),), puts={LEADER_KEY: b"test"}, lease=lease)
    )
    assert won.succeeded, "another leader holds the key"
    deposed: list[str] = []
    fenced = FencedStore(
        under or store,
        LEADER_KEY,
        won.revision,
        witness=store,
        on_deposed=deposed.append,
        most_operations=most,
    )
    return Leader(fenced, lease, won.revision, deposed)


@pytest.fixture
async def stores(small_txn_etcd_cluster: EtcdCluster) -> AsyncIterator[list[EtcdStore]]:
    """Two coordinators' connections to one fresh prefix."""
    settings = etcd_settings(small_txn_etcd_cluster)
    opened = [await EtcdStore.open(settings) for _ in range(2)]
    yield opened
    for store in opened:
        await store.close()


def big(count: int, value: bytes = b"v") -> dict[str, bytes]:
    return {f"/k/{i:05}": value for i in range(count)}


async def stored(store: Store, prefix: str = "/k/") -> dict[str, bytes]:
    return {entry.key: entry.value for entry in await store.range(prefix)}


async def test_without_steps_etcd_refuses_a_commit_over_its_limit_and_writes_nothing(
    stores: list[EtcdStore],
) -> None:
    """The reproduction: what every commit over --max-txn-ops got before steps (a 503
    to the caller that asked for it)."""
    leader = await elected(stores[0], most=None)
    with pytest.raises(StoreError, match="--max-txn-ops"):
        await leader.fenced.commit(Txn(puts=big(SMALL_TXN_OPS)))
    assert await stored(stores[0]) == {}


async def test_a_commit_over_the_limit_is_made_in_steps_and_reports_each_keys_revision(
    stores: list[EtcdStore],
) -> None:
    store = stores[0]
    await store.commit(Txn(puts={"/k/old-1": b"x", "/k/old-2": b"x", "/guard": b"g"}))
    guard = await store.get("/guard")
    assert guard is not None
    leader = await elected(store)
    puts = big(3 * SMALL_TXN_OPS)
    txn = Txn(
        compares=(Compare("/guard", guard.mod_revision),),
        puts=puts,
        deletes=("/k/old-1", "/k/old-2"),
    )
    result = await leader.fenced.commit(txn)
    assert result.succeeded
    assert await stored(store) == puts
    assert await store.range(JOURNALS) == []
    entries = {entry.key: entry for entry in await store.range("/k/")}
    assert result.revisions == {key: entries[key].mod_revision for key in puts}
    assert len(set(result.revisions.values())) == 4  # 384 puts in pages of at most 126
    assert result.revision == store.revision  # the last step deleted the journal
    assert leader.deposed == []


async def test_a_commit_in_steps_whose_compare_fails_writes_nothing(
    stores: list[EtcdStore],
) -> None:
    store = stores[0]
    leader = await elected(store)
    before = await store.range("")
    txn = Txn(compares=(Compare("/guard", 12345),), puts=big(2 * SMALL_TXN_OPS))
    result = await leader.fenced.commit(txn)
    assert not result.succeeded
    after = await store.range("")
    assert after == before
    assert leader.deposed == []


async def test_a_leader_frozen_between_steps_is_finished_by_the_next_and_fenced_off(
    stores: list[EtcdStore],
) -> None:
    """The old leader commits its journal and one page, then stops (frozen, its lease
    revoked: it died). The new leader finishes the commit before serving: every write is
    there, the journal gone. When the old one wakes, its next step is refused by the
    fence, it is deposed, and nothing changes."""
    old_store, new_store = stores
    held = Held(old_store)
    old = await elected(old_store, held)
    await old.fenced.commit(Txn(puts={"/k/gone": b"x"}))
    puts = big(3 * SMALL_TXN_OPS, b"new")
    held.allowed = 2  # the journal and the first page
    stepping = asyncio.create_task(old.fenced.commit(Txn(puts=puts, deletes=("/k/gone",))))
    await held.holding.wait()
    part_made = await stored(new_store)
    assert "/k/gone" not in part_made  # the first page: the delete, then some puts
    assert 0 < len(part_made) < len(puts)
    assert len(await new_store.range(JOURNALS)) == 1
    await old_store.revoke_lease(old.lease)

    new = await elected(new_store)
    finished_at = await new.fenced.finish_journals()
    assert await stored(new_store) == puts
    assert await new_store.range(JOURNALS) == []
    assert finished_at == new_store.revision

    after = await new_store.range("")
    held.go.set()
    with pytest.raises(Deposed):
        await stepping
    assert len(old.deposed) == 1
    assert await new_store.range("") == after
    with pytest.raises(Deposed):
        await old.fenced.commit(Txn(puts={"/k/late": b"x"}))
    assert await new_store.range("") == after
