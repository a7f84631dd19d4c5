"""The coordinator's view of its nodes: the pure transitions of ``nodes``, persisted.

Every change of a record is committed to the store before it is acted on and logged
once. Heartbeats only move a node's lease deadline in memory: they change no record,
so they cost no write. After a coordinator restart every node that was live gets a
fresh lease, so its agent has one lease length to reconnect before it is marked lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from coordinator.nodes import (
    Leases,
    NodeRecord,
    NodeState,
    on_hello,
    on_lease_expired,
    on_problems,
)
from coordinator.store import Store, Txn
from shared.codec import json_decoder, to_json
from shared.inventory import Inventory
from shared.logs import get_logger

log = get_logger("allot.coordinator.nodes")

NODE_PREFIX = "/nodes/"
_decode_record = json_decoder(NodeRecord)


class NodeRegistry:
    def __init__(
        self,
        store: Store,
        records: Sequence[NodeRecord],
        *,
        lease_seconds: float,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._records = {record.name: record for record in records}
        self._leases = Leases(lease_seconds)
        self._wall = wall_clock
        self._monotonic = monotonic
        for record in records:
            if record.state != NodeState.LOST:
                self._leases.renew(record.name, now=monotonic())

    @classmethod
    async def load(
        cls,
        store: Store,
        *,
        lease_seconds: float,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> NodeRegistry:
        """The registry of every node in the store; live ones get a fresh lease."""
        entries = await store.range(NODE_PREFIX)
        records: list[NodeRecord] = [_decode_record.decode(entry.value) for entry in entries]
        log.info(
            "node records loaded",
            nodes=len(records),
            live=sum(r.state != NodeState.LOST for r in records),
            revision=store.revision,
        )
        return cls(
            store, records, lease_seconds=lease_seconds, wall_clock=wall_clock, monotonic=monotonic
        )

    @property
    def lease_seconds(self) -> float:
        return self._leases.lease_seconds

    def get(self, name: str) -> NodeRecord | None:
        return self._records.get(name)

    def all(self) -> list[NodeRecord]:
        return [self._records[name] for name in sorted(self._records)]

    async def hello(
        self, name: str, *, inventory: Inventory, address: str, agent_version: str
    ) -> NodeRecord:
        previous = self._records.get(name)
        record = on_hello(
            previous,
            name=name,
            inventory=inventory,
            address=address,
            agent_version=agent_version,
            now=self._wall(),
        )
        await self._save([record])
        self._leases.renew(name, now=self._monotonic())
        self._log_change(previous, record)
        return record

    def heartbeat(self, name: str) -> None:
        """Extend a live node's lease; a lost node must say hello again first."""
        record = self._records.get(name)
        if record is not None and record.state != NodeState.LOST:
            self._leases.renew(name, now=self._monotonic())

    async def report_problems(self, name: str, problems: Sequence[str]) -> None:
        previous = self._records[name]
        record = on_problems(previous, problems, now=self._wall())
        if record != previous:
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
        lost = [on_lease_expired(r, lease_seconds=self.lease_seconds, now=wall) for r in previous]
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

    async def _save(self, records: Sequence[NodeRecord]) -> None:
        puts = {NODE_PREFIX + record.name: to_json(record) for record in records}
        await self._store.commit(Txn(puts=puts))
        self._records.update({record.name: record for record in records})

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
            if record.state == NodeState.READY:
                log.info("node ready", **fields)
            else:
                log.warning(f"node {record.state}", **fields)
