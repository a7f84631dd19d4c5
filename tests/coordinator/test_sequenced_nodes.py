"""Node records on the one sequenced path, over real HTTP and real agent sockets: hellos
(new nodes, and nodes back with other hardware), problem reports and deployments sent at
once leave memory equal to a fresh load of the store, on SQLite and on etcd; a hello the
store refuses changes nothing in memory; and a hello racing a deployment onto the same
node never leaves the books with a capacity the node's stored record does not offer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import msgspec
import pytest

from coordinator.deployments.stored_books import read_books
from coordinator.keys import DEPLOYMENTS, STORE
from coordinator.services.plan_nodes import node_from_inventory
from coordinator.services.registry import NODE_PREFIX, NodeRegistry
from coordinator.store import StoreError, Txn, TxnResult
from shared.codec import to_builtins
from shared.cpuset import CpuSet
from tests.builders import make_inventory
from tests.coordinator.conftest import (
    JOIN_TOKEN,
    Coordinator,
    config_for,
    frame,
    receive_close,
    receive_frame,
    start,
)
from tests.coordinator.store_engines import Engine, sqlite_engine
from tests.coordinator.test_node_delete import coordinator_on as deleting_coordinator_on
from tests.coordinator.test_stopping_api import _plain

NAMESPACE = "mini"
DEPLOYMENTS_PATH = f"/v1/namespaces/{NAMESPACE}/deployments"
TINY = {"cpu": "0.01", "memory": "8Mi"}
GiB = 2**30
LEASE_SECONDS = 60.0  # no node is lost during a test: only what the test sends counts


@contextlib.asynccontextmanager
async def coordinator_on(engine: Engine, data_dir: Path) -> AsyncIterator[Coordinator]:
    """``test_node_delete``'s coordinator, with heartbeats that the lease outlasts."""
    settings = {"lease_seconds": LEASE_SECONDS, "heartbeat_seconds": 20.0}
    async with deleting_coordinator_on(engine, data_dir, **settings) as running:
        yield running


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Coordinator]:
    async with coordinator_on(sqlite_engine(tmp_path), tmp_path) as running:
        yield running


def inventory(*, reserved: list[int] | None = None, memory: int = GiB) -> dict[str, Any]:
    """The two-CPU test host as the wire carries it, with ``memory`` (on its one NUMA
    node); ``reserved`` CPUs are not offered."""
    host = make_inventory()
    numa = msgspec.structs.replace(host.numa_nodes[0], memory=memory)
    host = msgspec.structs.replace(
        host, reserved=CpuSet(reserved or []), memory=memory, numa_nodes=[numa]
    )
    wire: dict[str, Any] = to_builtins(host)
    return wire


async def say_hello(
    cluster: Coordinator, node: str, wire: dict[str, Any]
) -> aiohttp.ClientWebSocketResponse:
    """A new session of ``node``'s agent, welcomed after a hello with ``wire``."""
    ws = await cluster.connect()
    hello = {
        "type": "hello",
        "node": node,
        "token": JOIN_TOKEN,
        "protocol": 1,
        "inventory": wire,
        "agent_version": "test",
    }
    await ws.send_bytes(bytes(msgpack.packb(hello)))
    welcome = await receive_frame(ws)
    assert welcome["type"] == "welcome", welcome
    return ws


async def report(ws: aiohttp.ClientWebSocketResponse, problems: list[str]) -> None:
    await ws.send_bytes(frame("status", applied_revision=0, containers=[], problems=problems))


def tiny(name: str, count: int = 1) -> dict[str, Any]:
    return {"name": name, "image": "allot/busybox:test", "resources": TINY, "count": count}


async def deploy(cluster: Coordinator, name: str, count: int = 1) -> int:
    status, answer = await cluster.call("POST", DEPLOYMENTS_PATH, tiny(name, count))
    assert status == 201, answer
    return status


