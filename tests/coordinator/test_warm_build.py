"""The books and node records loaded from a real SQLite store: a restart's load in parts
equals the load of every record at once, and a standby's build lets its event loop run
(a task beside it gets turns between every part of the build) and misses nothing the
store's watch brings meanwhile."""

from __future__ import annotations

import asyncio
import itertools
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.deployments import service_on
from coordinator import bulk_load
from coordinator.bulk_load import FollowedAfterBuild
from coordinator.deployments import stored_books
from coordinator.deployments.books import Books
from coordinator.deployments.service import DeploymentService
from coordinator.deployments.stored_books import read_books
from coordinator.services.registry import NodeRegistry
from coordinator.store import Entry, Event, Txn
from coordinator.store import replica as replica_module
from coordinator.store.replica import Replica
from coordinator.store.sqlite import SqliteStore
from coordinator.warm import Warm
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from tests.coordinator.deployments.test_indexes import _plain_books

NODES = [f"node-{index:03}" for index in range(40)]
CONTAINERS = 12_000


def spec(name: str, count: int, cpu: str = "0.01") -> DeploymentSpec:
    return DeploymentSpec(
        name=name, image="busybox", count=count, resources=ResourcesSpec(cpu=cpu, memory="8Mi")
    )


async def fill(service: DeploymentService, containers: int) -> None:
    """``containers`` placed, and some of every other kind the books hold: stopping
    (scaled down, drained), pending (a big one drained with nowhere to go), a cordoned
    node."""
    for index in range(0, containers, 500):
        await service.deploy("fleet", spec(f"d{index}", min(500, containers - index)))
    await service.scale("fleet", "d0", 400)  # 100 stopping until their agents report
    await service.deploy("fleet", spec("big", len(NODES), cpu="20"))  # one a node
    await service.drain(NODES[0])  # cordoned; its big one pending, its small ones moved


async def _filled(path: Path) -> None:
    store = await SqliteStore.open(path)
    service = await service_on(store, NODES)
    await fill(service, CONTAINERS)
    await service.close()
    await store.close()


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store filled once for the module (it takes seconds); each test gets a copy."""
    directory = tmp_path_factory.mktemp("filled")
    asyncio.run(_filled(directory / "allot.db"))
    return directory


@pytest.fixture
async def store(filled: Path, tmp_path: Path) -> AsyncIterator[SqliteStore]:
    shutil.copytree(filled, tmp_path, dirs_exist_ok=True)
    opened = await SqliteStore.open(tmp_path / "allot.db")
    yield opened
    await opened.close()


@pytest.fixture
async def replica(store: SqliteStore) -> AsyncIterator[Replica]:
    """A standby's replica of ``store`` (which the fixture above closes)."""
    following = await Replica.follow(store)
    yield following
    assert following._follower is not None
    following._follower.cancel()


@pytest.mark.parametrize("part_entries", [1, 7, 256], ids=["parts-of-1", "parts-of-7", "default"])
async def test_a_load_in_parts_equals_the_load_at_once(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch, part_entries: int
) -> None:
    """The load at once (one part of every record: one ``change_of`` of all of them, the
    load before parts) is the reference."""
    monkeypatch.setattr(stored_books, "PART_ENTRIES", 10**9)
    at_once = await read_books(store)
    assert at_once.cordoned == {NODES[0]}
    assert len(at_once.pending) == 1
    assert len(at_once.stopping) > 100  # the scaled down and the drained
    monkeypatch.setattr(stored_books, "PART_ENTRIES", part_entries)
    in_parts = await read_books(store)
    in_parts.check_indexes()
    assert _plain_books(in_parts) == _plain_books(at_once)
    assert in_parts.pool_requested("fleet") == at_once.pool_requested("fleet")


