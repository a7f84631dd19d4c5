"""A container's life after placement: realloc, delete, and release when its node is
lost (replacing one is ``swaps``). Each function is a decider (``sequencer``).

A lost node's containers stay allocated for a grace period (the node may come back with
them still running); then, in one commit, they are released and each leaves a pending
stand-in (``pending``), placed on the ready nodes at once where there is room. When the
node's agent returns it is told to remove what was given up, since its desired state no
longer holds it. Deleting a container leaves a stand-in too: only scaling down and
deleting the deployment lower its count.
"""

from __future__ import annotations

import msgspec

from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused, refused_by_kind
from coordinator.deployments.pending import Pass, replace_with_stand_ins
from coordinator.deployments.placing import check_admission, counted
from coordinator.deployments.sequencer import Refused
from coordinator.deployments.translate import limits_change, note_for, quota_container
from coordinator.placement import Delta, PlacementError, realloc
from shared.api.containers import ContainerRecord, HistoryEntry
from shared.quantity import format_cpu


def reallocate(draft: Draft, container_id: str, delta: Delta) -> ContainerRecord:
    """Change a running container's resources by ``delta``, in place and all or nothing
    (placement spec 10): checked against its quota's max and planned on its node (the
    agent then updates the limits without a restart)."""
    record = draft.live(container_id)
    try:
        moved = realloc(draft.node_state(record.node), container_id, delta)
    except PlacementError as error:
        note = note_for("refused", f"realloc: {error.message}", record)
        raise Refused(refused_by_kind(error), [note]) from error
    if not moved.updates:
        return record
    share_base = draft.context.share_base
    resources = moved.state.allocations[container_id].resources
    requests = {
        **record.requests,  # its devices and extended resources stay as they were
        "cpu": format_cpu(resources.cpu_request, share_base=share_base),
        "memory": resources.memory_request,
    }
    grown = msgspec.structs.replace(record, requests=requests)
    try:
        check_admission(draft, counted(draft), quota_container(grown), {}, previous=record.requests)
    except DeployRefused as refusal:
        note = note_for("refused", f"realloc: {refusal.message}", record)
        raise Refused(refusal, [note]) from refusal
    draft.put_node(moved.state)
    draft.put_container(grown)
    draft.record_limits(moved.updates, record.node)
    after = draft.change.containers[container_id]
    entry = HistoryEntry(
        at=draft.context.clock(),
        event="realloc",
        detail=limits_change(record.limits, after.limits),
    )
    done = msgspec.structs.replace(after, history=[*record.history, entry])
    draft.put_container(done)
    draft.note(note_for("realloc", entry.detail, record))
    return done


def release_lost(draft: Draft, grace_seconds: float) -> Pass:
    """Release the containers of nodes lost for at least ``grace_seconds``, each leaving
    a pending stand-in, placed at once where there is room."""
    lost = draft.context.lost_since(draft.context.clock(), grace_seconds)
    return release_nodes(draft, sorted(lost), grace_seconds)


def release_nodes(draft: Draft, nodes: list[str], grace_seconds: float) -> Pass:
    """Release the containers of ``nodes``, lost for ``grace_seconds`` at least: the
    stopping ones let go, the live ones each leaving a pending stand-in."""
    gone = [record for node in nodes for record in draft.on_node(node)]
    for record in (record for node in nodes for record in draft.stopping_on(node)):
        draft.release(record)  # its node and whatever it ran are taken to be gone
        draft.note(note_for("stopped", f"node {record.node} lost past its grace", record))
    return replace_with_stand_ins(
        draft,
        gone,
        lambda r: f"node {r.node} lost for more than {grace_seconds:g}s",
        stop=False,
    )


def delete_container(draft: Draft, container_id: str) -> Pass:
    """Stop the container and leave a pending stand-in of its deployment, placed at once
    where there is room (Nomad's ``alloc stop``); scale the deployment to have fewer.
    The container is stopping until its agent reports it gone (``let_go``)."""
    record = draft.live(container_id)
    return replace_with_stand_ins(draft, [record], lambda _: "deleted on request", event="deleted")


def delete_deployment(draft: Draft, namespace: str, name: str) -> list[str]:
    key = (namespace, name)
    draft.existing_deployment(key)
    gone = draft.of_deployment(key)
    draft.change.remove_deployment(key)
    for record in gone:
        draft.stop(record, "its deployment was deleted")
        draft.note(note_for("deleted", "its deployment was deleted", record))
    for pending in draft.pending_of(key):
        draft.drop_pending(pending.id)
    return [record.id for record in gone]
