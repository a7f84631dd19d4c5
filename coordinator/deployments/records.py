"""The store keys of deployments and containers: ``/deployments/<namespace>/<name>``,
``/containers/<id>``, ``/pending/<id>``, and ``/allocations/<node>`` with
``/allocations/<node>/<id>`` (``node_records``). The values are the API's
``DeploymentRecord`` and ``ContainerRecord`` (``shared.api``), and ``PendingRecord``,
which the API shows as a ``ContainerRecord`` on no node."""

from __future__ import annotations

import msgspec

DEPLOYMENT_PREFIX = "/deployments/"
CONTAINER_PREFIX = "/containers/"
PENDING_PREFIX = "/pending/"


def container_key(container_id: str) -> str:
    return CONTAINER_PREFIX + container_id


def deployment_key(namespace: str, name: str) -> str:
    return f"{DEPLOYMENT_PREFIX}{namespace}/{name}"


def pending_key(container_id: str) -> str:
    return PENDING_PREFIX + container_id


class PendingRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A container its deployment counts but no node holds yet: it stands in for one that
    was drained, lost with its node or deleted, or it preempted containers that are still
    stopping, until the scheduler places it (with this id). Its image, command and
    resources are its deployment's when it is placed."""

    id: str
    namespace: str
    deployment: str
    since: float  # when it became pending; the scheduler places older ones first
    cause: str  # why it is pending, e.g. "node n1 drained"
    replaces: str = ""  # the container it stands in for
    # The containers it preempted (on one node), whose room is kept for it: it is placed
    # first once their agent reports them gone (``pending.schedule``).
    preempted: tuple[str, ...] = ()
