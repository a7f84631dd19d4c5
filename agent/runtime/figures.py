"""What Prometheus is told of a node's containers (``agent.metrics``), from what the
runtime last observed and measured: one set of figures per allot container.

    figures_of(observed, usage={"c1": (0.25, 16 << 20, None)}, restarts={"c1": 2}, host=host)

Docker may briefly hold two containers under one allot id (a container made anew while
its predecessor is still there); the running one speaks for the id, so no series is
written twice. Containers without an allot id (not allot's) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agent.metrics import ContainerFigures
from agent.runtime.docker_engine import Inspected
from agent.runtime.plan import Host

# cores, bytes, CPU pressure (percent); None where not measured
Usage = tuple[float | None, int | None, float | None]


def figures_of(
    observed: Iterable[Inspected],
    *,
    usage: Mapping[str, Usage],
    restarts: Mapping[str, int],
    host: Host,
) -> list[ContainerFigures]:
    """Each allot container's figures, in the order first observed. O(containers)."""
    chosen: dict[str, Inspected] = {}
    for one in observed:
        container_id = one.observed.id
        if container_id and (container_id not in chosen or one.observed.state == "running"):
            chosen[container_id] = one
    figures = []
    for container_id, one in chosen.items():
        cores, memory, _ = usage.get(container_id, (None, None, None))
        figures.append(
            ContainerFigures(
                namespace=one.namespace,
                deployment=one.deployment,
                container=container_id,
                cpu_limit_cores=host.settings(one.observed.limits).cpu_limit_cores,
                restarts=restarts.get(container_id, 0),
                cpu_usage_cores=cores,
                memory_usage_bytes=memory,
            )
        )
    return figures
