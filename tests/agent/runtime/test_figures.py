"""The figures of a node's containers for Prometheus: one set per allot id, measured
where measured, with each container's CPU limit on the host."""

from __future__ import annotations

from agent.metrics import ContainerFigures
from agent.runtime.docker_engine import Inspected
from agent.runtime.figures import figures_of
from agent.runtime.plan import Host, Observed
from shared.cpuset import CpuSet
from shared.protocol import Limits

HOST = Host(
    offered=CpuSet(range(1, 8)),
    online=CpuSet(range(8)),
    memory_nodes=CpuSet([0]),
    devices=frozenset(),
)


def inspected(
    container_id: str, docker_id: str, *, state: str = "running", limits: Limits | None = None
) -> Inspected:
    return Inspected(
        observed=Observed(
            docker_id=docker_id,
            id=container_id,
            spec="s",
            state=state,
            limits=limits or Limits(cpuset_cpus="2-3"),
            created="2026-11-28T00:00:00Z",
        ),
        namespace="team-a",
        deployment="web",
        started_at="",
    )


def test_each_allot_container_once_measured_where_measured() -> None:
    quota = Limits(cpuset_cpus="1-7", cpu_quota=50_000, cpu_period=100_000)
    observed = [
        inspected("web-1", "d1"),
        inspected("web-2", "d2", state="exited", limits=quota),
        inspected("", "d3"),  # not allot's
    ]
    figures = figures_of(
        observed, usage={"web-1": (0.25, 1 << 24, None)}, restarts={"web-2": 3}, host=HOST
    )
    assert figures == [
        ContainerFigures("team-a", "web", "web-1", 2.0, 0, 0.25, 1 << 24),
        ContainerFigures("team-a", "web", "web-2", 0.5, 3),
    ]


def test_of_two_containers_under_one_id_the_running_one_speaks_for_it() -> None:
    old = inspected("web-1", "d-old", state="exited", limits=Limits(cpuset_cpus="1"))
    new = inspected("web-1", "d-new", limits=Limits(cpuset_cpus="4-6"))
    for observed in ([old, new], [new, old]):
        (figures,) = figures_of(observed, usage={}, restarts={}, host=HOST)
        assert figures.cpu_limit_cores == 3.0
