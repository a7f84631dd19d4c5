"""What a node's agent reports once it has run its desired state: every desired container
running, at the desired revision -- so the containers it stopped are gone and their
allocations are let go (``coordinator.deployments.stopping``)."""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.deployments.service import DeploymentService
from coordinator.status_listing import Listing
from shared.protocol import ContainerStatus, Status


def caught_up(service: DeploymentService, node: str) -> Status:
    """The report of ``node``'s agent after it applied its newest desired state."""
    revision, desired = service.desired(node)
    running = [ContainerStatus(id=container.id, state="running") for container in desired]
    return Status(applied_revision=revision, containers=running)


async def agents_catch_up(service: DeploymentService, nodes: Iterable[str]) -> None:
    """Each of ``nodes``' agents reports it caught up; the releases are committed."""
    for node in nodes:
        report = caught_up(service, node)
        service.observe(node, report, Listing().take(report))
    await service.settled()