async def test_a_standby_build_lets_its_loop_run_between_every_part(
    replica: Replica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With slices of no time the build suspends after every step, and a probe task
    beside it runs between every two: once per node record and per part of the books at
    least, and it never sees the books take in more than one part (``PART_ENTRIES``)
    of containers between two of its turns. Counted, not timed; how long a step holds
    the loop is measured by ``bench/takeover_build.py``."""
    monkeypatch.setattr(bulk_load, "SLICE_SECONDS", 0.0)
    made: list[Books] = []

    class NotedBooks(Books):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(stored_books, "Books", NotedBooks)
    seen: list[int] = []  # the containers the books held at each of the probe's turns
    building = True

    async def probe() -> None:
        while building:
            seen.append(len(made[-1].containers) if made else 0)
            await asyncio.sleep(0)

    probing = asyncio.create_task(probe())
    warm = await Warm.build(replica, share_base=100)
    building = False
    await probing
    containers = len(warm.books.containers)
    assert containers > CONTAINERS - 100
    assert len(warm.node_records()) == len(NODES)
    taken_in = [later - earlier for earlier, later in itertools.pairwise(seen)]
    assert max(taken_in) <= stored_books.PART_ENTRIES
    assert sum(1 for count in taken_in if count) >= containers // stored_books.PART_ENTRIES
    assert len(seen) >= len(NODES) + containers // stored_books.PART_ENTRIES


async def test_a_replica_takes_its_snapshot_in_with_the_loop_run_between_parts(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A standby's first read of the store: the replica takes the snapshot in
    ``INDEXED_PER_TURN`` entries at a time, a probe task beside it gets a turn between
    every two parts, and the replica then holds every key in the store's order, as a
    range of the store gives them."""
    monkeypatch.setattr(replica_module, "INDEXED_PER_TURN", 100)
    turns = 0
    turns_at_parts: list[int] = []
    index = Replica._index

    def noted_index(self: Replica, entries: list[Entry]) -> None:
        turns_at_parts.append(turns)
        index(self, entries)

    monkeypatch.setattr(Replica, "_index", noted_index)
    reading = True

    async def probe() -> None:
        nonlocal turns
        while reading:
            turns += 1
            await asyncio.sleep(0)

    probing = asyncio.create_task(probe())
    following = await Replica.follow(store)
    reading = False
    await probing
    entries = await store.range("")
    assert len(entries) > CONTAINERS  # containers and their allocations, and more
    assert len(turns_at_parts) == -(-len(entries) // 100)
    assert all(a < b for a, b in itertools.pairwise(turns_at_parts))
    assert following.scan("") == entries
    assert following._follower is not None
    following._follower.cancel()


async def test_what_the_watch_brings_during_a_build_is_taken_in(
    store: SqliteStore, replica: Replica
) -> None:
    """Deployments committed while the standby builds: once it has caught up, its books
    and records equal a fresh load of the store."""
    replica = await Replica.follow(store)
    service = await service_on(store, [])
    building = asyncio.create_task(Warm.build(replica, share_base=100))
    await asyncio.gather(*(service.deploy("late", spec(f"l{index}", 20)) for index in range(5)))
    await service.close()
    warm = await building
    await replica.caught_up(store.revision)
    state = warm.take()
    assert state is not None
    assert _plain_books(state.books) == _plain_books(await read_books(store))
    registry = await NodeRegistry.load(store, lease_seconds=3600.0)
    assert [record for record, *_ in state.nodes] == registry.all()
    assert set(state.fresh) == set(NODES)


async def test_transactions_wait_for_the_build_then_come_in_order(
    store: SqliteStore, replica: Replica
) -> None:
    told: list[list[str]] = []
    following = FollowedAfterBuild(replica, lambda events: told.append(_keys(events)))
    first = await store.commit(Txn(puts={"/x/1": b"1"}))
    second = await store.commit(Txn(puts={"/x/2": b"2"}, deletes=("/x/1",)))
    await replica.caught_up(second.revision)
    assert told == []  # still building
    following.built()
    assert told == [["/x/1"], ["/x/1", "/x/2"]]
    third = await store.commit(Txn(puts={"/x/3": b"3"}))
    await replica.caught_up(third.revision)
    assert told[-1] == ["/x/3"]
    assert first.succeeded
    assert following.stop()


async def test_a_follower_that_fails_on_what_waited_is_told_no_more(
    store: SqliteStore, replica: Replica
) -> None:
    told: list[list[str]] = []

    def take_in(events: list[Event]) -> None:
        told.append(_keys(events))
        raise ValueError("cannot follow this")

    following = FollowedAfterBuild(replica, take_in)
    done = await store.commit(Txn(puts={"/x/1": b"1"}))
    await replica.caught_up(done.revision)
    following.built()  # logs the failure; the build's caller goes on
    later = await store.commit(Txn(puts={"/x/2": b"2"}))
    await replica.caught_up(later.revision)
    assert told == [["/x/1"]]
    assert not following.stop()


def _keys(events: list[Event]) -> list[str]:
    return sorted(event.key for event in events)


async def test_a_scan_takes_every_key_under_its_prefix_and_no_other(
    store: SqliteStore, replica: Replica
) -> None:
    keys = ["/q/", "/q/a", "/q/\u00ff", "/q/\U0001f600", "/q0", "/q", "/r/a"]
    done = await store.commit(Txn(puts=dict.fromkeys(keys, b"v")))
    await replica.caught_up(done.revision)
    assert [entry.key for entry in replica.scan("/q/")] == [
        "/q/",
        "/q/a",
        "/q/\u00ff",
        "/q/\U0001f600",
    ]
    assert [entry.key for entry in replica.scan("/q")] == [
        "/q",
        "/q/",
        "/q/a",
        "/q/\u00ff",
        "/q/\U0001f600",
        "/q0",
    ]
    assert replica.scan("/p/") == []


async def test_scanning_gives_what_a_scan_gave_when_it_was_called(
    store: SqliteStore, replica: Replica
) -> None:
    prefixes = ("/nodes/", "/deployments/")
    then = [entry for prefix in prefixes for entry in replica.scan(prefix)]
    later = replica.scanning(*prefixes)
    gone = then[0].key
    done = await store.commit(Txn(puts={"/deployments/zz": b"{}"}, deletes=(gone,)))
    await replica.caught_up(done.revision)
    assert list(later) == then
    assert [entry for prefix in prefixes for entry in replica.scan(prefix)] != then
