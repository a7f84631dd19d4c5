"""A fenced commit whose outcome is unknown is settled on the real etcd cluster: applied
exactly once, answered with the revision it applied at, and its markers cleaned up.

An etcd member that dies mid-commit is hard to time, so ``LosingStore`` stands between
the fence and the real store and loses answers as planned: ``AFTER`` commits and then
raises ``OutcomeUnknown`` (the member applied it and died before answering), ``BEFORE``
raises it without committing (it died before the commit reached raft)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from bench.etcd_cluster import EtcdCluster
from coordinator.election import LEADER_KEY
from coordinator.store import Compare, OutcomeUnknown, Txn, TxnResult
from coordinator.store.delegating import DelegatingStore
from coordinator.store.etcd import EtcdStore
from coordinator.store.fenced import MARKERS, SETTLE_SECONDS, FencedStore
from tests.coordinator.store_engines import etcd_settings

AFTER, BEFORE, ANSWERED = "applied, answer lost", "lost before applied", "answered"


class LosingStore(DelegatingStore):
    """The real store, except that commits lose their answers as ``plan`` says (in
    order; once it runs out, every commit is answered)."""

    def __init__(self, store: EtcdStore, plan: list[str]) -> None:
        super().__init__(store)
        self.plan = plan

    async def commit(self, txn: Txn) -> TxnResult:
        fate = self.plan.pop(0) if self.plan else ANSWERED
        if fate == BEFORE:
            raise OutcomeUnknown("lost before it was applied")
        result = await super().commit(txn)
        if fate == AFTER:
            raise OutcomeUnknown("applied, and the answer lost")
        return result

    async def close(self) -> None:
        """The store is the fixture's."""


@pytest.fixture
async def etcd(etcd_cluster: EtcdCluster) -> AsyncIterator[EtcdStore]:
    store = await EtcdStore.open(etcd_settings(etcd_cluster))
    yield store
    await store.close()


async def leading(etcd: EtcdStore, plan: list[str], told: list[str]) -> FencedStore:
    """A fence on a leader key put now, over ``LosingStore(etcd, plan)``."""
    won = await etcd.commit(Txn(puts={LEADER_KEY: b"http://c0:7600"}))
    losing = LosingStore(etcd, plan)
    return FencedStore(losing, LEADER_KEY, won.revision, witness=etcd, on_deposed=told.append)


async def markers(etcd: EtcdStore) -> dict[str, bytes]:
    return {e.key: e.value for e in await etcd.range(MARKERS)}


async def test_a_commit_applied_whose_answer_was_lost_is_answered_once_with_its_revision(
    etcd: EtcdStore,
) -> None:
    told: list[str] = []
    fenced = await leading(etcd, [AFTER], told)

    result = await fenced.commit(Txn(puts={"/q": b"1"}))

    entry = await etcd.get("/q")
    assert result.succeeded
    assert entry is not None
    assert entry.mod_revision == result.revision
    assert etcd.revision == result.revision  # settling it wrote nothing more
    assert told == []


async def test_a_commit_lost_before_it_applied_is_sent_again_and_applied_once(
    etcd: EtcdStore,
) -> None:
    told: list[str] = []
    fenced = await leading(etcd, [BEFORE], told)
    before = etcd.revision

    result = await fenced.commit(Txn(puts={"/q": b"1"}))

    entry = await etcd.get("/q")
    assert result.succeeded
    assert entry is not None
    assert (entry.create_revision, entry.mod_revision) == (
        result.revision,
        result.revision,
    )
    # One revision for burning the lost commit's marker, one for the commit sent again,
    # which puts the same marker again.
    assert result.revision == before + 2
    assert list((await markers(etcd)).values()) == [b""]
    assert told == []


async def test_a_burn_whose_answer_was_lost_is_read_back_and_the_commit_sent_again(
    etcd: EtcdStore,
) -> None:
    fenced = await leading(etcd, [BEFORE, AFTER], [])

    result = await fenced.commit(Txn(puts={"/q": b"1"}))

    entry = await etcd.get("/q")
    assert result.succeeded
    assert entry is not None
    assert entry.create_revision == entry.mod_revision == result.revision


async def test_a_lost_commit_that_conflicts_is_refused_and_never_applies(
    etcd: EtcdStore,
) -> None:
    fenced = await leading(etcd, [BEFORE], [])
    stale = Txn(compares=(Compare("/q", 12345),), puts={"/q": b"x"})

    result = await fenced.commit(stale)

    assert not result.succeeded
    assert await etcd.get("/q") is None


async def test_a_marker_is_reused_by_later_commits_and_deleted_by_the_next_leader(
    etcd: EtcdStore,
) -> None:
    fenced = await leading(etcd, [BEFORE], [])
    for i in range(5):
        assert (await fenced.commit(Txn(puts={"/q": str(i).encode()}))).succeeded
    (last,) = (await markers(etcd)).items()  # burnt once, then put by five commits
    assert last[1] == b""

    await etcd.commit(Txn(deletes=(LEADER_KEY,)))
    successor = await leading(etcd, [], [])
    result = await successor.commit(Txn(puts={"/q": b"next"}))

    (kept,) = await etcd.range(MARKERS)
    assert kept.key != last[0]
    assert kept.mod_revision == result.revision


async def test_commits_in_flight_at_once_each_hold_a_marker_and_later_ones_reuse_them(
    etcd: EtcdStore,
) -> None:
    fenced = await leading(etcd, [], [])

    async def burst(size: int, round_: int) -> None:
        txns = [Txn(puts={f"/r/{round_}/{i}": b"x"}) for i in range(size)]
        results = await asyncio.gather(*(fenced.commit(txn) for txn in txns))
        assert all(result.succeeded for result in results)

    await burst(8, 0)
    held = await markers(etcd)
    for round_ in range(1, 4):
        await burst(8, round_)
    now = await markers(etcd)
    assert held.keys() <= now.keys()  # kept and reused, none deleted
    assert len(now) <= 8  # never more than the commits in flight at once


async def test_a_commit_that_cannot_be_settled_ends_the_leadership_within_its_bound(
    etcd: EtcdStore,
) -> None:
    told: list[str] = []
    fenced = await leading(etcd, [BEFORE] * 1000, told)
    started = time.monotonic()

    with pytest.raises(OutcomeUnknown, match="outcome is unknown"):
        await fenced.commit(Txn(puts={"/q": b"1"}))

    assert time.monotonic() - started < SETTLE_SECONDS + 5  # generous: a shared host
    assert len(told) == 1
    assert "outcome is unknown" in told[0]
    assert await etcd.get("/q") is None


async def test_concurrent_compare_and_swaps_with_lost_answers_each_count_once(
    etcd: EtcdStore,
) -> None:
    """Counters bumped by compare-and-swap, as the services do, while a third of the
    answers are lost (before or after applying): every success is in the store once,
    every refusal not at all."""
    plan = [(AFTER, BEFORE, ANSWERED)[i % 3] for i in range(120)]
    fenced = await leading(etcd, plan, [])

    async def bump(key: str) -> bool:
        entry = await etcd.get(key)
        seen = entry.mod_revision if entry else 0
        count = int(entry.value) if entry else 0
        txn = Txn(compares=(Compare(key, seen),), puts={key: str(count + 1).encode()})
        return (await fenced.commit(txn)).succeeded

    outcomes = await asyncio.gather(*(bump(f"/n/{i % 5}") for i in range(60)))

    counted = sum(int(e.value) for e in await etcd.range("/n/"))
    assert counted == sum(outcomes) > 0
