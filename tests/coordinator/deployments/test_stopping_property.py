"""Nothing runs on what the books gave another container (issue 26): a stateful property
test over random sequences of deploys, deletes, scale-downs, drains, lost nodes, preemptions
(team-b claims its min from a borrowing team-a), and agents that apply their desired states
late and whose reports arrive late and out of order.

Each node has a model agent. It holds every desired state the coordinator published to it
(one after each step) and applies one of them, never going back; its report then waits in
a queue that delivers any report in any order. What an agent could still be running is
what it last applied plus every newer desired state it holds and may yet apply. A lost
node's host is taken to be dead: its agent starts over with nothing when it returns.

After every step:
1. the books' indexes equal a rebuild, and no core piece or memory byte of a node is
   allocated twice, stopping containers included (they keep their allocation);
2. every container an agent could still be running is held by the books on its node, live
   or stopping, with the allocation the agent was given;
3. the containers an agent could still be running never share a core piece or memory byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections import defaultdict
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.deployments.service import DeploymentService
from coordinator.errors import ApiError
from coordinator.placement import Allocation
from coordinator.quotas import Quota
from coordinator.services.registry import NodeRegistry
from coordinator.status_listing import Listing
from coordinator.store.sqlite import SqliteStore
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from shared.protocol import ContainerStatus, Status
from tests.builders import make_inventory
from tests.coordinator.deployments.test_indexes import LEASE_SECONDS, load
from tests.coordinator.placement.test_shared_cpu_properties import check_invariants

T = TypeVar("T")
NODES = ("n0", "n1")
NAMES = ("a", "b")
CPUS = ("0.5", "1")


class ModelAgent:
    """What one host's agent holds and runs."""

    def __init__(self) -> None:
        self.published: dict[int, dict[str, Allocation]] = {}  # revision -> its containers
        self.applied = 0
        self.running: dict[str, Allocation] = {}

    def could_run(self) -> dict[str, Allocation]:
        """What it runs, and what any desired state it holds and may still apply asks."""
        found = dict(self.running)
        for revision, containers in self.published.items():
            if revision > self.applied:
                found |= containers
        return found


class StoppingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = tempfile.TemporaryDirectory()
        self.clock = [0.0]
        self.store = self.run(SqliteStore.open(Path(self.directory.name) / "allot.db"))
        self.service: DeploymentService = self.run(load(self.store, self.clock))
        registry = self.service._context.registry
        assert isinstance(registry, NodeRegistry)
        self.registry = registry
        for node in NODES:
            self.run(
                self.service.hello(node, inventory=make_inventory(), address="x", agent_version="t")
            )
        # team-a borrows past a small min, so team-b's claims on its large one preempt
        for team, minimum in (("team-a", "0.5"), ("team-b", "3")):
            quota = Quota(team, [team], {"cpu": minimum}, {"cpu": "4"})
            self.run(self.service.put_quota(quota))
        self.agents = {node: ModelAgent() for node in NODES}
        self.reports: list[tuple[str, Status]] = []
        self.claims = 0  # team-b's deployments so far, each named for its number
        self.publish()

    def run(self, step: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(step)

    def teardown(self) -> None:
        self.run(self.service.close())
        self.run(self.store.close())
        self.loop.close()
        self.directory.cleanup()

    def publish(self) -> None:
        """Each node's agent is sent its desired state when it moved."""
        books = self.service._books
        for node, agent in self.agents.items():
            revision, desired = self.service.desired(node)
            if revision in agent.published or revision <= agent.applied:
                continue
            state = books.nodes.get(node)
            held = state.allocations if state is not None else {}
            agent.published[revision] = {c.id: held[c.id] for c in desired}

    def decide(self, step: Coroutine[Any, Any, object]) -> None:
        with contextlib.suppress(ApiError):  # refused: nothing changed
            self.run(step)
        self.run(self.service.settled())
        self.publish()

    # -- what users and administrators do ---------------------------------------------

    @rule(name=st.sampled_from(NAMES), count=st.integers(1, 4), cpu=st.sampled_from(CPUS))
    def deploy(self, name: str, count: int, cpu: str) -> None:
        spec = DeploymentSpec(
            name=name,
            image="busybox",
            count=count,
            resources=ResourcesSpec(cpu=cpu, memory="256Mi"),
            cpu_bind=True,
        )
        self.decide(self.service.deploy("team-a", spec))

    @rule(count=st.integers(1, 2), cpu=st.sampled_from(CPUS))
    def claim(self, count: int, cpu: str) -> None:
        """team-b claims its min: where team-a borrowed the room, it preempts."""
        spec = DeploymentSpec(
            name=f"claim-{self.claims}",
            image="busybox",
            count=count,
            resources=ResourcesSpec(cpu=cpu, memory="256Mi"),
            cpu_bind=True,
        )
        self.claims += 1
        before = len(self.service.events.events(kind="preempted"))
        self.decide(self.service.deploy("team-b", spec))
        preempted = len(self.service.events.events(kind="preempted")) > before
        event("a claim preempted" if preempted else "a claim did not preempt")

    @rule(name=st.sampled_from(NAMES), count=st.integers(0, 3))
    def scale(self, name: str, count: int) -> None:
        self.decide(self.service.scale("team-a", name, count))

    @rule(name=st.sampled_from(NAMES))
    def delete_deployment(self, name: str) -> None:
        self.decide(self.service.delete_deployment("team-a", name))

    @rule(pick=st.integers(0, 20))
    def delete_container(self, pick: int) -> None:
        live = sorted(self.service._books.containers)
        if live:
            self.decide(self.service.delete_container(live[pick % len(live)]))

    @rule(node=st.sampled_from(NODES))
    def drain(self, node: str) -> None:
        self.decide(self.service.drain(node))

    @rule(node=st.sampled_from(NODES))
    def uncordon(self, node: str) -> None:
        self.decide(self.service.cordon(node, False))

    @rule()
    def schedule(self) -> None:
        self.decide(self.service.schedule())

    @rule(node=st.sampled_from(NODES))
    def lose(self, node: str) -> None:
        """The node's host dies; past its grace its containers are released."""
        self.clock[0] += LEASE_SECONDS + 1
        for other in NODES:
            if other != node:
                self.registry.heartbeat(other)
        self.run(self.service.expire_leases())
        self.decide(self.service.release_lost(0.0))
        if node not in {record.name for record in self.registry.all() if record.state == "lost"}:
            return
        self.agents[node] = ModelAgent()

    @rule(node=st.sampled_from(NODES))
    def come_back(self, node: str) -> None:
        self.decide(
            self.service.hello(node, inventory=make_inventory(), address="x", agent_version="t")
        )

    # -- what agents do ----------------------------------------------------------------

    @rule(node=st.sampled_from(NODES), pick=st.integers(0, 10))
    def agent_applies(self, node: str, pick: int) -> None:
        """The agent applies one of the desired states it holds (not always the newest:
        it may be behind) and sends a report, which may arrive at any later time."""
        agent = self.agents[node]
        newer = sorted(revision for revision in agent.published if revision > agent.applied)
        if not newer:
            return
        revision = newer[pick % len(newer)]
        agent.running = dict(agent.published[revision])
        agent.applied = revision
        for old in [r for r in agent.published if r <= revision]:
            del agent.published[old]
        seen = [ContainerStatus(id=cid, state="running") for cid in sorted(agent.running)]
        self.reports.append((node, Status(applied_revision=revision, containers=seen)))

    @rule(pick=st.integers(0, 10))
    def report_arrives(self, pick: int) -> None:
        """Any report in the queue arrives, late and out of order."""
        if not self.reports:
            return
        node, status = self.reports.pop(pick % len(self.reports))

        async def arrives() -> None:
            self.service.observe(node, status, Listing().take(status))
            await self.service.settled()

        self.decide(arrives())

    # -- what must hold -------------------------------------------------------------------

    @invariant()
    def the_books_allocate_nothing_twice(self) -> None:
        self.service.check_indexes()
        for state in self.service._books.nodes.values():
            check_invariants(state)
            _no_piece_twice(state.allocations, state.share_base, state.memory)

    @invariant()
    def what_an_agent_may_run_is_held_by_the_books(self) -> None:
        books = self.service._books
        for node, agent in self.agents.items():
            may_run = agent.could_run()
            state = books.nodes.get(node)
            held = state.allocations if state is not None else {}
            for container_id, allocation in may_run.items():
                record = books.containers.get(container_id) or books.stopping.get(container_id)
                assert record is not None, f"{container_id} may run on {node}: let go"
                assert record.node == node, f"{container_id} may run on {node}, not its node"
                assert held.get(container_id) == allocation, f"{container_id} moved"
            _no_piece_twice(may_run, 100, 2**30)

    @invariant()
    def stopping_containers_are_not_desired(self) -> None:
        books = self.service._books
        for node in NODES:
            desired = {container.id for container in self.service.desired(node)[1]}
            assert not desired & {record.id for record in books.stopping_on(node)}


def _no_piece_twice(allocations: dict[str, Allocation], share_base: int, memory: int) -> None:
    """No core gives more pieces than it has, and memory is not given twice."""
    pieces: defaultdict[int, int] = defaultdict(int)
    for allocation in allocations.values():
        if allocation.resources.cpu_bind:
            for core, taken in allocation.plan.cores.items():
                pieces[core] += taken
    assert all(taken <= share_base for taken in pieces.values()), dict(pieces)
    assert sum(a.plan.memory for a in allocations.values()) <= memory


StoppingMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_nothing_runs_on_what_the_books_gave_away = StoppingMachine.TestCase
