"""Node records on a real SqliteStore, written by the deployments' decisions
(``registration``) and read from the NodeRegistry, with both of its clocks under the
test's control."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from coordinator.config import PoolSettings, QuotaSettings
from coordinator.deployments.service import DeploymentService
from coordinator.services.pool_service import PoolService
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import NodeRegistry
from coordinator.store import Store, StoreError, Txn, TxnResult
from coordinator.store.delegating import DelegatingStore
from coordinator.store.sqlite import SqliteStore
from shared.api.nodes import NodeHealth, NodeRecord
from shared.cpuset import CpuSet
from shared.logs import fields_of
from tests.builders import make_inventory

LEASE = 15.0


@dataclass
class Clock:
    """Wall and monotonic time, moved together by the test."""

    wall: float = 1_700_000_000.0
    mono: float = 500.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


class FlakyStore(DelegatingStore):
    """A real store whose next ``failures`` commits raise StoreError, after ``on_failure``."""

    def __init__(self, inner: SqliteStore) -> None:
        super().__init__(inner)
        self.failures = 0
        self.on_failure: Callable[[], None] = lambda: None

    async def commit(self, txn: Txn) -> TxnResult:
        if self.failures:
            self.failures -= 1
            self.on_failure()
            raise StoreError("injected: the disk is full")
        return await super().commit(txn)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(tmp_path / "store.db")
    yield opened
    await opened.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def load(store: Store, clock: Clock) -> DeploymentService:
    """The service that decides node records, over a registry on the test's clocks."""
    registry = await NodeRegistry.load(
        store,
        lease_seconds=LEASE,
        wall_clock=lambda: clock.wall,
        monotonic=lambda: clock.mono,
    )
    quotas = await QuotaService.load(store, share_base=100, settings=QuotaSettings())
    pools = await PoolService.load(store, PoolSettings())
    return await DeploymentService.load(store, registry, quotas, pools, share_base=100)


async def persisted(store: Store, name: str) -> NodeRecord | None:
    """The record as a freshly loaded registry sees it."""
    return (await NodeRegistry.load(store, lease_seconds=LEASE)).get(name)


async def say_hello(
    service: DeploymentService, name: str = "n1", problems: list[str] | None = None
) -> NodeRecord:
    _, record = await service.hello(
        name, inventory=make_inventory(problems), address="10.0.0.7:41000", agent_version="0.1.0"
    )
    return record


async def lose(service: DeploymentService, clock: Clock, name: str = "n1") -> NodeRecord:
    """Let ``name``'s lease run out and return its lost record."""
    clock.advance(LEASE)
    [lost] = await service.expire_leases()
    assert (lost.name, lost.state) == (name, NodeHealth.LOST)
    return lost


# --- hello and heartbeats -------------------------------------------------------------


async def test_hello_registers_and_persists(store: SqliteStore, clock: Clock) -> None:
    service = await load(store, clock)

    record = await say_hello(service)

    assert record.state == NodeHealth.READY
    assert record.registered_at == record.state_since == clock.wall
    assert service.registry.get("n1") == record
    assert service.registry.all() == [record]
    assert await persisted(store, "n1") == record
    assert [e.key for e in await store.range("")] == ["/nodes/n1"]


async def test_heartbeats_keep_a_node_ready(store: SqliteStore, clock: Clock) -> None:
    service = await load(store, clock)
    await say_hello(service)

    for _ in range(5):
        clock.advance(LEASE - 1)
        service.registry.heartbeat("n1")
        assert await service.expire_leases() == []

    record = service.registry.get("n1")
    assert record is not None
    assert record.state == NodeHealth.READY
    assert store.revision == 1  # heartbeats write nothing


async def test_a_silent_node_is_lost_once_and_persisted(store: SqliteStore, clock: Clock) -> None:
    service = await load(store, clock)
    await say_hello(service)

    clock.advance(LEASE - 0.5)
    assert await service.expire_leases() == []
    clock.advance(0.5)
    lost = await service.expire_leases()

    assert [(r.name, r.state, r.reason) for r in lost] == [
        ("n1", NodeHealth.LOST, "no heartbeat for 15s")
    ]
    assert lost[0].state_since == clock.wall
    assert service.registry.get("n1") == lost[0]
    assert await persisted(store, "n1") == lost[0]
    clock.advance(LEASE)
    assert await service.expire_leases() == []


async def test_a_lost_node_needs_a_hello_not_a_heartbeat(store: SqliteStore, clock: Clock) -> None:
    service = await load(store, clock)
    await say_hello(service)
    lost = await lose(service, clock)

    service.registry.heartbeat("n1")
    assert service.registry.get("n1") == lost
    clock.advance(LEASE)
    assert await service.expire_leases() == []  # the heartbeat started no lease

    revived = await say_hello(service)
    assert (revived.state, revived.reason, revived.state_since) == (
        NodeHealth.READY,
        "",
        clock.wall,
    )
    assert await persisted(store, "n1") == revived
    await lose(service, clock)  # and the hello did start one


