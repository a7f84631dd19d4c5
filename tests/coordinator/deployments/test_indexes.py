"""The books after random sequences of decisions, nodes lost and back or deleted, quota
writes and scheduler passes (issues 16, 17, 18 and 26). After every step: each index
equals one rebuilt from scratch (containers by node, deployment, namespace and pool;
each pool's requests; pending containers by deployment); every deployment counts, placed
and pending, the containers it was last scaled to; no core piece is both bound and
shared, and no node's unbound CPU requests exceed its shared pool x ``cpu_overcommit``;
after a scheduler pass no pending container fits; the books a standby keeps from the
store's watch (``WarmBooks``) equal the deciding service's, revisions included, and the
node records it keeps (``WarmNodes``) the registry's. At the end the books equal what a
fresh load of the store gives."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.config import PoolSettings, QuotaSettings
from coordinator.deployments.books import Books
from coordinator.deployments.node_records import header, stored_allocation
from coordinator.deployments.service import DeploymentService
from coordinator.deployments.stored_books import WarmBooks
from coordinator.errors import ApiError
from coordinator.placement import Delta, NodeState
from coordinator.quotas import Quota, QuotaError
from coordinator.services.pool_service import PoolService
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import NodeRegistry
from coordinator.services.warm_nodes import WarmNodes
from coordinator.status_listing import Listing
from coordinator.store import Store
from coordinator.store.replica import Replica
from coordinator.store.sqlite import SqliteStore
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from shared.protocol import ContainerStatus, Status
from tests.builders import make_inventory
from tests.coordinator.deployments.agent_reports import agents_catch_up
from tests.coordinator.placement.test_shared_cpu_properties import check_invariants

NODES = ("n0", "n1", "n2")
NAMES = ("a", "b", "c")
NAMESPACES = ("team-a", "team-b")


@dataclass(frozen=True)
class Op:
    kind: str
    namespace: str = "team-a"
    name: str = "a"
    count: int = 1
    node: str = "n0"
    pick: int = 0
    flag: bool = False


operations = st.one_of(
    st.builds(
        Op,
        kind=st.just("deploy"),
        namespace=st.sampled_from(NAMESPACES),
        name=st.sampled_from(NAMES),
        count=st.integers(1, 4),
        flag=st.booleans(),
    ),
    st.builds(
        Op,
        kind=st.just("scale"),
        namespace=st.sampled_from(NAMESPACES),
        name=st.sampled_from(NAMES),
        count=st.integers(0, 5),
    ),
    st.builds(
        Op,
        kind=st.just("delete_deployment"),
        namespace=st.sampled_from(NAMESPACES),
        name=st.sampled_from(NAMES),
    ),
    st.builds(Op, kind=st.sampled_from(("delete", "realloc", "replace")), pick=st.integers(0, 9)),
    st.builds(Op, kind=st.just("end_swap"), pick=st.integers(0, 9), flag=st.booleans()),
    st.builds(
        Op,
        kind=st.sampled_from(
            ("cordon", "uncordon", "drain", "lose", "return", "report", "delete_node")
        ),
        node=st.sampled_from(NODES),
    ),
    st.builds(Op, kind=st.just("quota"), count=st.integers(0, 4)),
    st.builds(Op, kind=st.just("schedule")),
)
LEASE_SECONDS = 10.0


def spec(name: str, count: int, cpu_bind: bool) -> DeploymentSpec:
    return DeploymentSpec(
        name=name,
        image="busybox",
        count=count,
        resources=ResourcesSpec(cpu="0.5", memory="128Mi"),
        cpu_bind=cpu_bind,
        restart_policy="always",
    )


async def load(
    store: Store, clock: list[float] | None = None, *, pools: PoolService | None = None
) -> DeploymentService:
    """The service over ``store`` (and ``pools``, else the pools it holds); its node
    leases run on ``clock[0]`` (seconds)."""
    ticks = clock or [0.0]
    registry = await NodeRegistry.load(
        store, lease_seconds=LEASE_SECONDS, monotonic=lambda: ticks[0]
    )
    quotas = await QuotaService.load(store, share_base=100, settings=QuotaSettings())
    if pools is None:
        pools = await PoolService.load(store, PoolSettings())
    return await DeploymentService.load(store, registry, quotas, pools, share_base=100)


async def run(op: Op, service: DeploymentService, clock: list[float]) -> None:
    registry = service._context.registry
    assert isinstance(registry, NodeRegistry)
    containers = service.containers()
    picked = containers[op.pick % len(containers)] if containers else None
    match op.kind:
        case "deploy":
            await service.deploy(op.namespace, spec(op.name, op.count, op.flag))
        case "scale":
            await service.scale(op.namespace, op.name, op.count)
        case "delete_deployment":
            await service.delete_deployment(op.namespace, op.name)
        case "cordon" | "uncordon":
            await service.cordon(op.node, op.kind == "cordon")
        case "drain":
            await service.drain(op.node)
        case "delete_node":  # refused unless the node is lost; "return" registers it anew
            await service.delete_node(op.node)
        case "lose":  # its lease runs out, the others' are renewed; released at once
            clock[0] += LEASE_SECONDS + 1
            for node in NODES:
                if node != op.node:
                    registry.heartbeat(node)
            await service.expire_leases()
            if not op.flag:  # flag: still within its grace, holding its containers
                await service.release_lost(0.0)
        case "return":
            await service.hello(op.node, inventory=make_inventory(), address="x", agent_version="t")
        case "quota" if op.count:
            await service.put_quota(Quota("team-a", ["team-a"], {}, {"cpu": op.count}))
        case "quota":
            await service.delete_quota("ElasticQuota", "team-a")
        case "schedule":
            await service.schedule()
            assert not (await service.schedule()).placed, "a pass left a pending one that fits"
        case _ if picked is None:
            pass
        case "delete":
            await service.delete_container(picked.id)
        case "realloc":
            await service.realloc(picked.id, Delta(cpu="0.5", memory="-32Mi"))
        case "replace":
            await service.replace(picked.id, "busybox:2", None)
        case "report":  # the node's agent ran its desired state: its stopping ones go
            await agents_catch_up(service, [op.node])
        case "end_swap" if picked.replaces:
            outcome: Literal["done", "failed"] = "done" if op.flag else "failed"
            status = ContainerStatus(id=picked.id, state="running", replacing=outcome)
            report = Status(applied_revision=1, containers=[status])
            service.observe(picked.node, report, Listing().take(report))
            await service.settled()


async def scenario(ops: list[Op], directory: Path) -> None:
    store = await SqliteStore.open(directory / "allot.db")
    replica = await Replica.follow(store)  # a standby's view, on the same store
    clock = [0.0]
    try:
        service = await load(store, clock)
        warm = await WarmBooks.build(replica)
        warm_nodes = await WarmNodes.build(replica, share_base=100)
        registry = service._context.registry
        assert isinstance(registry, NodeRegistry)
        for node in NODES:
            inventory = make_inventory()
            await service.hello(node, inventory=inventory, address="127.0.0.1", agent_version="t")
        for op in ops:
            with contextlib.suppress(ApiError, QuotaError):  # refused: nothing changed
                await run(op, service, clock)
            service.check_indexes()
            for state in service._books.nodes.values():
                check_invariants(state)  # no bound core shared; the pool not oversold
            for deployment in service.deployments():
                key = (deployment.namespace, deployment.spec.name)
                held = len(service.of_deployment(*key)) + len(service.pending_of(*key))
                assert held == deployment.spec.count, f"{key} counts {held}"
            await replica.caught_up(store.revision)
            assert _plain_books(warm._books) == _plain_books(service._books)
            kept = {record.name: record for record, *_ in warm_nodes._records.values()}
            assert kept == {record.name: record for record in registry.all()}
            # the revisions each next change of a record compares: as the store has them
            kept_at = {record.name: at for record, _, at in warm_nodes._records.values()}
            assert kept_at == {name: registry.revision(name) for name in kept}
        taken_nodes = warm_nodes.take()
        assert taken_nodes is not None, "following the store failed"
        records, fresh = taken_nodes
        assert [record for record, *_ in records] == registry.all()
        # A leader's registry made of those records finds the states a decision would
        # make already there (the cache holds by the inventory's identity).
        taken = await NodeRegistry.load(store, lease_seconds=LEASE_SECONDS, loaded=records)
        context = dataclasses.replace(service._context, registry=taken, fresh=fresh)
        assert set(fresh) == {record.name for record in registry.all()}  # deleted ones gone
        for name, (_, state) in fresh.items():
            assert context.fresh_state(name) is state
            assert _plain_node(state) == _plain_node(service._context.fresh_state(name))
        books = warm.take()
        assert books is not None, "following the store failed"
        books.check_indexes()
        again = await load(store)
        again.check_indexes()
        assert _plain(again) == _plain(service)
        await again.close()
        await service.close()
    finally:
        await replica.close()  # and the store it follows


def _plain(service: DeploymentService) -> object:
    desired = {node: service.desired(node) for node in NODES}
    return (_plain_books(service._books), msgspec.to_builtins(desired))


def _plain_books(books: Books) -> object:
    return msgspec.to_builtins(
        {
            "containers": books.containers,
            "replaced": books.replaced,
            "stopping": books.stopping,
            "stop_revision": books.stop_revision,
            "pending": books.pending,
            "deployments": {f"{ns}/{name}": d for (ns, name), d in books.deployments.items()},
            "cordoned": sorted(books.cordoned),
            "nodes": {name: _plain_node(state) for name, state in books.nodes.items()},
            "inline_allocations": sorted(books.inline_allocations),
            "preemptions": books.preemptions,
            "allocation_revision": books.allocation_revision,
            "node_revision": books.node_revision,
        }
    )


def _plain_node(state: NodeState) -> object:
    allocations = {cid: stored_allocation(a) for cid, a in sorted(state.allocations.items())}
    return header(state), allocations


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, max_size=14))
def test_indexes_equal_a_rebuild_after_any_sequence_of_decisions(ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(scenario(ops, Path(directory)))


def test_a_fixed_sequence_leaves_what_it_decided(tmp_path: Path) -> None:
    """One sequence of the kind the random ones are made of, and what it must leave."""
    ops = [
        Op("deploy", count=3),
        Op("deploy", namespace="team-b", name="b", count=2, flag=True),
        Op("replace", pick=0),
        Op("end_swap", pick=0, flag=True),
        Op("realloc", pick=1),
        Op("drain", node="n0"),
        Op("scale", count=1),
        *(Op("report", node=node) for node in NODES),  # what stopped is gone
    ]
    asyncio.run(scenario(ops, tmp_path))
    assert asyncio.run(_counts(tmp_path)) == (3, 2)


def test_a_deleted_node_leaves_the_books_and_a_standbys_alike(tmp_path: Path) -> None:
    """A lost node deleted with its containers (live, stopping, cordoned), then back as
    a new node: the standby's books and records follow, and a fresh load agrees."""
    ops = [
        Op("cordon", node="n1"),
        Op("cordon", node="n2"),
        Op("deploy", count=4, flag=True),  # all four on n0
        Op("delete", pick=0),  # one stopping there
        Op("uncordon", node="n1"),
        Op("cordon", node="n0"),
        Op("delete_node", node="n0"),  # ready: refused
        Op("lose", node="n0", flag=True),  # within its grace: it holds them still
        Op("delete_node", node="n0"),
        Op("delete_node", node="n0"),  # gone: refused
        Op("return", node="n0"),
        Op("deploy", name="b", count=2, flag=True),
        Op("schedule"),
    ]
    asyncio.run(scenario(ops, tmp_path))
    assert asyncio.run(_counts(tmp_path)) == (6, 2)


