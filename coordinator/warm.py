"""What a standby keeps current from its replica's watch for a takeover: the two parts
of the state that grow with the fleet, the deployments' books (with the containers) and
the node records (with the nodes). The rest (leases, quotas, pools, events) is loaded
from the replica when elected.

    warm = Warm(replica, share_base=100)   # O(the store), the event loop held meanwhile
    state = warm.take()          # elected: WarmState, no longer followed; None if
                                 # following the store failed (a takeover then reads it)
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.deployments.books import Books
from coordinator.deployments.context import FreshStates
from coordinator.deployments.stored_books import WarmBooks
from coordinator.services.warm_nodes import Loaded, WarmNodes
from coordinator.store.replica import Replica
from shared.api.nodes import NodeRecord


@dataclass(frozen=True)
class WarmState:
    books: Books
    nodes: list[Loaded]
    fresh: FreshStates  # each usable node's empty allocation state


class Warm:
    def __init__(self, replica: Replica, *, share_base: int) -> None:
        self._books = WarmBooks(replica)
        self._nodes = WarmNodes(replica, share_base=share_base)

    # What a standby reports in its /metrics, read while it is followed.
    @property
    def books(self) -> Books:
        return self._books.books

    def node_records(self) -> list[NodeRecord]:
        return self._nodes.records()

    def fresh_states(self) -> FreshStates:
        return self._nodes.fresh

    def take(self) -> WarmState | None:
        nodes, books = self._nodes.take(), self._books.take()
        if nodes is None or books is None:
            return None
        return WarmState(books, *nodes)
