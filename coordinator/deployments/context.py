"""What decisions read besides the books: the node registry, the quotas and pools as
configured now, the share base and the clock. Decisions never write through it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.deployments.decision import Decision
from coordinator.deployments.drafted_nodes import DraftedNodes
from coordinator.errors import NotFound, UnusableNode
from coordinator.placement import Node, NodeState
from coordinator.services.plan_nodes import registered_node
from coordinator.services.pool_service import PoolService
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import NodeRecords, NodeRegistry
from shared.api.nodes import NodeHealth, NodeRecord
from shared.inventory import Inventory


@dataclass
class Context:
    registry: NodeRecords
    quotas: QuotaService
    pools: PoolService
    share_base: int
    clock: Callable[[], float] = time.time
    # node -> the inventory a fresh state was made from, and that state (``fresh_state``);
    # given a standby's (``warm_nodes``), a takeover's first decision need make none.
    fresh: FreshStates = field(default_factory=dict)
    # The nodes under CPU pressure now (``PressureBook.under``): new unbound containers
    # go elsewhere while other nodes have room (``placement.pressure``).
    pressured: Callable[[], frozenset[str]] = frozenset
    # ready_states' answer and the registry's version it was made at (shared by the
    # frozen copies of this context, which the deciding thread reads).
    _ready: list[tuple[int, list[tuple[str, NodeState | None]]]] = field(default_factory=list)
    # The last context ``over`` made, and the node writes it was made for.
    _over: list[tuple[NodeWrites, Context]] = field(default_factory=list)

    def frozen(self) -> Context:
        """This context over the node records as they are now (``NodeRegistry.frozen``),
        for deciding off the event loop; it shares the cache of fresh states."""
        registry = self.registry
        nodes = registry.frozen() if isinstance(registry, NodeRegistry) else registry
        return dataclasses.replace(self, registry=nodes, _over=[])

    def over(self, batch: Decision) -> Context:
        """This context with the node records ``batch`` writes on top of its own
        (``DraftedNodes``): what the next decider of the batch reads. The same context
        for the same writes, so its ready nodes are found once (O(nodes)) per change of
        the node records in a batch, not once per decider. O(the writes)."""
        if not (batch.records or batch.deleted_nodes):
            return self
        writes = (dict(batch.records), set(batch.hellos), set(batch.deleted_nodes))
        if self._over and self._over[0][0] == writes:
            return self._over[0][1]
        nodes = DraftedNodes(self.registry, *writes)
        drafted = dataclasses.replace(self, registry=nodes, _ready=[], _over=[])
        self._over[:] = [(writes, drafted)]
        return drafted

    def ready_states(self) -> list[tuple[str, NodeState | None]]:
        """Each ready node the registry does not call unusable, with its state as its
        inventory offers it (None when that cannot be made: only a node that holds
        allocations can then be used). Made again only when the node records changed
        (``NodeRecords.version``). O(nodes) then, O(1) otherwise."""
        version = self.registry.version
        if self._ready and self._ready[0][0] == version:
            return self._ready[0][1]
        ready: list[tuple[str, NodeState | None]] = []
        for name in self.ready_nodes():
            if self.registry.unusable(name) is not None:
                continue
            try:
                ready.append((name, self.fresh_state(name)))
            except UnusableNode:
                ready.append((name, None))
        self._ready[:] = [(version, ready)]
        return ready

    def ready_nodes(self) -> list[str]:
        return [r.name for r in self.registry.all() if r.state == NodeHealth.READY]

    def lost_since(self, now: float, grace_seconds: float) -> set[str]:
        """The nodes lost for at least ``grace_seconds`` at ``now``."""
        return {
            r.name
            for r in self.registry.all()
            if r.state == NodeHealth.LOST and now - r.state_since >= grace_seconds
        }

    def fresh_state(self, node: str) -> NodeState:
        """The allocation state of a registered node that holds nothing, from its
        inventory; kept until the inventory changes (most nodes of a large cluster:
        making it anew for each decision cost 68 ms a decision on 1,000 nodes,
        bench/deployments.py). ``NotFound``; ``UnusableNode`` when it cannot be made."""
        record = self.registry.get(node)
        if record is None:
            raise NotFound(f"no node {node}")
        made = self.fresh.get(node)
        if made is None or made[0] is not record.inventory:
            offered = registered_node(self.registry, node, share_base=self.share_base)
            made = self.fresh[node] = (record.inventory, empty_state(offered, self.share_base))
        return made[1]


FreshStates = dict[str, tuple[Inventory, NodeState]]
NodeWrites = tuple[dict[str, NodeRecord], set[str], set[str]]  # records, hellos, deleted


def empty_state(offered: Node, share_base: int) -> NodeState:
    """The allocation state of ``offered`` holding nothing."""
    return NodeState(
        offered.name,
        dict(offered.cores),
        numa=offered.numa,
        memory=offered.memory,
        numa_memory=offered.numa_memory,
        share_base=share_base,
    )
