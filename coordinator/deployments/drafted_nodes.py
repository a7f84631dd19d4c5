"""The node records a decision reads: the committed ones (frozen for the batch) with the
record writes of the deciders before it in its batch on top, so that a deployment decided
after a hello in the same batch places on the inventory that hello brought, and a lost
node's release sees it lost.

    nodes = DraftedNodes(frozen, batch.records, batch.hellos, batch.deleted_nodes)
    nodes.get("n1")       # the batch's record, None if the batch deletes it, else frozen's

Reads cost what the frozen records' cost, plus the batch's writes for ``all``.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from coordinator.services.registry import VERSIONS, NodeRecords
from shared.api.nodes import NodeRecord


class DraftedNodes:
    def __init__(
        self,
        committed: NodeRecords,
        records: Mapping[str, NodeRecord],
        hellos: Set[str],
        deleted: Set[str],
    ) -> None:
        """Over ``committed``: ``records`` put, those of ``hellos`` checked by a hello
        (no longer unusable), ``deleted`` gone. Not copied: the caller gives ones
        that no longer change."""
        self._committed = committed
        self._records = records
        self._hellos = hellos
        self._deleted = deleted
        self.version = next(VERSIONS)

    def get(self, name: str) -> NodeRecord | None:
        if name in self._deleted:
            return None
        return self._records.get(name) or self._committed.get(name)

    def all(self) -> list[NodeRecord]:
        found = {record.name: record for record in self._committed.all()}
        found |= self._records
        return [found[name] for name in sorted(found.keys() - self._deleted)]

    def unusable(self, name: str) -> str | None:
        return None if name in self._hellos else self._committed.unusable(name)
