"""The administrator's levers on a node's allocation: SetNode, cordon, drain, delete, and
the capacity following the node's hardware. Each function is a decider (``sequencer``)."""

from __future__ import annotations

from typing import Any

from coordinator.deployments.draft import Draft
from coordinator.deployments.inventory_change import capacity_delta
from coordinator.deployments.outcome import DeployRefused, refused_by_kind
from coordinator.deployments.pending import Pass, replace_with_stand_ins
from coordinator.deployments.translate import note_for
from coordinator.errors import NotFound
from coordinator.placement import NodeState, PlacementError, set_node
from coordinator.services.events import Note
from coordinator.services.plan_nodes import node_from_inventory
from shared.api.nodes import NodeHealth
from shared.inventory import Inventory
from shared.quantity import format_memory


def set_capacity(draft: Draft, node: str, mode: str, *, why: str = "", **fields: Any) -> NodeState:
    """Change what the node offers (placement spec 11), absolute or delta; refused as a
    whole when it would go below what is allocated. Running containers stay where they
    are; those on the shared pool get the new pool. ``why`` is for the event (default:
    an administrator set it)."""
    try:
        moved = set_node(draft.node_state(node), mode, **fields)
    except PlacementError as error:
        raise refused_by_kind(error) from error
    draft.put_node(moved.state)
    draft.record_limits(moved.updates, node)
    draft.change.capacity_changed = True
    offered = f"{len(moved.state.cores)} cores, {format_memory(moved.state.memory)}"
    draft.note(Note("node", f"{why or f'capacity set ({mode})'}: {offered}", node=node))
    return moved.state


def follow_inventory(draft: Draft, node: str, before: Inventory, after: Inventory) -> None:
    """The node's agent reported other hardware. A node that holds allocations has its
    stored capacity moved by the difference between the two offers (an administrator's
    own changes stay); a change that would take away what its containers hold is not
    made, and that is an event. Other nodes need nothing: their capacity is read from
    the inventory when they are first used."""
    if not draft.holds_allocations(node):
        return
    share_base = draft.context.share_base
    offers = (node_from_inventory(node, i, share_base=share_base) for i in (before, after))
    try:
        delta = capacity_delta(*offers)
    except PlacementError as error:  # the old inventory, as an older version stored it
        _capacity_kept(draft, node, error.message)
        return
    if not any(delta.values()):
        return
    try:
        set_capacity(draft, node, "delta", why="capacity follows the hardware", **delta)
    except DeployRefused as refusal:
        _capacity_kept(draft, node, refusal.message)


def _capacity_kept(draft: Draft, node: str, reason: str) -> None:
    why = f"the hardware changed but the capacity was kept: {reason}"
    draft.note(Note("node", why, node=node))


def cordon(draft: Draft, node: str, cordoned: bool) -> None:
    """A cordoned node takes no new container; what runs there stays."""
    draft.node_state(node)  # NotFound for an unknown node
    if draft.cordoned(node) == cordoned:
        return
    draft.change.cordons[node] = cordoned
    draft.note(Note("node", "cordoned" if cordoned else "uncordoned", node=node))


def drain(draft: Draft, node: str) -> Pass:
    """Cordon the node and move every container off it: each is released and leaves a
    pending stand-in, placed on the other nodes in the same commit where there is room;
    the rest stay pending until room appears. Drain never lowers a deployment's count."""
    cordon(draft, node, True)
    cause = f"node {node} drained"
    return replace_with_stand_ins(draft, draft.on_node(node), lambda _: cause)


def delete_node(draft: Draft, node: str) -> Pass:
    """Take a lost node off the books: its record, allocation state and cordon go. Its
    containers are handled as a lost node's are past its grace: the live ones released,
    each leaving a pending stand-in placed at once where there is room, the stopping
    ones let go (its host is taken to be gone). A node that is not lost -- its agent is
    connected, or was until its lease runs out -- is refused (409 ``node_not_lost``),
    nothing changed. If its agent comes back later, it registers as a new node."""
    record = draft.context.registry.get(node)
    if record is None or node in draft.change.deleted_nodes:
        raise NotFound(f"no node {node}", details={"node": node})
    live, stopping = draft.on_node(node), draft.stopping_on(node)
    if record.state != NodeHealth.LOST:
        held = f" and holds {len(live) + len(stopping)} container(s)" if live or stopping else ""
        raise DeployRefused(
            "conflict",
            "node_not_lost",
            f"node {node} is {record.state}{held}: only a lost node can be deleted; stop"
            " its agent (drain it first to move its containers) and delete it once it"
            " shows lost",
            "conflict",
            {"node": node, "state": str(record.state), "containers": len(live) + len(stopping)},
        )
    cause = f"node {node} deleted"
    for held_there in stopping:
        draft.release(held_there)
        draft.note(note_for("stopped", cause, held_there))
    done = replace_with_stand_ins(draft, live, lambda _: cause, stop=False)
    draft.change.delete_node(node)
    released = f"{len(live)} container(s) released, {len(stopping)} stopping one(s) let go"
    draft.note(Note("node", f"deleted by an administrator: {released}", node=node))
    return done
