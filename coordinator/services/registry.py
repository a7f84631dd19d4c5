"""The coordinator's view of its nodes: the records as committed, and their leases.

Every change of a record is decided on the deployments' sequencer
(``coordinator.deployments.registration``: a hello, a problems report, a lost lease),
committed in one transaction with what follows from it (the capacity of a changed
inventory, events, a lost node's release), compared on the revision of the record it
read, and only then applied here (``apply``) and logged once. So memory always equals the
store, and a failed commit changes nothing here. Heartbeats only move a node's lease
deadline in memory: they change no record, so they cost no write; a hello the store
could not record renews the lease all the same (the agent did reach its leader). After a
coordinator restart every node that was live gets a fresh lease, so its agent has one
lease length to reconnect before it is marked lost.

A record comes from a hello that passed every check of ``shared.protocol``, or from the
store. One an older version stored may break today's rules (memory -5): it is loaded as
it is, so that nothing is lost and the coordinator starts, and ``unusable`` says why
until the node's agent says hello again; nothing is placed on it meanwhile.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from coordinator.services.cluster_total import ClusterTotal
from coordinator.services.nodes import NodeLeases
from coordinator.store import Store
from shared.api.nodes import NodeHealth, NodeRecord
from shared.codec import to_json
from shared.frame_faults import fault_of
from shared.inventory import Inventory
from shared.inventory_rules import Violation, inventory_violations, summary
from shared.logs import get_logger
from shared.unconstrained import StoredDecoder

log = get_logger("allot.coordinator.services.nodes")

NODE_PREFIX = "/nodes/"
# A stored record as loaded: why it breaks today's rules (None when it keeps them), and
# its key's mod revision.
Loaded = tuple[NodeRecord, str | None, int]
# Versions of node records, each new in the process: a cache kept by version (the ready
# nodes', ``Context.ready_states``) never takes one set of records for another, be it
# the registry's or a draft's (``deployments.drafted_nodes``).
VERSIONS = itertools.count(1)
_stored_record = StoredDecoder(NodeRecord)


def loaded_record(value: bytes) -> tuple[NodeRecord, str | None]:
    """A stored record, and why it breaks today's rules (None when it keeps them)."""
    record, broken = _stored_record.decode(value)
    if broken is not None:
        return record, str(fault_of(value, broken, msgspec.json.decode))
    violations = violations_of(record.inventory)
    return record, summary(violations) if violations else None


# A fleet's hosts are of a few kinds, and no rule of ``inventory_rules`` reads the
# hostname: each kind is checked once. Checking every record of 10,000 nodes one by one
# was 12 % of a restart's CPU. Emptied when full (a fleet of more kinds checks as before).
KINDS_KEPT = 1024
_checked: dict[bytes, list[Violation]] = {}


def violations_of(inventory: Inventory) -> list[Violation]:
    """``inventory_violations(inventory)``, from the last check of an inventory that
    differs at most in its hostname when there was one (read it, never change it)."""
    kind = to_json(msgspec.structs.replace(inventory, hostname=""))
    found = _checked.get(kind)
    if found is None:
        if len(_checked) >= KINDS_KEPT:
            _checked.clear()
        found = _checked[kind] = inventory_violations(inventory)
    return found


class NodeRecords(Protocol):
    """Node records to read: the registry, a frozen copy of it, or the records a decision
    reads (``deployments.drafted_nodes``)."""

    @property
    def version(self) -> int: ...

    def get(self, name: str) -> NodeRecord | None: ...

    def all(self) -> list[NodeRecord]: ...

    def unusable(self, name: str) -> str | None: ...


@dataclass(frozen=True)
class FrozenNodes:
    records: dict[str, NodeRecord]
    why_unusable: dict[str, str]
    version: int  # the registry's when frozen

    def get(self, name: str) -> NodeRecord | None:
        return self.records.get(name)

    def all(self) -> list[NodeRecord]:
        return [self.records[name] for name in sorted(self.records)]

    def unusable(self, name: str) -> str | None:
        return self.why_unusable.get(name)


