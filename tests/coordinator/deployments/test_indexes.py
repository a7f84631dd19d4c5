"""The books' indexes after random sequences of decisions: each equals one rebuilt from
scratch (containers by node, deployment, namespace and pool; each pool's requests), and
the books equal what a fresh load of the store gives."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.config import PoolSettings, QuotaSettings
from coordinator.deployments.service import DeploymentService
from coordinator.errors import ApiError
from coordinator.placement import Delta
from coordinator.services.pool_service import PoolService
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import NodeRegistry
from coordinator.store.sqlite import SqliteStore
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from shared.protocol import ContainerStatus, Status
from tests.builders import make_inventory

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
        Op, kind=st.sampled_from(("cordon", "uncordon", "drain")), node=st.sampled_from(NODES)
    ),
)


def spec(name: str, count: int, cpu_bind: bool) -> DeploymentSpec:
    return DeploymentSpec(
        name=name,
        image="busybox",
        count=count,
        resources=ResourcesSpec(cpu="0.5", memory="128Mi"),
        cpu_bind=cpu_bind,
        restart_policy="always",
    )


async def load(store: SqliteStore) -> DeploymentService:
    registry = await NodeRegistry.load(store, lease_seconds=3600.0)
    quotas = await QuotaService.load(store, share_base=100, settings=QuotaSettings())
    pools = await PoolService.load(store, PoolSettings())
    return await DeploymentService.load(store, registry, quotas, pools, share_base=100)


async def run(op: Op, service: DeploymentService) -> None:
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
        case _ if picked is None:
            pass
        case "delete":
            await service.delete_container(picked.id)
        case "realloc":
            await service.realloc(picked.id, Delta(cpu="0.5", memory="-32Mi"))
        case "replace":
            await service.replace(picked.id, "busybox:2", None)
        case "end_swap" if picked.replaces:
            outcome: Literal["done", "failed"] = "done" if op.flag else "failed"
            status = ContainerStatus(id=picked.id, state="running", replacing=outcome)
            service.observe(picked.node, Status(applied_revision=1, containers=[status]))
            await service.settled()


async def scenario(ops: list[Op], directory: Path) -> None:
    store = await SqliteStore.open(directory / "allot.db")
    try:
        service = await load(store)
        registry = service._context.registry
        assert isinstance(registry, NodeRegistry)
        for node in NODES:
            inventory = make_inventory()
            await registry.hello(node, inventory=inventory, address="127.0.0.1", agent_version="t")
        for op in ops:
            with contextlib.suppress(ApiError):  # refused: nothing changed, checked below
                await run(op, service)
            service.check_indexes()
        again = await load(store)
        again.check_indexes()
        assert _plain(again) == _plain(service)
        await again.close()
        await service.close()
    finally:
        await store.close()


def _plain(service: DeploymentService) -> object:
    books = service._books
    return msgspec.to_builtins(
        {
            "containers": books.containers,
            "replaced": books.replaced,
            "deployments": {f"{ns}/{name}": d for (ns, name), d in books.deployments.items()},
            "cordoned": sorted(books.cordoned),
            "allocations": {name: sorted(state.allocations) for name, state in books.nodes.items()},
            "desired": {node: service.desired(node) for node in NODES},
        }
    )


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
    ]
    asyncio.run(scenario(ops, tmp_path))
    assert asyncio.run(_counts(tmp_path)) == (3, 2)


async def _counts(directory: Path) -> tuple[int, int]:
    store = await SqliteStore.open(directory / "allot.db")
    try:
        service = await load(store)
        await service.close()
        return len(service.containers()), len(service.deployments())
    finally:
        await store.close()
