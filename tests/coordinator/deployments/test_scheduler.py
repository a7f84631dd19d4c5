"""The scheduler's order when room is short (issues 17 and 26): preemptors first, then
priority, then the namespace furthest below its quota's min, then age; what waits says
why, with the nearest miss or the preempted containers it waits for."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from coordinator.deployments.service import DeploymentService
from coordinator.quotas import Quota
from coordinator.services.registry import NodeRegistry
from coordinator.store.sqlite import SqliteStore
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from tests.builders import make_inventory
from tests.coordinator.deployments.agent_reports import agents_catch_up
from tests.coordinator.deployments.test_indexes import load


def big(name: str, priority: int = 0) -> DeploymentSpec:
    """Three quarters of a two-CPU node, bound: two never share one."""
    return DeploymentSpec(
        name=name,
        image="busybox",
        resources=ResourcesSpec(cpu="1.5", memory="64Mi"),
        cpu_bind=True,
        priority=priority,
    )


async def stranded(
    directory: Path, deployments: list[tuple[str, DeploymentSpec]]
) -> DeploymentService:
    """One container of each deployment, each on a node of its own, all then drained
    and removed by their agents: every one pending, every node cordoned."""
    store = await SqliteStore.open(directory / "allot.db")
    service = await load(store)
    registry = service._context.registry
    assert isinstance(registry, NodeRegistry)
    nodes = [f"n{i}" for i in range(len(deployments))]
    for node in nodes:
        await service.hello(node, inventory=make_inventory(), address="x", agent_version="t")
        await service.cordon(node, True)
    for node, (namespace, spec) in zip(nodes, deployments, strict=True):
        await service.cordon(node, False)
        await service.deploy(namespace, spec)
        await service.drain(node)
    await agents_catch_up(service, nodes)
    return service


def test_the_higher_priority_goes_first_and_the_other_says_why(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = await stranded(tmp_path, [("team-a", big("low")), ("team-a", big("high", 5))])
        await service.cordon("n0", False)
        done = await service.schedule()
        assert list(done.placed.values()) == ["n0"]
        assert [r.deployment for r in service.containers()] == ["high"]
        (waiting,) = service.all_pending()
        assert service.why_pending(waiting.id) == (
            "needs 1.5 CPU + 64Mi on one node; the best fit, n0, has 0.5 CPU and 960.0Mi free"
        )
        await service.close()

    asyncio.run(scenario())


def test_the_namespace_furthest_below_its_min_goes_next_then_the_oldest(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = await stranded(
            tmp_path,
            [("team-a", big("first")), ("team-b", big("second")), ("team-c", big("third"))],
        )
        # team-b's quota guarantees it 4 CPUs and it uses none: it is furthest below.
        await service.put_quota(Quota("team-b", ["team-b"], {"cpu": 4}))
        await service.cordon("n0", False)
        await service.schedule()
        assert [r.deployment for r in service.containers()] == ["second"]
        await service.cordon("n1", False)
        await service.schedule()  # then by age: "first" became pending before "third"
        assert sorted(r.deployment for r in service.containers()) == ["first", "second"]
        await service.close()

    asyncio.run(scenario())


def test_a_deployments_pending_containers_take_what_room_there_is(tmp_path: Path) -> None:
    """Four drained, room for two elsewhere: the drain's pass places two (found by
    halving) and the other two wait, saying why."""

    async def scenario() -> None:
        store = await SqliteStore.open(tmp_path / "allot.db")
        service = await load(store)
        registry = service._context.registry
        assert isinstance(registry, NodeRegistry)
        for node in ("n0", "n1"):
            await service.hello(node, inventory=make_inventory(), address="x", agent_version="t")
        await service.cordon("n1", True)
        small = ResourcesSpec(cpu="0.4", memory="64Mi")
        await service.deploy(
            "team-a", msgspec.structs.replace(big("web"), count=4, resources=small)
        )
        await service.cordon("n1", False)
        await service.cordon("n0", True)
        whole = ResourcesSpec(cpu="1", memory="64Mi")
        await service.deploy("team-a", msgspec.structs.replace(big("other"), resources=whole))
        drained = await service.drain("n0")  # n1 has one core left: two of 0.4 fit there
        assert (len(drained.placed), len(drained.waiting)) == (2, 2)
        assert set(drained.placed.values()) == {"n1"}
        assert len(service.pending_of("team-a", "web")) == 2
        assert (await service.schedule()).placed == {}
        await service.close()
        await store.close()

    asyncio.run(scenario())


def test_a_preemptor_takes_the_room_its_victims_leave_before_any_other(tmp_path: Path) -> None:
    """team-b claims its min on a node team-a fills past its own: the claim is pending,
    naming its victim, until the victim's agent reports it gone; then it is placed ahead
    of an older, higher-priority container waiting for the same room."""

    async def scenario() -> None:
        half = ResourcesSpec(cpu="0.5", memory="64Mi")
        waiting = msgspec.structs.replace(big("urgent", 9), resources=half)
        service = await stranded(tmp_path, [("team-c", waiting)])  # pending, n0 cordoned
        registry = service._context.registry
        assert isinstance(registry, NodeRegistry)
        await service.hello("n1", inventory=make_inventory(), address="x", agent_version="t")
        for team in ("team-a", "team-b"):
            await service.put_quota(Quota(team, [team], {"cpu": "1"}, {"cpu": "2"}))
        borrow = DeploymentSpec(name="borrow", image="busybox", count=4, resources=half)
        await service.deploy("team-a", msgspec.structs.replace(borrow, cpu_bind=True))
        claim = msgspec.structs.replace(borrow, name="claim", count=1, cpu_bind=True)
        (pending,) = (await service.deploy("team-b", claim)).containers
        (victim,) = service._books.stopping.values()
        assert (pending.node, victim.node) == ("", "n1")
        assert service.why_pending(pending.id) == (
            f"waiting for preempted containers to stop: {victim.id} on n1"
        )
        assert not (await service.schedule()).placed  # the victim holds its core still
        assert service.why_pending(pending.id).startswith("waiting for preempted containers")

        await agents_catch_up(service, ["n1"])
        placed = service.container(pending.id)
        assert placed is not None, "placed in the pass that followed the report"
        assert placed.node == "n1"
        assert [p.deployment for p in service.all_pending()] == ["urgent"]

    asyncio.run(scenario())
