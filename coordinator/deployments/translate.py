"""Containers as the other parts see them: the quota engine (requests, candidates), the
agent (the desired container), the event log (notes), the pool tree (subtrees). Pure,
but for ``new_id``'s random suffix."""

from __future__ import annotations

import secrets
from typing import Any

from coordinator.deployments.gpus import GpuNeed
from coordinator.deployments.records import PendingRecord
from coordinator.deployments.units import UnitNeed
from coordinator.quotas import Container as QuotaContainer
from coordinator.services.events import Note
from shared.api.containers import ContainerRecord, HistoryEntry
from shared.api.deployments import DeploymentSpec
from shared.protocol import DesiredContainer, Limits
from shared.quantity import decimal_text


def subtree(pools: dict[str, Any], root: str) -> set[str]:
    """``root`` and every pool below it."""
    members = {root}
    grew = True
    while grew:
        below = {name for name, pool in pools.items() if pool.get("parent") in members}
        grew = not below <= members
        members |= below
    return members


def note_for(kind: str, reason: str, record: ContainerRecord | PendingRecord) -> Note:
    """An event of ``record``; a pending container has no node."""
    return Note(
        kind,
        reason,
        namespace=record.namespace,
        deployment=record.deployment,
        container=record.id,
        node=record.node if isinstance(record, ContainerRecord) else "",
    )


def limits_change(before: Limits, after: Limits) -> str:
    changed = [
        f"{name} {getattr(before, name)} -> {getattr(after, name)}"
        for name in before.__struct_fields__
        if getattr(before, name) != getattr(after, name)
    ]
    return "; ".join(changed) or "no change"


def new_id(namespace: str, deployment: str) -> str:
    return f"{namespace}-{deployment}-{secrets.token_hex(4)}"


def quota_requests(spec: DeploymentSpec) -> dict[str, int | str]:
    cpu = spec.resources.cpu
    wanted: dict[str, int | str] = {
        "cpu": cpu if isinstance(cpu, str) else decimal_text(cpu),
        "memory": spec.resources.memory,
    }
    return wanted | unit_need(spec).quota_requests()


def unit_need(spec: DeploymentSpec) -> UnitNeed:
    """What one container of ``spec`` needs in units: GPU devices, extended resources."""
    wanted = spec.resources
    return UnitNeed(GpuNeed(whole=wanted.gpus, mig=dict(wanted.mig)), dict(wanted.extended))


def quota_candidate(
    container_id: str, namespace: str, spec: DeploymentSpec, now: float
) -> QuotaContainer:
    """A new container of ``spec`` as the quota engine weighs it for admission."""
    return QuotaContainer(
        name=container_id,
        namespace=namespace,
        requests=quota_requests(spec),
        priority=spec.priority,
        created=now,
        running=True,
    )


def quota_container(record: ContainerRecord) -> QuotaContainer:
    return QuotaContainer(
        name=record.id,
        namespace=record.namespace,
        requests=dict(record.requests),
        priority=record.priority,
        created=record.created,
        running=True,
        node=record.node,
    )


def container_of(
    spec: DeploymentSpec,
    namespace: str,
    container_id: str,
    *,
    node: str,
    created: float,
    limits: Limits,
    history: list[HistoryEntry],
    gpus: list[str] | None = None,
    extended: dict[str, int] | None = None,
) -> ContainerRecord:
    """A container of the deployment ``spec``, as placed on ``node`` with the units it
    holds (or, with no node, as it would be: a pending one)."""
    return ContainerRecord(
        id=container_id,
        namespace=namespace,
        deployment=spec.name,
        node=node,
        image=spec.image,
        command=list(spec.command),
        env=dict(spec.env),
        labels=dict(spec.labels),
        restart_policy=spec.restart_policy,
        stop_timeout_seconds=spec.stop_timeout_seconds,
        cpu_bind=spec.cpu_bind,
        requests=quota_requests(spec),
        priority=spec.priority,
        pool=spec.pool or namespace,
        created=created,
        capacity="",
        limits=limits,
        gpus=gpus or [],
        extended=extended or {},
        history=history,
    )


def pending_container(pending: PendingRecord, spec: DeploymentSpec) -> ContainerRecord:
    """How the API shows a pending container: its deployment's, on no node, no limits."""
    history = [HistoryEntry(at=pending.since, event="pending", detail=pending.cause)]
    return container_of(
        spec,
        pending.namespace,
        pending.id,
        node="",
        created=pending.since,
        limits=Limits(),
        history=history,
    )


def desired_container(record: ContainerRecord) -> DesiredContainer:
    return DesiredContainer(
        id=record.id,
        image=record.image,
        namespace=record.namespace,
        deployment=record.deployment,
        command=record.command,
        env=record.env,
        labels=record.labels,
        limits=record.limits,
        shared_pool=not record.cpu_bind,
        restart_policy=record.restart_policy,
        capacity=record.capacity,
        gpus=record.gpus,
        extended=record.extended,
        replaces=record.replaces,
        stop_timeout_seconds=record.stop_timeout_seconds,
        pool="" if record.cpu_bind else record.pool,
    )


class DesiredOfNodes:
    """Each node's desired containers, translated once per container record: a record
    never changes (a change is a new record), so a node's desired state is its records'
    kept translations, new only for the records that are new. A push translated every
    container of the node each time it sent one changed (5 % of the coordinator's time in
    bench/fleet.py's deploy storm).

        desired = DesiredOfNodes()
        desired.of_node("n1", books.on_node("n1"))   # list[DesiredContainer], in order
    """

    def __init__(self) -> None:
        self._kept: dict[str, dict[str, tuple[ContainerRecord, DesiredContainer]]] = {}

    def of_node(self, node: str, records: list[ContainerRecord]) -> list[DesiredContainer]:
        """The translations of ``records``, the node's live containers now; only those
        are kept for the node afterwards. O(len(records))."""
        kept = self._kept.get(node, {})
        now: dict[str, tuple[ContainerRecord, DesiredContainer]] = {}
        for record in records:
            held = kept.get(record.id)
            now[record.id] = (
                held
                if held is not None and held[0] is record
                else (record, desired_container(record))
            )
        if now:
            self._kept[node] = now
        else:
            self._kept.pop(node, None)
        return [desired for _, desired in now.values()]
