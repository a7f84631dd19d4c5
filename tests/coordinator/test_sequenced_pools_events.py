"""Pool writes, the pool tree's state and events alone are decisions on the deployments'
sequencer: sent at once over real HTTP and agent sockets, mixed with deployments, they
leave memory equal to a fresh load of the store, on SQLite and on etcd; a failed commit
changes nothing in memory.

What each caught before: two pool writes at once committed each its own whole
configuration, read before the other's commit, and memory kept the one applied last
whatever the store kept last; an update of the tree during a pool write's commit was
undone by the write; and events recorded beside the sequencer pushed the same oldest
event out twice and came into memory out of sequence."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import coordinator.services.events as events_module
from coordinator.config import PoolSettings
from coordinator.keys import DEPLOYMENTS, POOLS, STORE
from coordinator.services.events import EVENT_PREFIX, Note
from coordinator.services.pool_service import CONFIG_KEY, STATE_KEY, PoolService
from coordinator.store import StoreError, Txn, TxnResult
from coordinator.store.sqlite import SqliteStore
from shared.api.events import Event
from tests.coordinator.conftest import Coordinator, frame, hello, inventory, register
from tests.coordinator.deployments.test_indexes import load
from tests.coordinator.store_engines import Engine
from tests.coordinator.test_node_delete import assert_memory_is_a_fresh_load, coordinator_on
from tests.coordinator.test_sequenced_decisions import NAMESPACE, tiny
from tests.coordinator.test_untrusted_agents import say_hello

# No fair-share update runs during these tests: the state in memory is then exactly the
# one a pool write stores with its configuration (an update puts memory ahead, by design).
QUIET_POOLS = PoolSettings(fair_share_update_period=60.0)
RELAXED = {"integral_guarantees": {"guarantee_type": "relaxed", "resource_flow": {"cpu": 100}}}
DEPLOYMENTS_PATH = f"/v1/namespaces/{NAMESPACE}/deployments"
# Events of the burst of the event log's test: an agent's corrections, one every 20 ms
# (past the leases of 2 s), refused agents and deployments in each of two tasks; the log
# keeps the newest KEEP, from its first seconds on.
DRIFTS = 120
REFUSED_AGENTS = 15
DEPLOYS = 8
KEEP = 5


def pool(weight: float, **fields: Any) -> dict[str, Any]:
    """A pool the test's namespace may deploy into."""
    return {"namespaces": [NAMESPACE], "weight": weight, **fields}


async def assert_pools_are_a_fresh_load(cluster: Coordinator) -> None:
    """The pools' configuration, and each one's volume and introspection, in memory are
    what a fresh load of the store gives."""
    await cluster.app[DEPLOYMENTS].quiet()
    memory = cluster.app[POOLS]
    fresh = await PoolService.load(cluster.app[STORE], QUIET_POOLS)
    assert dict(memory.configured()) == dict(fresh.configured())
    assert memory.config() == fresh.config()
    for name in fresh.names():
        shown, loaded = memory.view(name), fresh.view(name)
        assert shown is not None, name
        assert loaded is not None, name
        assert shown.introspection == loaded.introspection, name


async def assert_events_are_a_fresh_load(cluster: Coordinator) -> None:
    """The event log in memory is what the store holds, every key of it (a fresh load
    reads only the newest ``KEEP``): at most the newest ``KEEP`` events, numbered without
    a gap (no commit failed) and in order."""
    deployments = cluster.app[DEPLOYMENTS]
    await deployments.quiet()
    memory = deployments.events.events()
    stored = await cluster.app[STORE].range(EVENT_PREFIX)
    assert memory == [msgspec.json.decode(entry.value, type=Event) for entry in stored]
    sequences = [event.sequence for event in memory]
    if sequences:
        assert sequences == list(range(sequences[0], sequences[0] + len(sequences)))
    assert len(memory) <= events_module.KEEP


