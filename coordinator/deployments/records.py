"""The store keys of deployments and containers: ``/deployments/<namespace>/<name>``,
``/containers/<id>``, ``/allocations/<node>`` (``node_records``). The values are the API's
``DeploymentRecord`` and ``ContainerRecord`` (``shared.api``)."""

from __future__ import annotations

DEPLOYMENT_PREFIX = "/deployments/"
CONTAINER_PREFIX = "/containers/"


def container_key(container_id: str) -> str:
    return CONTAINER_PREFIX + container_id


def deployment_key(namespace: str, name: str) -> str:
    return f"{DEPLOYMENT_PREFIX}{namespace}/{name}"
