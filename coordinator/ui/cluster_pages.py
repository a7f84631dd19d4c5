"""The cluster at a glance (``/ui/``) and a deployment's page.

A namespace token sees the deployments of its namespaces only, as in the API; every
token sees the nodes, as ``GET /v1/nodes`` shows them to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from coordinator.deployments.container_state import container_state
from coordinator.deployments.service import DeploymentService
from coordinator.http.deployments import deployment_view
from coordinator.http.roles import principal_of
from coordinator.keys import DEPLOYMENTS, REGISTRY
from coordinator.ui.rendering import render
from shared.api.deployments import DeploymentRecord

EVENTS_SHOWN = 50


@dataclass(frozen=True)
class DeploymentRow:
    namespace: str
    name: str
    desired: int
    placed: int
    pending: int
    running: int


async def overview(request: web.Request) -> web.StreamResponse:
    service = request.config_dict[DEPLOYMENTS]
    principal = principal_of(request)
    cordoned = service.cordoned()
    nodes = [(record, record.name in cordoned) for record in request.config_dict[REGISTRY].all()]
    rows = [
        _row(service, deployment)
        for deployment in service.deployments()
        if principal.may_use(deployment.namespace)
    ]
    return render(request, "overview.html", {"nodes": nodes, "deployments": rows})


def _row(service: DeploymentService, deployment: DeploymentRecord) -> DeploymentRow:
    """A deployment's counts. O(its containers)."""
    key = (deployment.namespace, deployment.spec.name)
    placed = service.of_deployment(*key)
    running = sum(
        container_state(record, service.observed(record.id))[0] == "running" for record in placed
    )
    return DeploymentRow(
        namespace=key[0],
        name=key[1],
        desired=deployment.spec.count,
        placed=len(placed),
        pending=len(service.pending_of(*key)),
        running=running,
    )


async def deployment_page(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    service = request.config_dict[DEPLOYMENTS]
    deployment = service.deployment(namespace, name)
    # One of a namespace the token may not use is as unknown to it as a missing one.
    if deployment is None or not principal_of(request).may_use(namespace):
        return render(
            request, "missing.html", {"what": f"deployment {namespace}/{name}"}, status=404
        )
    events = service.events.events(namespace=namespace, deployment=name)[-EVENTS_SHOWN:]
    context = {"view": deployment_view(service, deployment), "events": events[::-1]}
    return render(request, "deployment.html", context)