async def test_a_heartbeat_from_an_unknown_node_is_ignored(
    store: SqliteStore, clock: Clock
) -> None:
    service = await load(store, clock)

    service.registry.heartbeat("stranger")

    assert service.registry.get("stranger") is None
    clock.advance(LEASE)
    assert await service.expire_leases() == []


# --- problems -------------------------------------------------------------------------


async def test_problems_are_persisted_both_ways(store: SqliteStore, clock: Clock) -> None:
    service = await load(store, clock)
    await say_hello(service)

    clock.advance(1)
    await service.report_problems("n1", ["nvml unreadable", "gpu 1 missing"])
    degraded = await persisted(store, "n1")
    assert degraded is not None
    assert (degraded.state, degraded.reason, degraded.state_since) == (
        NodeHealth.DEGRADED,
        "nvml unreadable; gpu 1 missing",
        clock.wall,
    )

    clock.advance(1)
    await service.report_problems("n1", [])
    ready = await persisted(store, "n1")
    assert ready is not None
    assert (ready.state, ready.reason, ready.state_since) == (NodeHealth.READY, "", clock.wall)
    assert service.registry.get("n1") == ready


@pytest.mark.parametrize(
    "problems", [pytest.param([], id="still-healthy"), pytest.param(["x"], id="same-problem")]
)
async def test_unchanged_problems_write_nothing(
    store: SqliteStore, clock: Clock, problems: list[str]
) -> None:
    service = await load(store, clock)
    before = await say_hello(service, problems=problems)
    revision = store.revision

    await service.report_problems("n1", problems)

    assert store.revision == revision
    assert service.registry.get("n1") == before


# --- restart --------------------------------------------------------------------------


async def test_a_restart_gives_live_nodes_a_fresh_lease(store: SqliteStore, clock: Clock) -> None:
    before = await load(store, clock)
    for name in ("n1", "n2", "n3"):
        await say_hello(before, name)
    await before.report_problems("n2", ["x"])
    clock.advance(LEASE / 2)
    before.registry.heartbeat("n1")
    before.registry.heartbeat("n2")
    clock.advance(LEASE / 2)
    assert [r.name for r in await before.expire_leases()] == ["n3"]

    clock.advance(600)  # the coordinator was down far longer than a lease
    after = await load(store, clock)

    assert after.registry.all() == before.registry.all()
    assert await after.expire_leases() == []
    clock.advance(LEASE - 0.5)
    assert await after.expire_leases() == []
    clock.advance(0.5)
    revision = store.revision
    lost = await after.expire_leases()
    assert sorted(r.name for r in lost) == ["n1", "n2"]  # n3 holds no lease
    assert store.revision == revision + 1
    assert all(r.state == NodeHealth.LOST for r in after.registry.all())


# --- a failed save --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heartbeat", "lost_next"),
    [
        pytest.param("none", True, id="no-heartbeat"),
        pytest.param("during-save", False, id="heartbeat-during-failed-save"),
        pytest.param("after-save", False, id="heartbeat-after-failed-save"),
    ],
)
async def test_a_node_whose_loss_was_not_saved_is_not_lost(
    store: SqliteStore, clock: Clock, heartbeat: str, lost_next: bool
) -> None:
    flaky = FlakyStore(store)
    service = await load(flaky, clock)
    ready = await say_hello(service)
    clock.advance(LEASE)
    flaky.failures = 1
    if heartbeat == "during-save":
        flaky.on_failure = lambda: service.registry.heartbeat("n1")

    with pytest.raises(StoreError, match="disk is full"):
        await service.expire_leases()

    assert service.registry.get("n1") == ready
    assert await persisted(store, "n1") == ready
    if heartbeat == "after-save":
        service.registry.heartbeat("n1")
    retried = await service.expire_leases()
    assert [r.state for r in retried] == ([NodeHealth.LOST] if lost_next else [])
    if not lost_next:  # the heartbeat's lease still runs out in the end
        await lose(service, clock)
    assert await persisted(store, "n1") == service.registry.get("n1")


async def test_a_node_whose_record_changed_while_it_was_due_is_lost_at_the_next_check(
    store: SqliteStore, clock: Clock
) -> None:
    """Its lease ran out while a problems report was being decided: the loss, decided on
    the record from before the report, is not made on top of it, and the node is lost at
    the next check all the same (its lease was not renewed)."""
    service = await load(store, clock)
    await say_hello(service)
    clock.advance(LEASE)
    _, lost = await asyncio.gather(
        service.report_problems("n1", ["docker: engine down"]), service.expire_leases()
    )
    assert lost == []
    degraded = await persisted(store, "n1")
    assert degraded is not None
    assert degraded.state == NodeHealth.DEGRADED
    [again] = await service.expire_leases()
    assert (again.state, again.reason) == (NodeHealth.LOST, "no heartbeat for 15s")
    assert await persisted(store, "n1") == again


