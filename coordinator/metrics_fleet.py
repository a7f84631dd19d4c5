"""What the object collectors read: the books, the node records and each node's
allocation state, whether a leader's services or a standby's warm copy hold them.

    LeaderFleet(app[REGISTRY], app[DEPLOYMENTS])    # the leader's committed state
    StandbyFleet(warm)                              # a standby's, as it follows the store
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from coordinator.deployments.books import Books
from coordinator.deployments.service import DeploymentService
from coordinator.errors import NotFound, UnusableNode
from coordinator.placement import NodeState
from coordinator.services.registry import NodeRegistry
from coordinator.warm import Warm
from shared.api.nodes import NodePressure, NodeRecord


class Fleet(Protocol):
    @property
    def books(self) -> Books: ...

    def nodes(self) -> Sequence[NodeRecord]:
        """Every node record, by name."""
        ...

    def node_state(self, name: str) -> NodeState | None:
        """The node's allocation state (one holding nothing when it holds nothing);
        None when its record cannot give one (an unusable inventory). O(1) mostly."""
        ...

    def pressure(self, name: str) -> NodePressure | None:
        """The node's CPU pressure as its agent last reported it; None when unknown."""
        ...


class LeaderFleet:
    def __init__(self, registry: NodeRegistry, deployments: DeploymentService) -> None:
        self._registry = registry
        self._deployments = deployments

    @property
    def books(self) -> Books:
        return self._deployments.books

    def nodes(self) -> Sequence[NodeRecord]:
        return self._registry.all()

    def node_state(self, name: str) -> NodeState | None:
        state = self.books.nodes.get(name)
        if state is not None:
            return state
        try:
            return self._deployments.fresh_state(name)
        except (NotFound, UnusableNode):
            return None

    def pressure(self, name: str) -> NodePressure | None:
        return self._deployments.pressure.of(name)


class StandbyFleet:
    def __init__(self, warm: Warm) -> None:
        self._warm = warm

    @property
    def books(self) -> Books:
        return self._warm.books

    def nodes(self) -> Sequence[NodeRecord]:
        return self._warm.node_records()

    def node_state(self, name: str) -> NodeState | None:
        state = self.books.nodes.get(name)
        if state is not None:
            return state
        fresh = self._warm.fresh_states().get(name)
        return None if fresh is None else fresh[1]

    def pressure(self, name: str) -> NodePressure | None:
        """None: agents report to the leader only, and pressure is never stored."""
        return None
