"""The pieces of leadership on a real 3-member etcd cluster: the replica that follows the
store, the election, and the fence on every commit."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from bench.etcd_cluster import EtcdCluster
from coordinator.election import LEADER_KEY, Election
from coordinator.store import Compare, Txn
from coordinator.store.etcd import EtcdStore
from coordinator.store.fenced import REFUSED_BY_THE_FENCE, Deposed, FencedStore
from coordinator.store.replica import Replica
from coordinator.warm import Warm
from tests.coordinator.store_engines import etcd_settings


@pytest.fixture
async def prefix_stores(etcd_cluster: EtcdCluster) -> AsyncIterator[list[EtcdStore]]:
    """Three stores (three coordinators) on one fresh prefix."""
    settings = etcd_settings(etcd_cluster)
    stores = [await EtcdStore.open(settings) for _ in range(3)]
    yield stores
    for store in stores:
        await store.close()


@contextlib.asynccontextmanager
async def following(store: EtcdStore) -> AsyncIterator[Replica]:
    replica = await Replica.follow(store)
    try:
        yield replica
    finally:
        if replica._follower is not None:  # the store is the fixture's to close
            replica._follower.cancel()


# --- the replica ------------------------------------------------------------------------


async def test_a_follower_that_fails_is_dropped_and_the_replica_goes_on(
    prefix_stores: list[EtcdStore],
) -> None:
    """A standby whose kept state cannot follow a transaction (here a record it cannot
    decode) keeps following the store, and its takeover reads the store instead."""
    writer, follower, _ = prefix_stores
    async with following(follower) as replica:
        warm = await Warm.build(replica, share_base=100)
        told: list[list[str]] = []
        replica.listen(lambda events: told.append([e.key for e in events]))
        broken = await writer.commit(Txn(puts={"/allocations/n1": b"{not json"}))
        await replica.caught_up(broken.revision)
        later = await writer.commit(Txn(puts={"/x": b"1"}))
        await replica.caught_up(later.revision)
        assert told == [["/allocations/n1"], ["/x"]]
        assert warm.take() is None


async def test_a_replica_holds_what_was_there_and_follows_what_others_write(
    prefix_stores: list[EtcdStore],
) -> None:
    writer, follower, _ = prefix_stores
    await writer.commit(Txn(puts={"/a/1": b"one", "/b/1": b"x"}))
    async with following(follower) as replica:
        assert [(e.key, e.value) for e in await replica.range("/a/")] == [("/a/1", b"one")]
        done = await writer.commit(Txn(puts={"/a/2": b"two", "/a/1": b"uno"}))
        await writer.commit(Txn(deletes=("/b/1",)))
        await replica.caught_up(done.revision + 1)
        assert await replica.range("") == await writer.range("")
        entry = await replica.get("/a/1")
        assert entry == await writer.get("/a/1")


async def test_a_replica_reads_its_own_commits_at_once_and_keeps_them_against_late_events(
    prefix_stores: list[EtcdStore],
) -> None:
    store = prefix_stores[0]
    async with following(store) as replica:
        await replica.commit(Txn(puts={"/k": b"1"}))
        await replica.commit(Txn(puts={"/k": b"2"}))
        gone = await replica.commit(Txn(deletes=("/k",)))
        assert await replica.get("/k") is None  # before the watch brought anything
        put = await replica.commit(Txn(puts={"/j": b"3"}))
        assert (await replica.get("/j")).mod_revision == put.revision  # type: ignore[union-attr]
        await replica.caught_up(put.revision)
        await asyncio.sleep(0.2)  # the watch's events of all four have come in by now
        assert await replica.get("/k") is None
        assert gone.succeeded
        assert await replica.range("") == await store.range("")


async def test_a_replica_that_is_refused_changes_nothing(prefix_stores: list[EtcdStore]) -> None:
    store = prefix_stores[0]
    async with following(store) as replica:
        result = await replica.commit(Txn(compares=(Compare("/k", 99),), puts={"/k": b"no"}))
        assert not result.succeeded
        assert await replica.get("/k") is None


# --- the election -----------------------------------------------------------------------


async def test_one_of_three_wins_and_the_others_name_it(prefix_stores: list[EtcdStore]) -> None:
    async with (
        following(prefix_stores[0]) as r0,
        following(prefix_stores[1]) as r1,
        following(prefix_stores[2]) as r2,
    ):
        elections = [
            Election(store, replica, url=f"http://c{i}:7600", ttl=2)
            for i, (store, replica) in enumerate(zip(prefix_stores, (r0, r1, r2), strict=True))
        ]
        campaigns = [asyncio.create_task(e.campaign()) for e in elections]
        done, pending = await asyncio.wait(campaigns, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.sleep(0.5)
        assert len(done) == 1
        assert all(not t.done() for t in pending)
        winner = campaigns.index(done.pop())
        for replica in (r0, r1, r2):
            await replica.caught_up(campaigns[winner].result().won_at)
        assert [await e.leader_url() for e in elections] == [f"http://c{winner}:7600"] * 3
        won = campaigns[winner].result()
        # The winner resigns: one of the others wins at once, not after the TTL.
        await elections[winner].resign(won)
        done, pending = await asyncio.wait(pending, timeout=1.5)
        assert len(done) == 1
        for task in pending:
            task.cancel()


async def test_a_leader_whose_key_goes_loses_at_once(prefix_stores: list[EtcdStore]) -> None:
    store = prefix_stores[0]
    async with following(store) as replica:
        election = Election(store, replica, url="http://c0:7600", ttl=5)
        won = await election.campaign()
        holding = asyncio.create_task(election.hold(won))
        await store.commit(Txn(deletes=(LEADER_KEY,)))
        why = await asyncio.wait_for(holding, 2.0)
    assert why == "the leader key is gone or another coordinator's"


async def test_a_leader_whose_lease_ends_loses(prefix_stores: list[EtcdStore]) -> None:
    store = prefix_stores[0]
    async with following(store) as replica:
        election = Election(store, replica, url="http://c0:7600", ttl=5)
        won = await election.campaign()
        holding = asyncio.create_task(election.hold(won))
        await store.revoke_lease(won.lease)
        why = await asyncio.wait_for(holding, 3.0)
    assert why in ("the leader key is gone or another coordinator's", "etcd says the lease expired")


async def test_a_leader_whose_event_loop_blocks_past_its_ttl_keeps_its_key(
    prefix_stores: list[EtcdStore],
) -> None:
    """The event loop blocked for 1.5 x TTL at once, as a decider building and encoding a
    1,000-container commit on a loaded machine was seen to block it: the lease is renewed
    from the keeper's own thread meanwhile, so the key stays this leader's and, once the
    loop runs again, it still leads."""
    store = prefix_stores[0]
    ttl = 2
    async with following(store) as replica:
        election = Election(store, replica, url="http://c0:7600", ttl=ttl)
        won = await election.campaign()
        holding = asyncio.create_task(election.hold(won))
        await asyncio.sleep(0.2)  # the keeper has started and renewed once
        time.sleep(1.5 * ttl)  # noqa: ASYNC251  (the stall is the point)
        await asyncio.sleep(0.5)  # the replica and the keeper's news are heard
        assert not holding.done(), holding.result()
        entry = await store.get(LEADER_KEY)
        assert entry is not None
        assert entry.create_revision == won.won_at
        holding.cancel()


async def test_a_leader_whose_etcd_member_hangs_keeps_its_key(
    etcd_cluster: EtcdCluster,
) -> None:
    """The member the leader's connections use first hangs (SIGSTOP) for twice the TTL:
    each renewal waits at most a second on it and goes on through another member, so
    the lease is kept and the leader still leads once the member wakes up."""
    victim = next(i for i in range(3) if i != etcd_cluster.leader())
    base = etcd_settings(etcd_cluster)
    others = tuple(e for i, e in enumerate(etcd_cluster.endpoints) if i != victim)
    store = await EtcdStore.open(replace(base, endpoints=(etcd_cluster.endpoints[victim], *others)))
    ttl = 2
    try:
        async with following(store) as replica:
            election = Election(store, replica, url="http://c0:7600", ttl=ttl)
            won = await election.campaign()
            holding = asyncio.create_task(election.hold(won))
            await asyncio.sleep(0.2)  # the keeper has started and renewed once
            etcd_cluster.pause(victim)
            try:
                await asyncio.sleep(2 * ttl)
            finally:
                etcd_cluster.resume(victim)
            assert not holding.done(), holding.result()
            entry = await store.get(LEADER_KEY)
            assert entry is not None
            assert entry.create_revision == won.won_at
            holding.cancel()
    finally:
        await store.close()


async def test_a_new_leader_whose_copy_has_not_seen_its_win_yet_holds_on(
    prefix_stores: list[EtcdStore],
) -> None:
    """``hold`` reads the key from the replica; until the replica has seen the win, the
    key is absent there, which is no loss (a new leader once stepped down so, and its
    resignation left the cluster leaderless for seconds)."""
    store = prefix_stores[0]
    async with following(store) as replica:
        assert replica._follower is not None
        replica._follower.cancel()  # its watch brings nothing more: the win stays unseen
        election = Election(store, replica, url="http://c0:7600", ttl=2)
        won = await election.campaign()
        assert await replica.get(LEADER_KEY) is None
        holding = asyncio.create_task(election.hold(won))
        await asyncio.sleep(1.0)
        assert not holding.done()
        holding.cancel()


async def test_a_leader_that_stops_holding_stops_renewing(prefix_stores: list[EtcdStore]) -> None:
    """While ``hold`` runs the lease is renewed past its TTL; cancelling ``hold`` (a clean
    stop, a deposition) stops the renewals, and the lease then runs out by itself."""
    store = prefix_stores[0]
    ttl = 2
    async with following(store) as replica:
        election = Election(store, replica, url="http://c0:7600", ttl=ttl)
        won = await election.campaign()
        holding = asyncio.create_task(election.hold(won))
        await asyncio.sleep(ttl + 1)
        assert not holding.done()
        assert (await store.get(LEADER_KEY)) is not None
        holding.cancel()
        for _ in range(10 * (ttl + 2)):  # the lease runs out within its TTL
            if await store.get(LEADER_KEY) is None:
                break
            await asyncio.sleep(0.1)
        assert await store.get(LEADER_KEY) is None


# --- the fence --------------------------------------------------------------------------


async def test_the_fence_refuses_every_commit_once_another_holds_the_key(
    prefix_stores: list[EtcdStore],
) -> None:
    old_store, new_store, _ = prefix_stores
    async with following(old_store) as old_replica, following(new_store) as new_replica:
        old = Election(old_store, old_replica, url="http://old:7600", ttl=2)
        won = await old.campaign()
        told: list[str] = []
        fenced = FencedStore(
            old_replica,
            LEADER_KEY,
            won.won_at,
            witness=old_store,
            on_deposed=told.append,
        )
        assert (await fenced.commit(Txn(puts={"/q": b"by the leader"}))).succeeded
        await old_store.revoke_lease(won.lease)  # as if it expired during a pause
        new = Election(new_store, new_replica, url="http://new:7600", ttl=2)
        await asyncio.wait_for(new.campaign(), 3.0)
        with pytest.raises(Deposed):
            await fenced.commit(Txn(puts={"/q": b"by the deposed"}))
        with pytest.raises(Deposed):  # and every later one, without asking etcd
            await fenced.commit(Txn(puts={"/r": b"later"}))
    assert told == [REFUSED_BY_THE_FENCE]
    assert (await new_store.get("/q")).value == b"by the leader"  # type: ignore[union-attr]
    assert await new_store.get("/r") is None


async def test_a_refusal_of_the_services_own_compare_is_no_deposition(
    prefix_stores: list[EtcdStore],
) -> None:
    store = prefix_stores[0]
    async with following(store) as replica:
        won = await Election(store, replica, url="http://c0:7600", ttl=5).campaign()
        fenced = FencedStore(replica, LEADER_KEY, won.won_at, witness=store, on_deposed=pytest.fail)
        stale = Txn(compares=(Compare("/q", 12345),), puts={"/q": b"x"})
        assert not (await fenced.commit(stale)).succeeded
        assert (await fenced.commit(Txn(puts={"/q": b"y"}))).succeeded


async def test_a_restart_at_the_same_url_takes_its_earlier_runs_key_at_once(
    prefix_stores: list[EtcdStore],
) -> None:
    earlier, restarted, _ = prefix_stores
    async with following(earlier) as old_replica:
        killed = await Election(earlier, old_replica, url="http://c0:7600", ttl=30).campaign()
    async with following(restarted) as replica:
        election = Election(restarted, replica, url="http://c0:7600", ttl=30)
        won = await asyncio.wait_for(election.try_to_lead(), 2.0)  # not after 30 s
        assert won is not None
        assert won.won_at > killed.won_at
        other = Election(restarted, replica, url="http://c1:7600", ttl=30)
        assert await other.try_to_lead() is None  # another URL waits for the key


async def test_concurrent_fenced_commits_leave_the_replica_equal_to_etcd(
    prefix_stores: list[EtcdStore],
) -> None:
    store, other, _ = prefix_stores
    async with following(store) as replica:
        won = await Election(store, replica, url="http://c0:7600", ttl=5).campaign()
        fenced = FencedStore(replica, LEADER_KEY, won.won_at, witness=store, on_deposed=pytest.fail)

        async def bump(key: str) -> bool:
            """Compare-and-swap a counter, as the services do: read, then commit."""
            entry = await fenced.get(key)
            seen = entry.mod_revision if entry else 0
            value = int(entry.value) + 1 if entry else 1
            txn = Txn(compares=(Compare(key, seen),), puts={key: str(value).encode()})
            return (await fenced.commit(txn)).succeeded

        outcomes = await asyncio.gather(*(bump(f"/n/{i % 7}") for i in range(140)))
        await other.commit(Txn(puts={"/elsewhere": b"by another writer"}))
        await replica.caught_up(other.revision)
        assert await replica.range("") == await store.range("")
    counted = sum(int(e.value) for e in await store.range("/n/"))
    assert counted == sum(outcomes)  # every success counted once, every refusal not at all
