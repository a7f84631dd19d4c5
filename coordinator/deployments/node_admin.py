"""The administrator's levers on a node's allocation: SetNode, cordon, drain, and the
capacity following the node's hardware."""

from __future__ import annotations

from typing import Any

from coordinator.deployments.inventory_change import capacity_delta
from coordinator.deployments.ledger import CORDON_PREFIX, Decision, log
from coordinator.deployments.outcome import DeployRefused, refused_by_kind
from coordinator.deployments.placing import Placing
from coordinator.deployments.translate import note_for
from coordinator.deployments.units import held_extended
from coordinator.errors import NotFound
from coordinator.events import Note
from coordinator.placement import NodeState, PlacementError, set_node
from coordinator.plan_nodes import node_from_inventory
from coordinator.store import Txn
from shared.inventory import Inventory
from shared.quantity import format_memory


class NodeAdmin(Placing):
    """What a node offers, and whether it takes new containers."""

    def allocation(self, node: str) -> tuple[NodeState, bool]:
        """The node's allocation state and whether it is cordoned."""
        return self._state_of(node), node in self._cordoned

    def extended(self, node: str) -> tuple[dict[str, int], dict[str, int]]:
        """What the node offers of extended resources, and what its containers hold."""
        record = self._registry.get(node)
        if record is None:
            raise NotFound(f"no node {node}")
        there = (c for c in self._containers.values() if c.node == node)
        return dict(sorted(record.inventory.extended.items())), held_extended(there)

    async def set_node(self, node: str, mode: str, *, why: str = "", **fields: Any) -> NodeState:
        """Change what the node offers (placement spec 11), absolute or delta; refused as
        a whole when it would go below what is allocated. Running containers stay where
        they are; those on the shared pool get the new pool. ``why`` is for the event
        (default: an administrator set it)."""
        state = self._state_of(node)
        try:
            moved = set_node(state, mode, **fields)
        except PlacementError as error:
            raise refused_by_kind(error) from error
        change = Decision(nodes={node: moved.state})
        self._record_limits(change, moved.updates, node, self._clock())
        offered = f"{len(moved.state.cores)} cores, {format_memory(moved.state.memory)}"
        why = why or f"capacity set ({mode})"
        change.notes.append(Note("node", f"{why}: {offered}", node=node))
        await self._apply(change)
        return moved.state

    async def follow_inventory(self, node: str, before: Inventory, after: Inventory) -> None:
        """The node's agent reported other hardware. A node that holds allocations has
        its stored capacity moved by the difference between the two offers (an
        administrator's own changes stay); a change that would take away what its
        containers hold is not made, and that is an event. Other nodes need nothing:
        their capacity is read from the inventory when they are first used."""
        if node not in self._nodes:
            return
        offers = (
            node_from_inventory(node, i, share_base=self._share_base) for i in (before, after)
        )
        try:
            delta = capacity_delta(*offers)
        except PlacementError as error:  # the old inventory, as an older version stored it
            await self._capacity_kept(node, error.message)
            return
        if not any(delta.values()):
            return
        try:
            await self.set_node(node, "delta", why="capacity follows the hardware", **delta)
        except DeployRefused as refusal:
            await self._capacity_kept(node, refusal.message)

    async def _capacity_kept(self, node: str, reason: str) -> None:
        log.warning("node capacity kept after a hardware change", node=node, reason=reason)
        why = f"the hardware changed but the capacity was kept: {reason}"
        await self.events.record([Note("node", why, node=node)])

    async def cordon(self, node: str, cordoned: bool) -> None:
        """A cordoned node takes no new container; what runs there stays."""
        self._state_of(node)  # 404 for an unknown node
        if (node in self._cordoned) == cordoned:
            return
        note = Note("node", "cordoned" if cordoned else "uncordoned", node=node)
        staged = self.events.stage([note])
        key = CORDON_PREFIX + node
        txn = Txn(
            puts={key: b"{}", **staged.puts} if cordoned else staged.puts,
            deletes=staged.deletes if cordoned else (key, *staged.deletes),
        )
        await self._store.commit(txn)
        self.events.confirm(staged)
        if cordoned:
            self._cordoned.add(node)
        else:
            self._cordoned.discard(node)

    async def drain(self, node: str) -> dict[str, str | None]:
        """Cordon the node and move every container off it: each is released and placed
        again on the other nodes in the same commit (one with no room elsewhere is
        released all the same, and the refusal is an event). Each id released -> the id
        of the container placed in its stead (None when there was no room)."""
        await self.cordon(node, True)
        gone = [c for c in self.containers() if c.node == node]
        if not gone:
            return {}
        now = self._clock()
        change = Decision()
        for record in gone:
            self._release(change, record)
            change.notes.append(note_for("released", f"node {node} drained", record))
        moved = {
            record.id: self._place_again(change, record, now, why=f"moved off drained node {node}")
            for record in gone
        }
        await self._apply(change)
        return moved
