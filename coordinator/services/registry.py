"""The coordinator's view of its nodes: the pure transitions of ``nodes``, persisted.

Every change of a record is committed to the store before it is acted on and logged
once; an agent's changes of one node's record are made one at a time, each from the one
before it (two sessions of a node saying hello at once cannot interleave). Heartbeats
only move a node's lease deadline in memory: they change no record,
so they cost no write; a hello the store could not record renews the lease all the same
(the agent did reach its leader). After a coordinator restart every node that was live gets a
fresh lease, so its agent has one lease length to reconnect before it is marked lost.

A record comes from a hello that passed every check of ``shared.protocol``, or from the
store. One an older version stored may break today's rules (memory -5): it is loaded as
it is, so that nothing is lost and the coordinator starts, and ``unusable`` says why
until the node's agent says hello again; nothing is placed on it meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from coordinator.services.nodes import NodeLeases, on_hello, on_lease_expired, on_problems
from coordinator.store import Store, Txn
from shared.api.nodes import NodeHealth, NodeRecord
from shared.codec import to_json
from shared.frame_faults import fault_of
from shared.inventory import Inventory
from shared.inventory_rules import Violation, inventory_violations, summary
from shared.logs import get_logger
from shared.unconstrained import StoredDecoder

log = get_logger("allot.coordinator.services.nodes")

NODE_PREFIX = "/nodes/"
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
    """Node records to read: the registry, or a frozen copy of it."""

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
        store: Store,
        records: Sequence[NodeRecord],
        *,
        lease_seconds: float,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        unusable: Mapping[str, str] | None = None,
    ) -> None:
        self._store = store
        self._records = {record.name: record for record in records}
        self._unusable = dict(unusable or {})  # node -> why its record breaks today's rules
        self.version = 0  # grows with every change of a record or of what is unusable
        self._writing: dict[str, asyncio.Lock] = {}  # node -> held while its record changes
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
        loaded: Iterable[tuple[NodeRecord, str | None]] | None = None,
    ) -> NodeRegistry:
        """The registry of every node in the store (``loaded``, if given: its records
        already decoded and checked, by a standby); live ones get a fresh lease."""
        if loaded is None:
            loaded = [loaded_record(entry.value) for entry in await store.range(NODE_PREFIX)]
        records: list[NodeRecord] = []
        unusable: dict[str, str] = {}
        for record, problem in loaded:
            records.append(record)
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
            store,
            records,
            lease_seconds=lease_seconds,
            wall_clock=wall_clock,
            monotonic=monotonic,
            unusable=unusable,
        )

    @property
    def lease_seconds(self) -> float:
        return self._leases.lease_seconds

    def get(self, name: str) -> NodeRecord | None:
        return self._records.get(name)

    def frozen(self) -> FrozenNodes:
        """The records as they are now, unchanged by what happens next: for deciding
        off the event loop, where this registry goes on changing. O(nodes)."""
        return FrozenNodes(dict(self._records), dict(self._unusable), self.version)

    def all(self) -> list[NodeRecord]:
        return [self._records[name] for name in sorted(self._records)]

    def unusable(self, name: str) -> str | None:
        """Why the node's record breaks today's rules, or None (also for an unknown node)."""
        return self._unusable.get(name)

    def usable(self) -> list[NodeRecord]:
        """Every record but the unusable ones: what the cluster's totals count."""
        return [record for record in self.all() if record.name not in self._unusable]

    async def hello(
        self, name: str, *, inventory: Inventory, address: str, agent_version: str
    ) -> tuple[NodeRecord | None, NodeRecord]:
        """The node's record before (None for a new node) and after its agent said hello."""
        async with self._writing.setdefault(name, asyncio.Lock()):
            previous = self._records.get(name)
            record = on_hello(
                previous,
                name=name,
                inventory=inventory,
                address=address,
                agent_version=agent_version,
                now=self._wall(),
            )
            try:
                await self._save([record])
            except BaseException:
                # The agent reached this leader and only the store failed it (etcd
                # without quorum, a full disk): its node stays live while it keeps
                # trying, so the store's return does not find its lease run out.
                self.heartbeat(name)
                raise
        self._unusable.pop(name, None)  # a hello's inventory passed every check
        self.version += 1
        self._leases.renew(name, now=self._monotonic())
        self._log_change(previous, record)
        return previous, record

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

    async def report_problems(self, name: str, problems: Sequence[str]) -> None:
        async with self._writing.setdefault(name, asyncio.Lock()):
            previous = self._records.get(name)
            if previous is None:  # deleted under its session: its agent says hello again
                return
            record = on_problems(previous, problems, now=self._wall())
            if record == previous:
                return
            await self._save([record])
        self._log_change(previous, record)

    async def expire_leases(self) -> list[NodeRecord]:
        """Mark lost every node whose lease has ended; returns the new records."""
        now = self._monotonic()
        due = self._leases.expired(now=now)
        if not due:
            return []
        previous = [self._records[name] for name in due]
        wall = self._wall()
        lost = [
            on_lease_expired(r, lease_seconds=self._leases.length_of(r.name), now=wall)
            for r in previous
        ]
        try:
            await self._save(lost)
        except BaseException:
            # Not persisted, so not lost yet: due again at the next check, unless a
            # heartbeat renewed the lease meanwhile.
            for name in due:
                if name not in self._leases:
                    self._leases.set_deadline(name, now)
            raise
        for before, after in zip(previous, lost, strict=True):
            self._log_change(before, after)
        return lost

    def forget(self, names: Iterable[str]) -> None:
        """Drop the records of nodes whose deletion was committed (the deployments'
        decision deleted their keys); an agent of one that says hello later registers
        a new node."""
        for name in names:
            if self._records.pop(name, None) is not None:
                self._unusable.pop(name, None)
                self.version += 1
                log.info("node deleted", node=name)

    async def _save(self, records: Sequence[NodeRecord]) -> None:
        puts = {NODE_PREFIX + record.name: to_json(record) for record in records}
        await self._store.commit(Txn(puts=puts))
        self._records.update({record.name: record for record in records})
        self.version += 1

    @staticmethod
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