class NodeRegistry:
    def __init__(
        self,
        records: Sequence[NodeRecord],
        *,
        lease_seconds: float,
        revisions: Mapping[str, int],
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        unusable: Mapping[str, str] | None = None,
    ) -> None:
        """``revisions``: each record's key's mod revision in the store, which the commit
        of its next change compares."""
        self._records = {record.name: record for record in records}
        self._revisions = dict(revisions)
        self._unusable = dict(unusable or {})  # node -> why its record breaks today's rules
        self._total = ClusterTotal()
        for record in records:
            self._total.put(record, usable=record.name not in self._unusable)
        self.version = next(VERSIONS)  # a new one with every change of the records
        self._leases = NodeLeases(lease_seconds)
        self._wall = wall_clock
        self._monotonic = monotonic
        for record in records:
            if record.state != NodeHealth.LOST:
                self._leases.renew(record.name, now=monotonic())

    @classmethod
    async def load(
        cls,
        store: Store,
        *,
        lease_seconds: float,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        loaded: Iterable[Loaded] | None = None,
    ) -> NodeRegistry:
        """The registry of every node in the store (``loaded``, if given: its records
        already decoded and checked, by a standby); live ones get a fresh lease."""
        if loaded is None:
            loaded = [
                (*loaded_record(entry.value), entry.mod_revision)
                for entry in await store.range(NODE_PREFIX)
            ]
        records: list[NodeRecord] = []
        revisions: dict[str, int] = {}
        unusable: dict[str, str] = {}
        for record, problem, revision in loaded:
            records.append(record)
            revisions[record.name] = revision
            if problem is not None:
                unusable[record.name] = problem
                log.warning(
                    "node record breaks today's rules; nothing is placed there until its"
                    " agent says hello again",
                    node=record.name,
                    reason=problem,
                )
        log.info(
            "node records loaded",
            nodes=len(records),
            live=sum(r.state != NodeHealth.LOST for r in records),
            revision=store.revision,
        )
        return cls(
            records,
            lease_seconds=lease_seconds,
            revisions=revisions,
            wall_clock=wall_clock,
            monotonic=monotonic,
            unusable=unusable,
        )

    @property
    def lease_seconds(self) -> float:
        return self._leases.lease_seconds

    def now(self) -> float:
        """The wall-clock time the records' transitions are stamped with."""
        return self._wall()

    def get(self, name: str) -> NodeRecord | None:
        return self._records.get(name)

    def revision(self, name: str) -> int:
        """The mod revision of the node's stored record (0: none stored): what the
        commit of its next change compares."""
        return self._revisions.get(name, 0)

    def frozen(self) -> FrozenNodes:
        """The records as they are now, unchanged by what happens next: for deciding
        off the event loop, where this registry goes on changing. O(nodes)."""
        return FrozenNodes(dict(self._records), dict(self._unusable), self.version)

    def all(self) -> list[NodeRecord]:
        return [self._records[name] for name in sorted(self._records)]

    def unusable(self, name: str) -> str | None:
        """Why the node's record breaks today's rules, or None (also for an unknown node)."""
        return self._unusable.get(name)

    def total(self) -> dict[str, float]:
        """What the ready, usable nodes offer the pools (``cluster_total`` of ``usable``),
        kept as records change: O(1)."""
        return self._total.figures()

    def usable(self) -> list[NodeRecord]:
        """Every record but the unusable ones: what the cluster's totals count."""
        return [record for record in self.all() if record.name not in self._unusable]

    def apply(
        self,
        records: Mapping[str, NodeRecord],
        *,
        hellos: Iterable[str],
        deleted: Iterable[str],
        revision: int,
        revisions: Mapping[str, int],
    ) -> None:
        """Take in node records committed at ``revision`` (``revisions``: a key's own
        revision where a commit made in steps wrote it earlier) and the deletion of
        ``deleted``. The nodes whose agent said hello (``hellos``) passed every check,
        so they are no longer unusable, and their lease starts anew. O(records)."""
        for name, record in records.items():
            previous = self._records.get(name)
            self._records[name] = record
            self._revisions[name] = revisions.get(NODE_PREFIX + name, revision)
            _log_change(previous, record)
        for name in hellos:
            self._unusable.pop(name, None)
            self._leases.renew(name, now=self._monotonic())
        for name in {*records, *hellos}:
            if name in self._records:
                self._total.put(self._records[name], usable=name not in self._unusable)
        for name in deleted:
            self._total.drop(name)
            if self._records.pop(name, None) is not None:
                self._revisions.pop(name, None)
                self._unusable.pop(name, None)
                log.info("node deleted", node=name)
        self.version = next(VERSIONS)

    def heartbeat(self, name: str) -> None:
        """Extend a live node's lease; a lost node must say hello again first."""
        if self._live(name):
            self._leases.renew(name, now=self._monotonic())

    def stretch_lease(self, name: str, seconds: float) -> None:
        """A live node's lease lasts ``seconds`` from now on, renewed at once: its agent
        is being given a longer heartbeat interval (``coordinator.heartbeat_pace``)."""
        if self._live(name):
            self._leases.stretch(name, seconds, now=self._monotonic())

    def _live(self, name: str) -> bool:
        record = self._records.get(name)
        return record is not None and record.state != NodeHealth.LOST

    def expired(self) -> dict[str, tuple[NodeRecord, float]]:
        """The live nodes whose lease has ended, taken off the lease table, each with its
        record now and its lease's length: to be marked lost (``registration.mark_lost``)."""
        due = self._leases.expired(now=self._monotonic())
        return {
            name: (self._records[name], self._leases.length_of(name))
            for name in due
            if self._live(name)
        }

    def due_again(self, names: Iterable[str]) -> None:
        """Their loss was not committed, so they are not lost yet: due again at the next
        check, unless a heartbeat renewed the lease meanwhile."""
        now = self._monotonic()
        for name in names:
            if name not in self._leases:
                self._leases.set_deadline(name, now)


def _log_change(previous: NodeRecord | None, record: NodeRecord) -> None:
    inventory = record.inventory
    if previous is None:
        log.info(
            "node registered",
            node=record.name,
            state=record.state,
            cpus=len(inventory.offered()),
            numa_nodes=len(inventory.numa_nodes),
            gpus=len(inventory.gpus),
            address=record.address,
        )
        return
    if previous.inventory != inventory:
        before = previous.inventory
        log.info(
            "node inventory changed",
            node=record.name,
            cpus=f"{before.offered()} -> {inventory.offered()}",
            memory=f"{before.memory} -> {inventory.memory}",
            gpus=f"{len(before.gpus)} -> {len(inventory.gpus)}",
            mig_devices=f"{before.mig_device_count()} -> {inventory.mig_device_count()}",
        )
    if (previous.state, previous.reason) != (record.state, record.reason):
        fields: dict[str, object] = {"node": record.name, "was": previous.state}
        if record.reason:
            fields["reason"] = record.reason
        if record.state == NodeHealth.READY:
            log.info("node ready", **fields)
        else:
            log.warning(f"node {record.state}", **fields)