# --- logging --------------------------------------------------------------------------


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str, dict[str, object]]]:
    return [
        (r.levelno, r.getMessage(), dict(fields_of(r)))
        for r in caplog.records
        if r.name == "allot.coordinator.services.nodes"
    ]


async def test_state_changes_are_logged_once(
    store: SqliteStore, clock: Clock, allot_logs: pytest.LogCaptureFixture
) -> None:
    service = await load(store, clock)
    allot_logs.clear()  # "node records loaded"

    await say_hello(service)
    await say_hello(service)  # no change: nothing to say
    await service.report_problems("n1", ["nvml unreadable"])
    await lose(service, clock)
    await say_hello(service)

    logged = [(level, message) for level, message, _ in events(allot_logs)]
    assert logged == [
        (logging.INFO, "node registered"),
        (logging.WARNING, "node degraded"),
        (logging.WARNING, "node lost"),
        (logging.INFO, "node ready"),
    ]
    fields = [f for _, _, f in events(allot_logs)]
    assert fields[0]["node"] == "n1"
    assert fields[0]["state"] == NodeHealth.READY
    assert fields[1]["reason"] == "nvml unreadable"
    assert (fields[2]["reason"], fields[2]["was"]) == ("no heartbeat for 15s", "degraded")
    assert fields[3]["was"] == NodeHealth.LOST
    assert "reason" not in fields[3]


async def test_a_hello_with_other_hardware_is_logged_as_an_inventory_change(
    store: SqliteStore, clock: Clock, allot_logs: pytest.LogCaptureFixture
) -> None:
    service = await load(store, clock)
    await say_hello(service)
    allot_logs.clear()
    fewer_cpus = msgspec.structs.replace(make_inventory(), reserved=CpuSet([0]))

    await service.hello("n1", inventory=fewer_cpus, address="10.0.0.7:41000", agent_version="x")

    assert events(allot_logs) == [
        (
            logging.INFO,
            "node inventory changed",
            {
                "node": "n1",
                "cpus": "0-1 -> 1",
                "memory": f"{2**30} -> {2**30}",
                "gpus": "0 -> 0",
                "mig_devices": "0 -> 0",
            },
        )
    ]
    assert await persisted(store, "n1") == service.registry.get("n1")
    record = service.registry.get("n1")
    assert record is not None
    assert record.inventory.offered() == CpuSet([1])


# --- one node's writes, one at a time -------------------------------------------------------


async def test_a_report_during_a_hello_builds_on_the_hello(
    store: SqliteStore, clock: Clock
) -> None:
    """Without one write at a time, the report read the record from before the hello
    and, committed after it, put the old inventory back."""
    service = await load(store, clock)
    await say_hello(service)
    more_cpus = msgspec.structs.replace(make_inventory(), hostname="host-b")
    await asyncio.gather(
        service.hello("n1", inventory=more_cpus, address="10.0.0.8:41000", agent_version="2"),
        service.report_problems("n1", ["docker: engine down"]),
    )
    record = service.registry.get("n1")
    assert record is not None
    assert (record.inventory.hostname, record.state) == ("host-b", NodeHealth.DEGRADED)
    assert await persisted(store, "n1") == record


async def test_hellos_at_once_end_as_the_last_one_said(store: SqliteStore, clock: Clock) -> None:
    service = await load(store, clock)
    hosts = [msgspec.structs.replace(make_inventory(), hostname=f"h{i}") for i in range(5)]
    said = await asyncio.gather(
        *(service.hello("n1", inventory=h, address="a", agent_version="v") for h in hosts)
    )
    assert [previous.inventory.hostname if previous else None for previous, _ in said] == [
        None,
        "h0",
        "h1",
        "h2",
        "h3",
    ]
    final = service.registry.get("n1")
    assert final is not None
    assert final.inventory.hostname == "h4"
    assert await persisted(store, "n1") == final


async def test_a_hello_the_store_cannot_record_keeps_the_node_live_until_it_can(
    store: SqliteStore, clock: Clock
) -> None:
    """etcd without quorum, or a full disk: the agent reaches its leader and says hello
    again and again, each refused by the store. Its node is not lost for that, neither
    while the store is out nor when it is back; a lost node stays lost until a hello is
    recorded."""
    flaky = FlakyStore(store)
    service = await load(flaky, clock)
    ready = await say_hello(service)

    flaky.failures = 10
    for _ in range(4):
        clock.advance(LEASE - 1)
        with pytest.raises(StoreError):
            await say_hello(service)
        assert await service.expire_leases() == []
    flaky.failures = 0
    assert await service.expire_leases() == []
    assert service.registry.get("n1") == ready
    assert await say_hello(service) == ready

    await lose(service, clock)
    flaky.failures = 1
    with pytest.raises(StoreError):
        await say_hello(service)
    clock.advance(LEASE)
    assert await service.expire_leases() == []  # no lease for a lost node
    record = await persisted(store, "n1")
    assert record is not None
    assert record.state == NodeHealth.LOST
