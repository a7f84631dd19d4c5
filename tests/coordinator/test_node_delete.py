"""Deleting a node (``DELETE /v1/nodes/{name}``) over real HTTP and agent sockets: refused,
changing nothing, while the node is not lost; a lost node's record, allocations and
cordon go in one commit with its containers, whose stand-ins are placed elsewhere; its
agent coming back registers a new node; deletes and reads at once, on SQLite and etcd,
leave memory equal to a fresh load of the store."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.deployments.stored_books import read_books
from coordinator.keys import DEPLOYMENTS as SERVICE
from coordinator.keys import STORE
from coordinator.services.registry import NodeRegistry
from tests.allotctl.test_deployments import allotctl
from tests.coordinator.conftest import (
    NAMESPACE_TOKEN,
    Coordinator,
    config_for,
    frame,
    register,
    start,
)
from tests.coordinator.store_engines import Engine
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call
from tests.coordinator.test_pending import assert_memory_is_the_store
from tests.coordinator.test_stopping_api import _plain, whole_cores

LEASE_SECONDS = 2.0  # a node whose agent goes quiet is lost after this (a loaded machine
# stalls a loop for a good part of a second: no live node may be lost meanwhile)


@contextlib.asynccontextmanager
async def coordinator_on(
    engine: Engine, data_dir: Path, **overrides: Any
) -> AsyncIterator[Coordinator]:
    """A coordinator on ``engine``'s store whose lost nodes keep their containers (the
    grace outlasts the test), so that only a deletion releases them; with ``overrides``
    of its settings."""
    store: dict[str, Any] = {}
    if engine.etcd is not None:
        store = {"store": "etcd", "etcd_endpoints": list(engine.etcd.endpoints)}
        store["etcd_prefix"] = engine.etcd.prefix
    settings: dict[str, Any] = {
        "lease_seconds": LEASE_SECONDS,
        "heartbeat_seconds": 0.2,
        "lost_node_grace_seconds": 3600.0,
    }
    config = config_for(data_dir, **(settings | store | overrides))
    runner, url = await start(config)
    try:
        async with aiohttp.ClientSession() as http:
            yield Coordinator(url=url, app=runner.app, http=http)
    finally:
        await runner.cleanup()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Coordinator]:
    async with coordinator_on(Engine("sqlite", path=tmp_path / "store.db"), tmp_path) as running:
        yield running


@contextlib.asynccontextmanager
async def live(cluster: Coordinator, node: str) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """The node's agent, connected and beating for as long as the block runs."""
    ws = await register(cluster, node)

    async def beat() -> None:
        with contextlib.suppress(ConnectionError):
            while not ws.closed:
                await ws.send_bytes(frame("heartbeat"))
                await asyncio.sleep(0.1)

    beating = asyncio.create_task(beat())
    try:
        yield ws
    finally:
        beating.cancel()
        await ws.close()


async def until_lost(cluster: Coordinator, node: str) -> None:
    """Wait until the node, whose agent went quiet, is marked lost."""
    for _ in range(500):
        if (await cluster.get_json(f"/v1/nodes/{node}"))["state"] == "lost":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{node} was not marked lost")


async def everything_stored(cluster: Coordinator) -> list[tuple[str, int]]:
    return [(entry.key, entry.mod_revision) for entry in await cluster.app[STORE].range("/")]


async def assert_memory_is_a_fresh_load(cluster: Coordinator) -> None:
    """Containers, stopping ones, allocations and node records in memory are what a
    fresh load of the store gives."""
    service = cluster.app[SERVICE]
    await assert_memory_is_the_store(cluster)
    store = cluster.app[STORE]
    assert _plain(await read_books(store)) == _plain(service._books)
    loaded = await NodeRegistry.load(store, lease_seconds=LEASE_SECONDS)
    assert [r.name for r in loaded.all()] == [r.name for r in service._context.registry.all()]
    await cluster.assert_nodes_match_store()


async def test_a_node_that_is_not_lost_is_not_deleted_and_nothing_changes(
    cluster: Coordinator,
) -> None:
    async with live(cluster, "node-a"):
        status, placed = await call(cluster, "POST", DEPLOYMENTS, whole_cores("web", 2))
        assert status == 201, placed
        before = await everything_stored(cluster)

        status, refused = await call(cluster, "DELETE", "/v1/nodes/node-a")
        assert status == 409, refused
        assert refused["error"]["code"] == "node_not_lost"
        assert refused["error"]["message"].startswith(
            "node node-a is ready and holds 2 container(s): only a lost node can be deleted"
        )
        details = refused["error"]["details"]
        assert (details["node"], details["state"], details["containers"]) == ("node-a", "ready", 2)
        status, _ = await call(cluster, "DELETE", "/v1/nodes/node-a", token=NAMESPACE_TOKEN)
        assert status == 403
        status, _ = await call(cluster, "DELETE", "/v1/nodes/ghost")
        assert status == 404

        assert await everything_stored(cluster) == before
        assert (await cluster.get_json("/v1/nodes/node-a"))["state"] == "ready"
        assert len((await cluster.get_json("/v1/containers?node=node-a"))["containers"]) == 2
        await assert_memory_is_a_fresh_load(cluster)


