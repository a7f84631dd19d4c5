"""The node records a standby keeps decoded from its replica's watch, so that a takeover
decodes and checks none (1,000 records took 0.38 s of a takeover to load).

    warm = WarmNodes(replica)
    records = warm.take()    # elected: [(record, why unusable or None)]; no longer followed
"""

from __future__ import annotations

from coordinator.services.registry import NODE_PREFIX, loaded_record
from coordinator.store import Event
from coordinator.store.replica import Replica
from shared.api.nodes import NodeRecord

Loaded = tuple[NodeRecord, str | None]


class WarmNodes:
    def __init__(self, replica: Replica) -> None:
        self._replica = replica
        self._records: dict[str, Loaded] = {}
        for entry in replica.scan(NODE_PREFIX):  # no suspension before listening
            self._records[entry.key] = loaded_record(entry.value)
        replica.listen(self._follow)

    def take(self) -> list[Loaded]:
        self._replica.unlisten(self._follow)
        return [self._records[key] for key in sorted(self._records)]

    def _follow(self, events: list[Event]) -> None:
        for event in events:
            if not event.key.startswith(NODE_PREFIX):
                continue
            if event.deleted:
                self._records.pop(event.key, None)
            else:
                self._records[event.key] = loaded_record(event.value)
