"""A container's life after placement: realloc, delete, and release when its node is
lost (replacing one is ``swaps``).

A lost node's containers stay allocated for a grace period (the node may come back with
them still running); then, in one commit, they are released and those whose restart
policy asks for it are placed again on the ready nodes. When the node's agent returns it
is told to remove what was given up, since its desired state no longer holds it.
"""

from __future__ import annotations

import msgspec

from coordinator.deployments.ledger import Decision
from coordinator.deployments.outcome import DeployRefused, refused_by_kind
from coordinator.deployments.placing import Placing
from coordinator.deployments.records import ContainerRecord, HistoryEntry
from coordinator.deployments.translate import limits_change, note_for
from coordinator.nodes import NodeState as NodeHealth
from coordinator.placement import Delta, PlacementError, realloc
from shared.quantity import format_cpu


class Lifecycle(Placing):
    """Containers already placed: changed, removed, released."""

    async def realloc(self, container_id: str, delta: Delta) -> ContainerRecord:
        """Change a running container's resources by ``delta``, in place and all or
        nothing (placement spec 10): checked against its quota's max, planned on its
        node, committed, then pushed (the agent updates the limits without a restart)."""
        record = self._live(container_id)
        state = self._nodes[record.node]
        try:
            moved = realloc(state, container_id, delta)
        except PlacementError as error:
            refusal = refused_by_kind(error)
            await self.events.record([note_for("refused", f"realloc: {error.message}", record)])
            raise refusal from error
        if not moved.updates:
            return record
        resources = moved.state.allocations[container_id].resources
        requests = {
            **record.requests,  # its devices and extended resources stay as they were
            "cpu": format_cpu(resources.cpu_request, share_base=self._share_base),
            "memory": resources.memory_request,
        }
        grown = msgspec.structs.replace(record, requests=requests)
        try:
            self._admit_change(record, grown)
        except DeployRefused as refusal:
            await self.events.record([note_for("refused", f"realloc: {refusal.message}", record)])
            raise
        now = self._clock()
        change = Decision(nodes={record.node: moved.state})
        old_limits = record.limits
        change.containers[container_id] = grown
        self._record_limits(change, moved.updates, record.node, now)
        after = change.containers[container_id]
        entry = HistoryEntry(
            at=now, event="realloc", detail=limits_change(old_limits, after.limits)
        )
        change.containers[container_id] = msgspec.structs.replace(
            after, history=[*record.history, entry]
        )
        change.notes.append(note_for("realloc", entry.detail, record))
        await self._apply(change)
        return self._containers[container_id]

    async def release_lost(self, grace_seconds: float) -> list[str]:
        """Release the containers of nodes lost for at least ``grace_seconds`` and place
        again those whose restart policy asks for it; the ids released."""
        now = self._clock()
        lost = {
            record.name
            for record in self._registry.all()
            if record.state == NodeHealth.LOST and now - record.state_since >= grace_seconds
        }
        gone = [c for c in self.containers() if c.node in lost]
        if not gone:
            return []
        change = Decision()
        for record in gone:
            self._release(change, record)
            why = f"node {record.node} lost for more than {grace_seconds:g}s"
            change.notes.append(note_for("released", why, record))
        for record in gone:
            if record.restart_policy != "no":
                self._place_again(
                    change, record, now, why=f"in place of {record.id} on lost node {record.node}"
                )
        await self._apply(change)
        return [record.id for record in gone]

    async def delete_container(self, container_id: str) -> ContainerRecord:
        record = self._live(container_id)
        change = Decision(notes=[note_for("deleted", "on request", record)])
        self._release(change, record)
        await self._apply(change)
        return record

    async def delete_deployment(self, namespace: str, name: str) -> list[str]:
        self._deployment(namespace, name)
        change = Decision(removed_deployments=[(namespace, name)])
        gone = [c for c in self.containers() if (c.namespace, c.deployment) == (namespace, name)]
        for record in gone:
            self._release(change, record)
            change.notes.append(note_for("deleted", "its deployment was deleted", record))
        await self._apply(change)
        return [record.id for record in gone]