async def test_pool_writes_and_deploys_into_them_at_once_leave_memory_a_fresh_load(
    engine: Engine, tmp_path: Path
) -> None:
    """Puts (each pool twice, children of pools being written), deletes and deploys
    into those pools, all at once: each answered as its turn found the pools (never a
    5xx nor a conflict), and memory is the store."""
    async with coordinator_on(engine, tmp_path, lease_seconds=60.0, pools=QUIET_POOLS) as cluster:
        ws = await register(cluster, "node-a")
        names = [f"p{i}" for i in range(6)]
        puts = [
            *(("PUT", f"/v1/pools/{n}", pool(1.0 + i, **RELAXED)) for i, n in enumerate(names)),
            *(("PUT", f"/v1/pools/{n}", pool(10.0 + i)) for i, n in enumerate(names)),
            *(("PUT", f"/v1/pools/{n}-child", pool(1.0, parent=n)) for n in names[:3]),
        ]
        deletes = [("DELETE", f"/v1/pools/{n}", None) for n in [*names[3:], names[0]]]
        deploys = [("POST", DEPLOYMENTS_PATH, tiny(f"d-{n}") | {"pool": n}) for n in names]
        requests = [*puts, *deletes, *deploys]
        order = list(range(len(requests)))
        order = order[::2] + order[1::2]  # writes and deploys interleaved
        answers = dict(
            zip(
                order,
                await asyncio.gather(*(cluster.call(*requests[i]) for i in order)),
                strict=True,
            )
        )
        statuses = [answers[i][0] for i in range(len(requests))]
        put_statuses = statuses[: len(puts)]
        assert set(put_statuses[: 2 * len(names)]) == {200}, answers
        assert set(put_statuses[2 * len(names) :]) <= {200, 422}, answers  # parent not yet
        assert set(statuses[len(puts) : len(puts) + len(deletes)]) <= {200, 404, 422}, answers
        assert set(statuses[len(puts) + len(deletes) :]) <= {201, 422}, answers  # pool gone
        for status, answer in (answers[i] for i in range(len(requests))):
            if status == 422:
                assert answer["error"]["code"] in {"unknown_parent", "unknown_pool", "has_children"}

        await assert_pools_are_a_fresh_load(cluster)
        configured = cluster.app[POOLS].configured()
        for i, name in enumerate(names):  # a pool still there holds one of its two puts
            if name in configured:
                assert configured[name] in (pool(1.0 + i, **RELAXED), pool(10.0 + i))
        for config in configured.values():  # never a child whose parent is gone
            assert config.get("parent") in (None, *configured)
        await assert_memory_is_a_fresh_load(cluster)
        await assert_events_are_a_fresh_load(cluster)
        await ws.close()


