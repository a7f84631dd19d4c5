"""The node records a standby keeps decoded from its replica's watch, with each usable
node's empty allocation state, so that a takeover decodes and checks no record (1,000
took 0.38 s) and its first decision makes no state (3,000 nodes took 0.9 s).

    warm = await WarmNodes.build(replica, share_base=100)   # in slices that let the loop run
    records, fresh = warm.take()     # elected: [(record, why unusable or None, revision)], the
                                     # states (Context.fresh); no longer followed (None if
                                     # following failed)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from coordinator.bulk_load import FollowedAfterBuild, in_slices
from coordinator.deployments.context import FreshStates, empty_state
from coordinator.errors import UnusableNode
from coordinator.services.plan_nodes import usable_node
from coordinator.services.registry import NODE_PREFIX, Loaded, loaded_record
from coordinator.store import Entry, Event
from coordinator.store.replica import Replica
from shared.api.nodes import NodeRecord


class WarmNodes:
    def __init__(self, replica: Replica, *, share_base: int) -> None:
        """No records yet, following ``replica`` from now on; ``build`` fills them."""
        self._share_base = share_base
        self._records: dict[str, Loaded] = {}
        self._fresh: FreshStates = {}
        self._following = FollowedAfterBuild(replica, self._follow)

    @classmethod
    async def build(cls, replica: Replica, *, share_base: int) -> WarmNodes:
        """The records ``replica`` holds, decoded and checked in slices that let the
        event loop run (``bulk_load.in_slices``), then kept current. The transactions
        its watch brings meanwhile are taken in once the build is done."""
        entries = replica.scanning(NODE_PREFIX)
        warm = cls(replica, share_base=share_base)  # no suspension since the scan
        await in_slices(warm._putting(entries))
        warm._following.built()
        return warm

    def records(self) -> list[NodeRecord]:
        """The node records as followed so far, by name. O(nodes)."""
        return [self._records[name][0] for name in sorted(self._records)]

    @property
    def fresh(self) -> FreshStates:
        """Each usable node's empty allocation state, as followed so far."""
        return self._fresh

    def take(self) -> tuple[list[Loaded], FreshStates] | None:
        """The records and states, no longer followed; None if following failed."""
        if not self._following.stop():
            return None
        return [self._records[name] for name in sorted(self._records)], self._fresh

    def _follow(self, events: list[Event]) -> None:
        for event in events:
            if not event.key.startswith(NODE_PREFIX):
                continue
            if event.deleted:
                name = event.key.removeprefix(NODE_PREFIX)
                self._records.pop(name, None)
                self._fresh.pop(name, None)
            else:
                self._put(event.value, event.mod_revision)

    def _putting(self, entries: Iterable[Entry]) -> Iterator[None]:
        for entry in entries:
            self._put(entry.value, entry.mod_revision)
            yield

    def _put(self, value: bytes, revision: int) -> None:
        record, problem = loaded_record(value)
        self._records[record.name] = (record, problem, revision)
        self._fresh.pop(record.name, None)
        try:
            offered = usable_node(record, problem, share_base=self._share_base)
        except UnusableNode:  # the decision that needs it says why
            return
        self._fresh[record.name] = (record.inventory, empty_state(offered, self._share_base))
