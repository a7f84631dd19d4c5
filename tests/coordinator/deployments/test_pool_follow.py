"""The pool update's CPU weights are decided again only for pools whose target moved or
whose containers changed (it runs every period; walking every container each time held
up everything else at 100,000 containers), and a pool's CPU limit becomes a hard quota."""

from __future__ import annotations

from pathlib import Path

import msgspec

from coordinator.pools.tree import Share
from coordinator.services.registry import NodeRegistry
from coordinator.store.sqlite import SqliteStore
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from tests.builders import make_inventory
from tests.coordinator.deployments.test_indexes import load

UNBOUND = DeploymentSpec(
    name="batch",
    image="busybox",
    count=2,
    resources=ResourcesSpec(cpu="0.5", memory="16Mi"),
    cpu_bind=False,
)
TOTAL_CPU = 2.0


def share(cores: float) -> Share:
    ratio = cores / TOTAL_CPU
    return Share(strong=0.0, integral=0.0, weight_proportional=ratio, total=ratio)


async def test_an_unchanged_pool_is_not_followed_again(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await load(store)
    registry = service._context.registry
    assert isinstance(registry, NodeRegistry)
    await service.hello("n0", inventory=make_inventory(), address="a", agent_version="t")
    await service.deploy("team-a", UNBOUND)
    await service.follow_pool_shares({"team-a": share(0.5)}, TOTAL_CPU)
    limits = [(c.limits.cpu_shares, c.limits.cpu_quota) for c in service.containers()]
    # a weight for a quarter core each; the quota is each one's own limit (its request)
    assert limits == [(256, 50_000), (256, 50_000)]
    revision = store.revision
    await service.follow_pool_shares({"team-a": share(0.51)}, TOTAL_CPU)  # within 5 %
    assert store.revision == revision
    await service.scale("team-a", "batch", 3)  # the pool's containers changed
    await service.follow_pool_shares({"team-a": share(0.51)}, TOTAL_CPU)
    assert store.revision > revision
    assert [c.limits.cpu_shares for c in service.containers()] == [174] * 3
    await service.close()
    await store.close()


async def test_a_pools_cpu_limit_becomes_its_containers_quota(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await load(store)
    registry = service._context.registry
    assert isinstance(registry, NodeRegistry)
    await service.hello("n0", inventory=make_inventory(), address="a", agent_version="t")
    await service.put_pool("team-a", {"resource_limits": {"cpu": 0.6}})
    bursty = ResourcesSpec(cpu="0.25", cpu_limit="1", memory="16Mi")
    await service.deploy("team-a", msgspec.structs.replace(UNBOUND, resources=bursty))
    await service.follow_pool_shares({"team-a": share(0.5)}, TOTAL_CPU)
    limits = [(c.limits.cpu_shares, c.limits.cpu_quota) for c in service.containers()]
    # a quarter core's weight each; the pool's 0.6 core split between them, below
    # each one's own limit of 1 core
    assert limits == [(256, 30_000), (256, 30_000)]
    history = [c.history[-1] for c in service.containers()]
    assert {(h.event, h.detail) for h in history} == {
        ("pool share", "cpu_shares 1024 -> 256; cpu_quota 100000 -> 30000")
    }
    await service.close()
    await store.close()


async def test_a_new_unbound_container_weighs_its_demand_so_room_rewrites_nothing(
    tmp_path: Path,
) -> None:
    """Placed at placement's flat 1024, each new unbound container was rewritten (and
    pushed to its host again) by the next pool update: 1,000 of a 1,000-container
    deployment in the fleet benchmark."""
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await load(store)
    await service.hello("n0", inventory=make_inventory(), address="a", agent_version="t")
    await service.deploy("team-a", UNBOUND)
    assert [c.limits.cpu_shares for c in service.containers()] == [512, 512]
    revision = store.revision
    await service.follow_pool_shares({"team-a": share(1.0)}, TOTAL_CPU)  # its whole demand
    assert store.revision == revision
    assert [c.history[-1].event for c in service.containers()] == ["placed", "placed"]
    await service.close()
    await store.close()


async def test_a_shared_pool_that_moves_keeps_the_pools_weights(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await load(store)
    await service.hello("n0", inventory=make_inventory(), address="a", agent_version="t")
    await service.deploy("team-a", UNBOUND)
    await service.follow_pool_shares({"team-a": share(0.5)}, TOTAL_CPU)
    before = {c.id: c.limits for c in service.containers()}
    one_core = ResourcesSpec(cpu="1", memory="16Mi")
    bound = DeploymentSpec(
        name="bound", image="busybox", count=1, resources=one_core, cpu_bind=True
    )
    await service.deploy("team-b", bound)  # takes a core from the shared pool
    after = {c.id: c.limits for c in service.containers() if c.id in before}
    assert all(after[i].cpuset_cpus != before[i].cpuset_cpus for i in before)
    assert [limits.cpu_shares for limits in after.values()] == [256, 256]
    await service.close()
    await store.close()


async def test_a_walk_says_what_it_cost_and_no_walk_costs_nothing(tmp_path: Path) -> None:
    """``PoolService.pause_after`` stretches the update by the walk's CPU."""
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await load(store)
    await service.hello("n0", inventory=make_inventory(), address="a", agent_version="t")
    await service.deploy("team-a", UNBOUND)
    assert await service.follow_pool_shares({"team-a": share(0.5)}, TOTAL_CPU) > 0.0
    assert await service.follow_pool_shares({"team-a": share(0.5)}, TOTAL_CPU) == 0.0
    await service.close()
    await store.close()