async def _counts(directory: Path) -> tuple[int, int]:
    store = await SqliteStore.open(directory / "allot.db")
    try:
        service = await load(store)
        await service.close()
        return len(service.containers()), len(service.deployments())
    finally:
        await store.close()


def test_drained_containers_wait_pending_until_a_node_takes_them(tmp_path: Path) -> None:
    """Drain with nowhere to go keeps the count as pending containers; an uncordon and
    one scheduler pass place them; a lost node's containers do the same."""

    async def scenario() -> None:
        store = await SqliteStore.open(tmp_path / "allot.db")
        clock = [0.0]
        service = await load(store, clock)
        registry = service._context.registry
        assert isinstance(registry, NodeRegistry)
        for node in NODES:
            await service.hello(node, inventory=make_inventory(), address="x", agent_version="t")
        await service.cordon("n1", True)
        await service.cordon("n2", True)
        await service.deploy("team-a", spec("a", 3, True))
        drained = await service.drain("n0")
        assert (len(drained.stand_ins), drained.placed) == (3, {})
        assert set(drained.waiting) == set(drained.stand_ins.values())
        assert set(drained.waiting.values()) == {
            "needs 0.5 CPU + 128Mi on one node; no node takes containers: 3 cordoned (n0, n1, n2)"
        }
        pending = service.pending_of("team-a", "a")
        assert [record.node for record in pending] == ["", "", ""]
        assert service.why_pending(pending[0].id) == drained.waiting[pending[0].id]
        await service.cordon("n1", False)
        placed = await service.schedule()
        assert sorted(placed.placed) == sorted(drained.waiting)
        assert set(placed.placed.values()) == {"n1"}
        assert service.pending_of("team-a", "a") == []
        # n1 is lost: its containers wait again (n0 and n2 are cordoned), then n2 opens.
        clock[0] += LEASE_SECONDS + 1
        for node in ("n0", "n2"):
            registry.heartbeat(node)
        await service.expire_leases()
        released = await service.release_lost(0.0)
        assert (len(released.stand_ins), released.placed) == (3, {})
        await service.cordon("n2", False)
        await service.schedule()
        held = {record.node for record in service.of_deployment("team-a", "a")}
        assert (held, service.pending_of("team-a", "a")) == ({"n2"}, [])
        await service.close()
        await store.close()

    asyncio.run(scenario())
