"""A coordinator stopped and started again on the same store holds what it held, on a
real SQLite file and on a prefix of the session's real etcd cluster: deployments sent at
once over real HTTP (unbound containers, whose allocations are stored alike, and bound
ones, each on cores of its own), one scaled down (its containers stopping), a node
cordoned. After the restart the books equal those before, revisions included, memory is
a fresh load of the store, and equal stored allocations are one object in memory."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from coordinator.config import CoordinatorConfig
from coordinator.deployments.books import Books
from coordinator.keys import DEPLOYMENTS as SERVICE
from coordinator.placement import Allocation
from coordinator.store import ClusterStore
from coordinator.store.etcd import EtcdStore
from coordinator.store.sqlite import SqliteStore
from tests.coordinator.conftest import Coordinator, config_for, register
from tests.coordinator.deployments.test_indexes import _plain_books
from tests.coordinator.store_engines import ENGINES, etcd_settings
from tests.coordinator.test_big_decisions import serving_on, tiny
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call
from tests.coordinator.test_node_delete import assert_memory_is_a_fresh_load

NODES = ("node-a", "node-b", "node-c")


def settings_for(data_dir: Path) -> CoordinatorConfig:
    """Node leases that outlast the test; answers that wait for no agent's acknowledgement
    (the test's agents only say hello)."""
    return config_for(data_dir, lease_seconds=60.0, heartbeat_seconds=20.0, removal_ack_seconds=0.0)


def bound(name: str, count: int) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "count": count,
        "resources": {"cpu": "1", "memory": "6Mi"},
        "cpu_bind": True,
    }


async def open_store(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> ClusterStore:
    """A store on the test's data: the same each call (a restart reopens it)."""
    if engine == "etcd":
        if not hasattr(request.node, "etcd_settings"):
            request.node.etcd_settings = etcd_settings(request.getfixturevalue("etcd_cluster"))
        return await EtcdStore.open(request.node.etcd_settings)
    return await SqliteStore.open(tmp_path / "allot.db")


async def fill(cluster: Coordinator) -> None:
    agents = [await register(cluster, node) for node in NODES]
    bodies = [tiny(f"web-{index}", 6) for index in range(4)] + [bound("pinned", 2)]
    answers = await asyncio.gather(*(call(cluster, "POST", DEPLOYMENTS, b) for b in bodies))
    assert [status for status, _ in answers] == [201] * len(bodies), answers
    scaled = await call(cluster, "POST", f"{DEPLOYMENTS}/web-0/scale", {"count": 2})
    assert scaled[0] == 200, scaled
    assert (await call(cluster, "POST", f"/v1/nodes/{NODES[2]}/cordon"))[0] == 200
    for agent in agents:
        await agent.close()


def allocations_of(books: Books, deployment_prefix: str) -> list[Allocation]:
    return [
        state.allocations[cid]
        for state in books.nodes.values()
        for cid in state.allocations
        if cid.removeprefix("team-a-").startswith(deployment_prefix)
    ]


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_restarted_coordinator_holds_what_it_held(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = await open_store(engine, tmp_path, request)
    try:
        async with serving_on(tmp_path, store) as cluster:
            await fill(cluster)
            held = cluster.app[SERVICE].books
            before = _plain_books(held)
            assert len(held.stopping) == 4
            assert held.cordoned == {NODES[2]}
    finally:
        await store.close()

    store = await open_store(engine, tmp_path, request)
    try:
        async with serving_on(tmp_path, store) as cluster:
            assert (await cluster.http.get(cluster.url + "/readyz")).status == 200
            books = cluster.app[SERVICE].books
            assert _plain_books(books) == before
            books.check_indexes()
            await assert_memory_is_a_fresh_load(cluster)
            unbound = allocations_of(books, "web-")
            assert len(unbound) == 4 * 6  # the stopping ones keep theirs
            assert len({id(allocation) for allocation in unbound}) == 1
            pinned = allocations_of(books, "pinned-")
            assert len(pinned) == 2
            assert all(a.plan.cores for a in pinned)
            assert pinned[0] is not unbound[0]
            status, listed = await call(cluster, "GET", f"{DEPLOYMENTS}/web-0")
            assert status == 200, listed
    finally:
        await store.close()
