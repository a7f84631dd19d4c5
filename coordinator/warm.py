"""What a standby keeps current from its replica's watch for a takeover: the two parts
of the state that grow with the fleet, the deployments' books (with the containers) and
the node records (with the nodes). The rest (leases, quotas, pools, events) is loaded
from the replica when elected.

    warm = await Warm.build(replica, share_base=100)   # O(the store), in slices that
                                                       # never hold the loop long
    state = warm.take()          # elected: WarmState, no longer followed; None if
                                 # following the store failed (a takeover then reads it)
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.bulk_load import gc_paused
from coordinator.deployments.books import Books
from coordinator.deployments.context import FreshStates
from coordinator.deployments.stored_books import WarmBooks
from coordinator.services.registry import Loaded
from coordinator.services.warm_nodes import WarmNodes
from coordinator.store.replica import Replica
from shared.api.nodes import NodeRecord


@dataclass(frozen=True)
class WarmState:
    books: Books
    nodes: list[Loaded]
    fresh: FreshStates  # each usable node's empty allocation state


class Warm:
    def __init__(self, books: WarmBooks, nodes: WarmNodes) -> None:
        self._books = books
        self._nodes = nodes

    @classmethod
    async def build(cls, replica: Replica, *, share_base: int) -> Warm:
        """Both parts built from ``replica`` and followed from then on; the event loop
        runs between slices of the build (each about ``bulk_load.SLICE_SECONDS``), and
        the cyclic collector is paused over both (``bulk_load.gc_paused``)."""
        with gc_paused():
            nodes = await WarmNodes.build(replica, share_base=share_base)
            return cls(await WarmBooks.build(replica), nodes)

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
