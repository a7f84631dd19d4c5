"""Decisions with more writes than etcd takes in one transaction, over real HTTP: a
deployment and a drain of a node holding more containers than fit in one commit, on a
real etcd member started with etcd's default --max-txn-ops (128) and on SQLite (no
limit: one transaction); and a leader stopped between the steps of a drain, whose
successor finishes it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.etcd_cluster import EtcdCluster
from coordinator.app import make_app
from coordinator.config import CoordinatorConfig, PoolSettings
from coordinator.deployments.stored_books import read_books
from coordinator.keys import DEPLOYMENTS as SERVICE
from coordinator.keys import STORE
from coordinator.store import Store
from coordinator.store.etcd import EtcdStore
from coordinator.store.replica import Replica
from coordinator.store.sqlite import SqliteStore
from coordinator.store.steps import JOURNALS
from coordinator.warm import Warm, WarmState
from tests.conftest import SMALL_TXN_OPS
from tests.coordinator.conftest import Coordinator, config_for, register
from tests.coordinator.store_engines import etcd_settings
from tests.coordinator.test_commit_steps import Held, elected
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call
from tests.coordinator.test_node_delete import assert_memory_is_a_fresh_load
from tests.loopback import serving

# More than one commit holds: deploying them writes about 3 keys each, draining 4.
CONTAINERS = 150


def settings_for(data_dir: Path) -> CoordinatorConfig:
    """Node leases that outlast the test: no heartbeats needed. No pool update either: on
    a slow machine one came during the test, reweighed every container of the namespace's
    pool in a decision of its own, made in steps, and the steps counted were three."""
    return config_for(
        data_dir,
        lease_seconds=60.0,
        heartbeat_seconds=20.0,
        pools=PoolSettings(fair_share_update_period=60.0),
    )


def tiny(name: str, count: int) -> dict[str, Any]:
    """Containers small enough for ``CONTAINERS`` of them on the two-CPU test host."""
    return {
        "name": name,
        "image": "busybox",
        "count": count,
        "resources": {"cpu": "0.01", "memory": "6Mi"},
    }


@contextlib.asynccontextmanager
async def serving_on(
    tmp_path: Path, store: Store, warm: WarmState | None = None
) -> AsyncIterator[Coordinator]:
    """A coordinator on ``store`` (a leader's fenced store, or SQLite) over real HTTP,
    with the state a standby kept (``warm``) or else the state read from the store."""
    app = make_app(settings_for(tmp_path), store=store, warm=warm)
    async with serving(app) as url, aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=app, http=http)


async def filled_node_a(cluster: Coordinator) -> list[aiohttp.ClientWebSocketResponse]:
    """node-a holding ``CONTAINERS`` containers, node-b empty and uncordoned."""
    agents = [await register(cluster, "node-a"), await register(cluster, "node-b")]
    assert (await call(cluster, "POST", "/v1/nodes/node-b/cordon"))[0] == 200
    status, placed = await call(cluster, "POST", DEPLOYMENTS, tiny("web", CONTAINERS))
    assert status == 201, placed
    assert (await call(cluster, "POST", "/v1/nodes/node-b/uncordon"))[0] == 200
    return agents


async def assert_drained(cluster: Coordinator) -> None:
    """Every container of node-a is stopping there and has its replacement on node-b;
    memory is a fresh load of the store, and no journal is left."""
    listed = (await call(cluster, "GET", "/v1/containers"))[1]["containers"]
    where = sorted((view["state"] == "stopping", view["record"]["node"]) for view in listed)
    assert where == [(False, "node-b")] * CONTAINERS + [(True, "node-a")] * CONTAINERS
    assert await cluster.app[STORE].range(JOURNALS) == []
    await assert_memory_is_a_fresh_load(cluster)
    await assert_revisions_are_the_stores(cluster)


async def assert_revisions_are_the_stores(cluster: Coordinator) -> None:
    """The revisions the books keep are those a fresh load reads: each node header's
    (which the next commit compares) and each node's desired state's."""
    books, fresh = cluster.app[SERVICE]._books, await read_books(cluster.app[STORE])
    assert books.allocation_revision == fresh.allocation_revision
    assert books.node_revision == fresh.node_revision


@pytest.fixture
async def etcd_stores(small_txn_etcd_cluster: EtcdCluster) -> AsyncIterator[list[EtcdStore]]:
    """Two coordinators' connections to one fresh prefix of the small-limit member."""
    settings = etcd_settings(small_txn_etcd_cluster)
    opened = [await EtcdStore.open(settings) for _ in range(2)]
    yield opened
    for store in opened:
        await store.close()


def steps_logged(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [
        int(record.__dict__["allot_fields"]["steps"])
        for record in caplog.records
        if record.getMessage() == "commit made in steps"
    ]


async def test_a_drain_larger_than_a_transaction_is_committed_in_steps_on_etcd(
    tmp_path: Path, etcd_stores: list[EtcdStore], allot_logs: pytest.LogCaptureFixture
) -> None:
    leader = await elected(etcd_stores[0])
    async with serving_on(tmp_path, leader.fenced) as cluster:
        agents = await filled_node_a(cluster)
        status, drained = await call(cluster, "POST", "/v1/nodes/node-a/drain")
        assert status == 200, drained
        assert len(drained["placed"]) == CONTAINERS
        assert set(drained["placed"].values()) == {"node-b"}
        await assert_drained(cluster)
        for ws in agents:
            await ws.close()
    assert leader.deposed == []
    deploy_steps, drain_steps = steps_logged(allot_logs)
    # The journal, then pages of fewer than SMALL_TXN_OPS writes: 3 and 4 per container.
    assert deploy_steps >= 1 + 3 * CONTAINERS // SMALL_TXN_OPS
    assert drain_steps >= 1 + 4 * CONTAINERS // SMALL_TXN_OPS


async def test_large_deployments_asked_for_at_once_are_each_committed_whole_on_etcd(
    tmp_path: Path, etcd_stores: list[EtcdStore], allot_logs: pytest.LogCaptureFixture
) -> None:
    """Deployments asked for at once over real HTTP, together far over one commit, and
    two of them each over it alone: all placed, memory a fresh load, no journal left."""
    leader = await elected(etcd_stores[0])
    sizes = [60, 60, 30, 30, 10, 10]
    async with serving_on(tmp_path, leader.fenced) as cluster:
        agents = [await register(cluster, "node-a"), await register(cluster, "node-b")]
        answers = await asyncio.gather(
            *(
                call(cluster, "POST", DEPLOYMENTS, tiny(f"web-{i}", size))
                for i, size in enumerate(sizes)
            )
        )
        assert [status for status, _ in answers] == [201] * len(sizes), answers
        listed = (await call(cluster, "GET", "/v1/containers"))[1]["containers"]
        assert len(listed) == sum(sizes)
        assert await cluster.app[STORE].range(JOURNALS) == []
        await assert_memory_is_a_fresh_load(cluster)
        await assert_revisions_are_the_stores(cluster)
        for ws in agents:
            await ws.close()
    assert leader.deposed == []
    assert steps_logged(allot_logs)  # some batch was over one commit


async def test_the_same_drain_on_sqlite_is_one_transaction(
    tmp_path: Path, allot_logs: pytest.LogCaptureFixture
) -> None:
    store = await SqliteStore.open(tmp_path / "store.db")
    try:
        async with serving_on(tmp_path, store) as cluster:
            agents = await filled_node_a(cluster)
            before = store.revision
            status, drained = await call(cluster, "POST", "/v1/nodes/node-a/drain")
            assert status == 200, drained
            assert store.revision == before + 1
            await assert_drained(cluster)
            for ws in agents:
                await ws.close()
    finally:
        await store.close()
    assert steps_logged(allot_logs) == []


async def test_a_leader_stopped_between_a_drains_steps_is_finished_by_the_next(
    tmp_path: Path, etcd_stores: list[EtcdStore], allot_logs: pytest.LogCaptureFixture
) -> None:
    """The leader commits the drain's journal and its first page, then stops (frozen,
    its leader key revoked: it died). A standby followed the store meanwhile, part-made
    drain included; elected, it finishes the drain before it serves, as ``leading``
    does: the books it kept are a fresh load of the store, and the drain is whole. The
    old leader, woken, is refused by the fence and its caller gets an error."""
    old_store, new_store = etcd_stores
    held = Held(old_store)
    old = await elected(old_store, held)
    replica = await Replica.follow(new_store)
    warm = await Warm.build(replica, share_base=settings_for(tmp_path).share_base)
    async with serving_on(tmp_path / "old", old.fenced) as first, held:
        agents = await filled_node_a(first)
        held.allowed = 2
        draining = asyncio.create_task(call(first, "POST", "/v1/nodes/node-a/drain"))
        await held.holding.wait()
        assert len(await new_store.range(JOURNALS)) == 1
        await old_store.revoke_lease(old.lease)

        new = await elected(new_store, replica)
        await replica.caught_up(new.won_at)  # every commit of the leaders before
        await replica.caught_up(await new.fenced.finish_journals())
        kept = warm.take()
        assert kept is not None
        async with serving_on(tmp_path / "new", new.fenced, kept) as second:
            await assert_drained(second)
            books = second.app[SERVICE]._books
            assert len(books.stopping) == CONTAINERS

            held.go.set()
            status, answer = await draining
            assert status >= 500, answer
            assert old.deposed
            await assert_drained(second)
        for ws in agents:
            await ws.close()
    assert replica._follower is not None  # the store is the fixture's to close
    replica._follower.cancel()
    finished = [r for r in allot_logs.records if r.levelno == logging.WARNING]
    assert any(
        r.getMessage() == "finished a commit an earlier leader left between steps" for r in finished
    )
