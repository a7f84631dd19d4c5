"""The partial status (``Status.partial``): what changed in an agent's report since the
one it sent before. Pure, and shared by the agent and the fleet benchmark's simulated
agents, so both send the same thing.

    frame = partial_report(last_sent, report)    # only the news, and the ids gone
"""

from __future__ import annotations

import msgspec

from shared.protocol import ContainerStatus, Status


def bare(container: ContainerStatus) -> ContainerStatus:
    """``container`` without its usage and pressure figures, which move at every sample."""
    return msgspec.structs.replace(container, cpu_usage=None, memory_usage=None, cpu_pressure=None)


def partial_report(last: Status, now: Status) -> Status:
    """``now`` as a partial status against ``last``, the report last sent (with or
    without its measurements): the containers of ``now`` that ``last`` does not list or
    listed otherwise beyond their measurements, and ``gone`` the ids ``last`` listed and
    ``now`` does not. Every other field is ``now``'s. O(both reports' containers)."""
    before = {c.id: bare(c) for c in last.containers}
    listed = {c.id for c in now.containers}
    news = [c for c in now.containers if before.get(c.id) != bare(c)]
    gone = [container_id for container_id in before if container_id not in listed]
    return msgspec.structs.replace(now, containers=news, partial=True, gone=gone)