async def assert_memory_is_a_fresh_load(
    cluster: Coordinator, *, lease_seconds: float = LEASE_SECONDS
) -> None:
    """Node records, the revisions their next changes compare, the books and their
    indexes in memory are what a fresh load of the store gives; and every node's
    capacity in the books is what its stored record's inventory offers."""
    service = cluster.app[DEPLOYMENTS]
    await service.quiet()
    store = cluster.app[STORE]
    loaded = await NodeRegistry.load(store, lease_seconds=lease_seconds)
    registry = service.registry
    assert loaded.all() == registry.all()
    names = [record.name for record in loaded.all()]
    assert [registry.revision(n) for n in names] == [loaded.revision(n) for n in names]
    assert [registry.unusable(n) for n in names] == [loaded.unusable(n) for n in names]
    assert _plain(await read_books(store)) == _plain(service.books)
    service.check_indexes()
    await cluster.assert_nodes_match_store()
    assert_capacity_is_the_records(cluster)


def assert_capacity_is_the_records(cluster: Coordinator) -> None:
    """No node's allocation state offers other cores or memory than its record's
    inventory: nothing is placed on capacity the stored record does not have."""
    service = cluster.app[DEPLOYMENTS]
    for name, state in service.books.nodes.items():
        record = service.registry.get(name)
        assert record is not None, name
        offered = node_from_inventory(name, record.inventory, share_base=100)
        assert (state.cores, state.memory) == (offered.cores, offered.memory), name


async def sessions_end(
    cluster: Coordinator, sockets: list[aiohttp.ClientWebSocketResponse]
) -> None:
    """Close the agents' sockets once every frame sent on them was acted on (a session
    reads its frames in order, then the close), and wait for the coordinator's side."""
    for ws in sockets:
        await ws.close()
    await cluster.settled()


async def test_hellos_reports_and_deploys_at_once_leave_memory_equal_to_the_store(
    engine: Engine, tmp_path: Path
) -> None:
    async with coordinator_on(engine, tmp_path) as cluster:
        first = [f"node-{i}" for i in range(4)]
        sockets = [await say_hello(cluster, node, inventory()) for node in first]
        await asyncio.gather(*(deploy(cluster, f"before-{i}", 3) for i in range(4)))

        said = await asyncio.gather(
            # new nodes
            *(say_hello(cluster, f"new-{i}", inventory()) for i in range(6)),
            # the first nodes back with a CPU reserved, in sessions that replace theirs
            *(say_hello(cluster, n, inventory(reserved=[0], memory=2 * GiB)) for n in first[:2]),
            # problems, and then none, from the sessions still current
            *(report(ws, ["nvml unreadable"]) for ws in sockets[2:]),
            *(deploy(cluster, f"during-{i}", 2) for i in range(12)),
        )
        welcomed = [ws for ws in said if isinstance(ws, aiohttp.ClientWebSocketResponse)]
        await report(sockets[3], [])
        await sessions_end(cluster, sockets + welcomed)

        states = {n["name"]: n["state"] for n in (await cluster.get_json("/v1/nodes"))["nodes"]}
        assert states == {
            **{f"new-{i}": "ready" for i in range(6)},
            "node-0": "ready",
            "node-1": "ready",
            "node-2": "degraded",
            "node-3": "ready",
        }
        for node in first[:2]:
            record = cluster.app[DEPLOYMENTS].registry.get(node)
            assert record is not None
            assert record.inventory.offered() == CpuSet([1])
        await assert_memory_is_a_fresh_load(cluster)


