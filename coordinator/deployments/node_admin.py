"""The administrator's levers on a node's allocation: SetNode, cordon, drain, and the
capacity following the node's hardware. Each function is a decider (``sequencer``)."""

from __future__ import annotations

from typing import Any

from coordinator.deployments.draft import Draft
from coordinator.deployments.inventory_change import capacity_delta
from coordinator.deployments.outcome import DeployRefused, refused_by_kind
from coordinator.deployments.pending import Pass, replace_with_stand_ins
from coordinator.placement import NodeState, PlacementError, set_node
from coordinator.services.events import Note
from coordinator.services.plan_nodes import node_from_inventory
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