async def test_refusals_drift_and_lost_nodes_at_once_keep_the_event_log_its_store(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents refused for their hello, drift an agent put back, nodes lost, deploys
    refused and placed, all at once and past the log's bound: every event is stored
    with the batch it fell in, and memory holds the store's newest ``KEEP``."""
    monkeypatch.setattr(events_module, "KEEP", KEEP)
    async with coordinator_on(engine, tmp_path) as cluster:  # leases of 2 s
        ws = await register(cluster, "node-a")
        gone = [await register(cluster, f"gone-{i}") for i in range(3)]
        for agent in gone:
            await agent.close()  # lost once their leases end, during what follows

        async def drift() -> None:
            """Corrections put back, each new (its own time); also node-a's heartbeat."""
            drifted = {"id": "c-1", "state": "running", "drift": ["cpu_shares 2 -> 7"]}
            for at in range(1, DRIFTS + 1):
                report = [drifted | {"drift_at": at}]
                await ws.send_bytes(frame("status", applied_revision=0, containers=report))
                await asyncio.sleep(0.02)

        async def refused_agents() -> list[str]:
            """Hellos refused one after the other, each an event of node-bad."""
            bad = hello("node-bad", inventory=inventory() | {"memory": -5})
            return [(await say_hello(cluster, bad))[0] for _ in range(REFUSED_AGENTS)]

        async def deploys(first: int) -> list[int]:
            """Deployments placed (admitted, placed) and refused (refused), in turns."""
            huge = {"resources": {"cpu": "64", "memory": "8Mi"}}
            return [
                (await cluster.call("POST", DEPLOYMENTS_PATH, spec))[0]
                for i in range(first, first + DEPLOYS)
                for spec in (tiny(f"d{i}"), tiny(f"huge{i}") | huge)
            ]

        _, *answers = await asyncio.gather(
            drift(), refused_agents(), refused_agents(), deploys(0), deploys(DEPLOYS)
        )
        assert answers[:2] == [["invalid_inventory"] * REFUSED_AGENTS] * 2, answers
        assert answers[2:] == [[201, 409] * DEPLOYS] * 2, answers
        for _ in range(300):  # the frames before the last were handled, the nodes lost
            await ws.send_bytes(frame("status", applied_revision=0, problems=["last"]))
            nodes = (await cluster.get_json("/v1/nodes"))["nodes"]
            states = {node["name"]: (node["state"], node["reason"]) for node in nodes}
            lost = [states[f"gone-{i}"][0] for i in range(3)]
            if lost == ["lost"] * 3 and states["node-a"][1] == "last":
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError(f"not all frames handled, or not all nodes lost: {states}")

        await assert_events_are_a_fresh_load(cluster)
        logged = cluster.app[DEPLOYMENTS].events.events()
        assert len(logged) == KEEP
        # drift, hub refusals, deploys placed (admitted, placed) and refused, nodes lost
        assert logged[-1].sequence == DRIFTS + 2 * REFUSED_AGENTS + 2 * 3 * DEPLOYS + 3
        await ws.close()


async def test_a_failed_pool_write_or_event_changes_nothing_in_memory(
    cluster: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store refuses: a pool put and a delete answer 503 and leave the tree as it was;
    a refused agent's event is not logged; the pool state stays due and its stored copy
    as it was. Once the store takes writes again, they go through."""
    await register(cluster, "node-a")
    assert (await cluster.call("PUT", "/v1/pools/kept", pool(2.0, **RELAXED)))[0] == 200
    deployments, pools, store = cluster.app[DEPLOYMENTS], cluster.app[POOLS], cluster.app[STORE]
    commit = store.commit
    before = (pools.config(), [e.sequence for e in deployments.events.events()])
    stored_before = await cluster.stored("/pools/")

    async def refusing(txn: Txn) -> TxnResult:
        raise StoreError("disk full")

    monkeypatch.setattr(store, "commit", refusing)
    answers = await asyncio.gather(
        cluster.call("PUT", "/v1/pools/new", pool(1.0)),
        cluster.call("PUT", "/v1/pools/kept", pool(5.0)),
        cluster.call("DELETE", "/v1/pools/kept"),
    )
    assert [status for status, _ in answers] == [503] * 3, answers
    code, _, _ = await say_hello(cluster, hello("node-bad", inventory=inventory() | {"memory": -5}))
    assert code == "invalid_inventory"  # the agent is told, though its event is not stored
    with pytest.raises(StoreError):
        await deployments.save_pool_state()
    assert (pools.config(), [e.sequence for e in deployments.events.events()]) == before
    assert await cluster.stored("/pools/") == stored_before

    monkeypatch.setattr(store, "commit", commit)
    assert (await cluster.call("PUT", "/v1/pools/kept", pool(5.0)))[0] == 200
    assert (await cluster.call("PUT", "/v1/pools/new", pool(1.0)))[0] == 200
    assert sorted(pools.configured()) == ["kept", "new"]
    await assert_events_are_a_fresh_load(cluster)
    fresh = await PoolService.load(store, PoolSettings())
    assert dict(fresh.configured()) == dict(pools.configured())


async def test_an_update_while_a_pool_write_commits_is_kept(tmp_path: Path) -> None:
    """The fair-share update runs while a pool put's commit is in flight: the put is
    applied on top of that update (it used to put back the tree it was decided on, and
    the update's accrual was lost), the state stored with the put is the one before the
    update (memory ahead, by design), and the next state stored is memory's."""
    clock = [1_000_000.0]
    store = await SqliteStore.open(tmp_path / "allot.db")
    pools = await PoolService.load(store, PoolSettings(), wall_clock=lambda: clock[0])
    service = await load(store, pools=pools)
    total = {"cpu": 1000.0, "memory": 2.0**40}
    await service.put_pool("research", RELAXED)
    pools.update(total)  # the first update: from here on, volume accrues
    commit = store.commit

    async def updating_meanwhile(txn: Txn) -> TxnResult:
        if CONFIG_KEY in txn.puts:
            clock[0] += 100
            pools.update(total)
        return await commit(txn)

    store.commit = updating_meanwhile  # type: ignore[method-assign]
    await service.put_pool("other", {"weight": 2.0})
    store.commit = commit  # type: ignore[method-assign]
    volume = pools.view("research").introspection["accumulated_resource_ratio_volume"]  # type: ignore[union-attr]
    assert volume == pytest.approx(0.1 * 100)  # flow 100 of 1000 cores for 100 s: kept
    stored = json.loads((await store.get(STATE_KEY)).value)  # type: ignore[union-attr]
    assert stored["pools"]["research"]["volume_ratio_s"] == 0.0  # taken before the update
    await service.save_pool_state()
    stored = json.loads((await store.get(STATE_KEY)).value)  # type: ignore[union-attr]
    assert stored["pools"]["research"]["volume_ratio_s"] == pytest.approx(0.1 * 100)
    assert stored == json.loads(pools.staged({}, state=True).puts[STATE_KEY])  # memory's
    await service.close()
    await store.close()


Write = tuple[str, int]  # ("record", how many events) or ("put" / "delete", which pool)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    writes=st.lists(
        st.tuples(st.sampled_from(["record", "put", "delete"]), st.integers(0, 4)),
        min_size=1,
        max_size=14,
    ),
    failing=st.lists(st.booleans(), max_size=14),
    keep=st.integers(1, 6),
)
def test_writes_at_once_with_commits_failing_anywhere_keep_memory_the_store(
    writes: list[Write], failing: list[bool], keep: int
) -> None:
    """Events alone and pool writes sent at once to the sequencer, the store failing the
    commits ``failing`` says (in the order they come): each caller is answered, memory
    is what the store holds (the event log key by key, the pools as a fresh load reads
    them), and each write answered well is in it unless a later one undid it."""

    async def run(directory: Path) -> None:
        store = await SqliteStore.open(directory / "allot.db")
        service = await load(store)
        pools = service._context.pools
        commit, fails = store.commit, iter(failing)

        async def failing_commit(txn: Txn) -> TxnResult:
            if next(fails, False):
                raise StoreError("disk full")
            return await commit(txn)

        store.commit = failing_commit  # type: ignore[method-assign]

        def sent(kind: str, which: int, index: int) -> Awaitable[object]:
            if kind == "record":
                notes = [Note("drift", f"write {index}, event {n}") for n in range(which)]
                return service.record(notes)
            if kind == "put":
                return service.put_pool(f"p{which}", {"weight": float(index + 1)})
            return service.delete_pool(f"p{which}")

        calls = [sent(kind, which, index) for index, (kind, which) in enumerate(writes)]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        await service.quiet()
        store.commit = commit  # type: ignore[method-assign]

        memory = service.events.events()
        stored = await store.range(EVENT_PREFIX)
        assert memory == [msgspec.json.decode(entry.value, type=Event) for entry in stored]
        assert len(memory) <= keep
        assert [e.sequence for e in memory] == sorted({e.sequence for e in memory})
        fresh = await PoolService.load(store, PoolSettings())
        assert dict(pools.configured()) == dict(fresh.configured())
        for index, ((kind, which), answer) in enumerate(zip(writes, answers, strict=True)):
            assert not isinstance(answer, BaseException) or isinstance(answer, StoreError)
            later = [k for k, w in writes[index + 1 :] if k != "record" and w == which]
            if kind == "put" and not isinstance(answer, BaseException) and not later:
                assert pools.configured()[f"p{which}"] == {"weight": float(index + 1)}
            if kind == "delete" and answer is True and not later:
                assert f"p{which}" not in pools.configured()
        await service.close()
        await store.close()

    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as directory:
        patch.setattr(events_module, "KEEP", keep)
        asyncio.run(run(Path(directory)))
