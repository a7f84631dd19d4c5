"""The pool update's CPU quotas are decided again only for pools whose share moved or
whose containers changed (it runs every period; walking every container each time held
up everything else at 100,000 containers)."""

from __future__ import annotations

from pathlib import Path

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


async def test_an_unchanged_pool_is_not_followed_again(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    service = await load(store)
    registry = service._context.registry
    assert isinstance(registry, NodeRegistry)
    await registry.hello("n0", inventory=make_inventory(), address="a", agent_version="t")
    await service.deploy("team-a", UNBOUND)
    await service.follow_pool_shares({"team-a": 0.5})
    quotas = [c.limits.cpu_quota for c in service.containers()]
    assert quotas == [25_000, 25_000]
    revision = store.revision
    await service.follow_pool_shares({"team-a": 0.51})  # within QUOTA_CHANGE, same containers
    assert store.revision == revision
    await service.scale("team-a", "batch", 3)  # the pool's containers changed
    await service.follow_pool_shares({"team-a": 0.51})
    assert store.revision > revision
    assert [c.limits.cpu_quota for c in service.containers()] == [17_000] * 3
    await service.close()
    await store.close()