async def test_a_lost_node_goes_with_its_containers_and_its_agent_comes_back_as_a_new_node(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    async with live(cluster, "node-b"):
        async with live(cluster, "node-a"):
            assert (await call(cluster, "POST", "/v1/nodes/node-b/cordon"))[0] == 200
            status, placed = await call(cluster, "POST", DEPLOYMENTS, whole_cores("web", 2))
            assert status == 201, placed
            first, second = sorted(view["record"]["id"] for view in placed["containers"])
            assert (await call(cluster, "POST", "/v1/nodes/node-b/uncordon"))[0] == 200
            assert (await call(cluster, "POST", "/v1/nodes/node-a/cordon"))[0] == 200
            status, deleted = await call(cluster, "DELETE", f"/v1/containers/{first}")
            assert status == 200, deleted  # stopping on node-a; its stand-in goes to node-b
        registered = (await cluster.get_json("/v1/nodes/node-a"))["registered_at"]
        await until_lost(cluster, "node-a")

        code, out, err = await allotctl(cluster, capsys, "node", "delete", "node-a", "--json")
        assert code == 0, err
        answer = json.loads(out)
        assert (answer["node"], answer["deleted"], answer["released"]) == ("node-a", True, [second])
        stand_in = answer["stand_ins"][second]
        assert answer["placed"] == {stand_in: "node-b"}

        assert (await cluster.get("/v1/nodes/node-a")).status == 404
        assert (await cluster.get("/v1/nodes/node-a/allocation")).status == 404
        gone = [k for k, _ in await everything_stored(cluster) if "node-a" in k.split("/")[2:3]]
        assert gone == []  # no record, allocation header or cordon is left
        views = (await cluster.get_json("/v1/containers"))["containers"]
        assert {view["record"]["node"] for view in views} == {"node-b"}
        events = (await cluster.get_json("/v1/events?node=node-a&kind=node"))["events"]
        assert events[-1]["reason"] == (
            "deleted by an administrator: 1 container(s) released, 1 stopping one(s) let go"
        )
        await assert_memory_is_a_fresh_load(cluster)

        # The host's agent comes back: a new node, holding nothing of the old books.
        await asyncio.sleep(0.01)
        async with live(cluster, "node-a"):
            shown = await cluster.get_json("/v1/nodes/node-a")
            assert (shown["state"], shown["cordoned"]) == ("ready", False)
            assert shown["registered_at"] > registered
            allocation = await cluster.get_json("/v1/nodes/node-a/allocation")
            assert (allocation["containers"], allocation["memory_used"]) == ([], 0)
            assert cluster.app[SERVICE].desired("node-a")[1] == []
            await assert_memory_is_a_fresh_load(cluster)


async def test_deletes_and_reads_at_once_leave_memory_equal_to_a_fresh_load(
    engine: Engine, tmp_path: Path
) -> None:
    async with coordinator_on(engine, tmp_path) as cluster, live(cluster, "node-z"):
        lost = [f"node-{i}" for i in range(3)]
        async with contextlib.AsyncExitStack() as agents:
            for node in lost:
                await agents.enter_async_context(live(cluster, node))
            status, placed = await call(cluster, "POST", DEPLOYMENTS, whole_cores("web", 6))
            assert status == 201, placed
        for node in lost:
            await until_lost(cluster, node)

        requests = [
            *(call(cluster, "DELETE", f"/v1/nodes/{node}") for node in lost * 2),
            call(cluster, "DELETE", "/v1/nodes/node-z"),  # ready: refused
            *(call(cluster, "GET", path) for path in ("/v1/nodes", "/v1/containers")),
            *(call(cluster, "GET", f"/v1/nodes/{node}/allocation") for node in lost),
        ]
        answers = await asyncio.gather(*requests)
        deletes = [status for status, _ in answers[: 2 * len(lost)]]
        assert sorted(deletes) == [200] * len(lost) + [404] * len(lost), answers
        assert answers[2 * len(lost)][0] == 409
        assert {status for status, _ in answers[2 * len(lost) + 1 :]} <= {200, 404}

        assert [node["name"] for node in (await cluster.get_json("/v1/nodes"))["nodes"]] == [
            "node-z"
        ]
        views = (await cluster.get_json("/v1/containers"))["containers"]
        assert {view["record"]["node"] for view in views} <= {"node-z", ""}
        await assert_memory_is_a_fresh_load(cluster)


async def test_a_deletion_and_its_agents_hello_at_once_leave_one_story(
    cluster: Coordinator,
) -> None:
    """Whichever comes first, the node is there for its agent and memory is the store:
    deleted, then registered anew without its old container (the deployment, which keeps
    its count, may place a new one there); or back, keeping its container."""
    async with live(cluster, "node-a"):
        status, placed = await call(cluster, "POST", DEPLOYMENTS, whole_cores("web", 1))
        assert status == 201, placed
    (old,) = [view["record"]["id"] for view in placed["containers"]]
    await until_lost(cluster, "node-a")
    (status, answer), ws = await asyncio.gather(
        call(cluster, "DELETE", "/v1/nodes/node-a"), register(cluster, "node-a")
    )
    assert status in (200, 409), answer
    assert (await cluster.get_json("/v1/nodes/node-a"))["state"] == "ready"
    held = [
        view["record"]["id"]
        for view in (await cluster.get_json("/v1/containers?node=node-a"))["containers"]
    ]
    if status == 200:
        assert old not in held, (status, held)
    else:
        assert held == [old], (status, held)
    await assert_memory_is_a_fresh_load(cluster)
    await ws.close()
