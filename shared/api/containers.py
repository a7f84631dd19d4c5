"""A container as the coordinator stores it and the API shows it: ``/v1/containers``,
and within a deployment's answers."""

from __future__ import annotations

import msgspec

from shared.protocol import ContainerStatus, Limits
from shared.restart_policy import RestartPolicy

# The query parameters that filter ``GET /v1/containers``.
CONTAINER_FILTERS = ("namespace", "deployment", "node", "state", "capacity")


class HistoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    at: float
    event: str  # placed, realloc'd, relabelled, ...
    detail: str


class ContainerRecord(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    namespace: str
    deployment: str
    node: str
    image: str
    command: list[str]
    env: dict[str, str]
    labels: dict[str, str]
    restart_policy: RestartPolicy
    cpu_bind: bool
    requests: dict[str, int | str]  # for quotas: {"cpu": "1.7", "memory": bytes}
    priority: int
    pool: str
    created: float
    capacity: str  # "in-quota", "over-quota", or "" when no quota governs it
    limits: Limits
    gpus: list[str] = []  # GPU and MIG device UUIDs
    extended: dict[str, int] = {}  # extended resource -> units held
    history: list[HistoryEntry] = []
    # A swap (placement spec 10): the new container ``replaces`` the old one, which is
    # ``replaced_by`` it and holds no allocation until the swap is done or has failed.
    replaces: str = ""
    replaced_by: str = ""
    # Its deployment's stop timeout; None for a container stored before there was one
    # (its agent uses its own default).
    stop_timeout_seconds: int | None = None
    # Why a container no longer desired is stopping (deleted, drained, scaled down): its
    # node's agent removes it, and its allocation stays charged to the node until that
    # agent reports it gone, or the node is lost past its grace or deleted.
    stopping: str = ""


class ContainerView(msgspec.Struct, frozen=True, kw_only=True):
    record: ContainerRecord
    # pending (no node holds it), starting, running, succeeded, failed (or replaced,
    # during a swap, or stopping, until its agent reports it gone), from what the node's
    # agent last reported (coordinator.deployments.container_state)
    state: str
    observed: ContainerStatus | None
    reason: str = ""  # why it is in that state: why it is pending, the engine's error


class ContainerList(msgspec.Struct, frozen=True):
    """``GET /v1/containers``, which the coordinator builds as a plain dict."""

    containers: list[ContainerView]