async def test_a_node_change_the_store_refuses_changes_nothing_in_memory(
    cluster: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store refuses every commit that writes a node record: a hello with other
    hardware and a problems report each end their session, and the registry, the
    revisions it keeps and the books are as they were; once the store takes them, the
    same hello goes through with its capacity."""
    ws = await say_hello(cluster, "node-a", inventory())
    await deploy(cluster, "web", 4)
    service = cluster.app[DEPLOYMENTS]
    await service.quiet()
    records, version = service.registry.all(), service.registry.version
    revision = service.registry.revision("node-a")
    books = _plain(service.books)
    capacity = service.books.nodes["node-a"].cores
    store = cluster.app[STORE]
    commit = store.commit

    async def refusing(txn: Txn) -> TxnResult:
        if any(key.startswith(NODE_PREFIX) for key in txn.puts):
            raise StoreError("injected: the disk is full")
        return await commit(txn)

    monkeypatch.setattr(store, "commit", refusing)
    await report(ws, ["docker: engine down"])
    assert await receive_close(ws) is not None  # the session ended on the store's error
    with pytest.raises(AssertionError):  # no welcome: the session ends instead
        await say_hello(cluster, "node-a", inventory(reserved=[0]))
    await cluster.settled()

    assert service.registry.all() == records
    assert (service.registry.version, service.registry.revision("node-a")) == (version, revision)
    assert _plain(service.books) == books
    assert service.books.nodes["node-a"].cores == capacity
    await assert_memory_is_a_fresh_load(cluster)

    monkeypatch.setattr(store, "commit", commit)
    again = await say_hello(cluster, "node-a", inventory(reserved=[0]))
    assert service.books.nodes["node-a"].cores != capacity  # followed the hardware
    await sessions_end(cluster, [again])
    await assert_memory_is_a_fresh_load(cluster)


async def test_a_hello_racing_a_deploy_onto_its_node_keeps_capacity_and_record_together(
    cluster: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round, a node holding nothing comes back with twice the memory while a
    deployment waits to land on it, behind the cordon of the node before (a commit the
    store is slow to make; then the round's node is the only one to place on).
    Committed apart, the hello's record came first, the deployment was decided on the
    new inventory, and the capacity that followed the hello grew it once more: memory
    the host does not have, there to place on."""
    store = cluster.app[STORE]
    commit = store.commit
    slow_commit = asyncio.Event()

    async def slow_cordons(txn: Txn) -> TxnResult:
        if any(key.startswith("/cordoned/") for key in txn.puts):
            slow_commit.set()
            await asyncio.sleep(0.3)
        return await commit(txn)

    monkeypatch.setattr(store, "commit", slow_cordons)
    sockets = [await say_hello(cluster, "node-spare", inventory())]
    before = "node-spare"
    for round_ in range(4):
        node = f"node-{round_}"
        sockets.append(await say_hello(cluster, node, inventory()))
        slow_commit.clear()
        cordon = asyncio.create_task(cluster.call("POST", f"/v1/nodes/{before}/cordon"))
        await slow_commit.wait()
        web = asyncio.create_task(deploy(cluster, f"web-{round_}", 2))
        await asyncio.sleep(0.05)  # the deployment waits its turn; then the hello comes
        sockets.append(await say_hello(cluster, node, inventory(memory=2 * GiB)))
        (status, answer), _ = await asyncio.gather(cordon, web)
        assert status == 200, answer
        assert {c["record"]["node"] for c in await containers(cluster, f"web-{round_}")} == {node}
        assert_capacity_is_the_records(cluster)
        before = node
    await sessions_end(cluster, sockets)
    await assert_memory_is_a_fresh_load(cluster)


async def containers(cluster: Coordinator, deployment: str) -> list[Any]:
    found = await cluster.get_json(f"/v1/containers?namespace={NAMESPACE}")
    return [c for c in found["containers"] if c["record"]["deployment"] == deployment]


async def test_with_no_grace_a_lost_nodes_release_is_in_the_commit_that_marks_it_lost(
    tmp_path: Path,
) -> None:
    """``lost_node_grace_seconds = 0``: the record marked lost, its ``lost`` event, and
    its containers released with their stand-ins placed on the node still there, all at
    one revision; memory is then a fresh load of the store."""
    config = config_for(
        tmp_path, lease_seconds=0.6, heartbeat_seconds=0.2, lost_node_grace_seconds=0.0
    )
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        silent = await say_hello(cluster, "node-a", inventory())
        await deploy(cluster, "web", 3)
        alive = await say_hello(cluster, "node-b", inventory())

        async def beat() -> None:
            while not alive.closed:
                await alive.send_bytes(frame("heartbeat"))
                await asyncio.sleep(0.1)

        beating = asyncio.create_task(beat())
        assert await receive_close(silent) == 4001  # its lease ran out
        stored = {e.key: e for e in await cluster.app[STORE].range("/")}
        lost_at = stored[NODE_PREFIX + "node-a"].mod_revision
        moved = [e for key, e in stored.items() if key.startswith("/containers/")]
        assert len(moved) == 3
        assert {json_of(e.value)["node"] for e in moved} == {"node-b"}
        assert {e.create_revision for e in moved} == {lost_at}
        events = (await cluster.get_json("/v1/events?node=node-a"))["events"]
        assert [e["kind"] for e in events if e["kind"] == "lost"] == ["lost"]
        beating.cancel()
        await sessions_end(cluster, [alive])
        await assert_memory_is_a_fresh_load(cluster, lease_seconds=0.6)
    await runner.cleanup()


def json_of(value: bytes) -> Any:
    return msgspec.json.decode(value)
