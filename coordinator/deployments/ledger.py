"""The deployment service's state and how a decision is committed: the base of its layers.

    change = Decision()                      # what one decision does
    ...                                      # the layers above fill it in
    await self._apply(change)                # relabel, apply to memory, commit, push

A decision is made in one turn of the event loop on the in-memory state (no await between
reading and changing it, so two decisions can never spend the same capacity), then
committed in one store transaction: every touched node's allocation (compared with the
revision it was read at), every new or changed container and deployment, the events and
the preemption cool-down. If the commit fails the in-memory state is put back and nothing
happened. Only then are the touched nodes' agents sent their new desired state.

Quota labels (in-quota / over-quota) are recomputed for every quota with each decision and
after each quota write, and stored with the containers whose label moved; the agents get
them with the desired state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Self

import msgspec

from coordinator.deployments.node_records import (
    ALLOCATION_PREFIX,
    StoredNode,
    allocation_key,
    loaded,
    stored,
)
from coordinator.deployments.outcome import DeployRefused
from coordinator.deployments.records import (
    CONTAINER_PREFIX,
    DEPLOYMENT_PREFIX,
    ContainerRecord,
    DeploymentRecord,
    HistoryEntry,
    container_key,
    deployment_key,
)
from coordinator.deployments.translate import desired_container, note_for, quota_container
from coordinator.errors import NotFound, UnusableNode
from coordinator.events import EventLog, Note
from coordinator.nodes import NodeState as NodeHealth
from coordinator.placement import NodeState, release
from coordinator.plan_nodes import registered_node
from coordinator.pool_service import PoolService
from coordinator.quota_service import QuotaService
from coordinator.quotas import Container as QuotaContainer
from coordinator.quotas import PreemptionRecord, label_containers
from coordinator.registry import NodeRegistry
from coordinator.store import Compare, Store, Txn
from shared.codec import json_decoder, to_json
from shared.inventory import Inventory
from shared.logs import get_logger
from shared.protocol import ContainerStatus, DesiredContainer, Limits, Status
from shared.unconstrained import StoredDecoder

log = get_logger("allot.coordinator.deployments")

_decode_node: msgspec.json.Decoder[StoredNode] = json_decoder(StoredNode)
_decode_container: msgspec.json.Decoder[ContainerRecord] = json_decoder(ContainerRecord)
_stored_deployment = StoredDecoder(DeploymentRecord)
_decode_preemptions: msgspec.json.Decoder[list[PreemptionRecord]] = json_decoder(
    list[PreemptionRecord]
)

Listener = Callable[[Sequence[str]], Awaitable[None]]
CORDON_PREFIX = "/cordoned/"
# The preemptions still within the cool-down (quotas spec 8.3), rewritten with each
# decision that preempts, so a restart does not reset the cool-down.
PREEMPTIONS_KEY = "/preemptions"


@dataclass
class Decision:
    """What one decision does, applied to memory first and then committed."""

    nodes: dict[str, NodeState] = field(default_factory=dict)
    containers: dict[str, ContainerRecord] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    deployments: dict[tuple[str, str], DeploymentRecord] = field(default_factory=dict)
    removed_deployments: list[tuple[str, str]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    preemptions: list[PreemptionRecord] = field(default_factory=list)


class Ledger:
    """Nodes' allocations, containers, deployments and what the agents report, held in
    memory as the store has them; every change goes through ``_apply``."""

    def __init__(
        self,
        store: Store,
        registry: NodeRegistry,
        quotas: QuotaService,
        events: EventLog,
        pools: PoolService,
        *,
        share_base: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.events = events
        self._pools = pools
        self._registry = registry
        self._quotas = quotas
        self._share_base = share_base
        self._clock = clock
        self._nodes: dict[str, NodeState] = {}
        self._fresh: dict[str, tuple[Inventory, NodeState]] = {}  # see _state_of
        # The store revision of each node's allocation key, which a commit compares, and
        # the revision of the node's desired state (its allocation or any of its
        # containers), which only grows and goes to its agent.
        self._allocation_revision: dict[str, int] = {}
        self._node_revision: dict[str, int] = {}
        self._containers: dict[str, ContainerRecord] = {}
        self._replaced: dict[str, ContainerRecord] = {}  # being swapped out: no allocation
        self._ending: set[str] = set()  # swaps whose end is being committed (swaps.py)
        self._tasks: set[asyncio.Task[None]] = set()  # those commits, kept from the GC
        self._deployments: dict[tuple[str, str], DeploymentRecord] = {}
        self._observed: dict[str, ContainerStatus] = {}
        self._preemptions: list[PreemptionRecord] = []  # for the cool-down (quotas 8.3)
        self._cordoned: set[str] = set()
        self._listeners: list[Listener] = []
        quotas.counted = self.quota_containers
        quotas.changed = self.relabel

    @classmethod
    async def load(
        cls,
        store: Store,
        registry: NodeRegistry,
        quotas: QuotaService,
        pools: PoolService,
        *,
        share_base: int,
    ) -> Self:
        events = await EventLog.load(store, clock=time.time)
        service = cls(store, registry, quotas, events, pools, share_base=share_base)
        for entry in await store.range(ALLOCATION_PREFIX):
            state = loaded(_decode_node.decode(entry.value))
            service._nodes[state.name] = state
            service._allocation_revision[state.name] = entry.mod_revision
            service._node_revision[state.name] = entry.mod_revision
        for entry in await store.range(CONTAINER_PREFIX):
            record = _decode_container.decode(entry.value)
            (service._replaced if record.replaced_by else service._containers)[record.id] = record
            revision = service._node_revision.get(record.node, 0)
            service._node_revision[record.node] = max(revision, entry.mod_revision)
        for entry in await store.range(CORDON_PREFIX):
            service._cordoned.add(entry.key.removeprefix(CORDON_PREFIX))
        for entry in await store.range(DEPLOYMENT_PREFIX):
            deployment, broken = _stored_deployment.decode(entry.value)
            if broken is not None:  # stored before a rule it breaks; kept all the same
                log.warning("stored deployment breaks today's rules", key=entry.key, why=broken)
            service._deployments[(deployment.namespace, deployment.spec.name)] = deployment
        preemptions = await store.get(PREEMPTIONS_KEY)
        if preemptions is not None:
            service._preemptions = _decode_preemptions.decode(preemptions.value)
        log.info(
            "deployments loaded",
            deployments=len(service._deployments),
            containers=len(service._containers),
            nodes=len(service._nodes),
        )
        return service

    def subscribe(self, listener: Listener) -> None:
        """``listener(nodes)`` is awaited after every commit that changed those nodes."""
        self._listeners.append(listener)

    def containers(self) -> list[ContainerRecord]:
        return [self._containers[cid] for cid in sorted(self._containers)]

    def container(self, container_id: str) -> ContainerRecord | None:
        """A live container, or one being replaced (``replaced_by`` says by which)."""
        return self._containers.get(container_id) or self._replaced.get(container_id)

    def _live(self, container_id: str) -> ContainerRecord:
        """The live container ``container_id``, which a request may change: ``NotFound``
        when there is none, 409 ``swap_under_way`` while a new container replaces it."""
        record = self._containers.get(container_id)
        if record is not None:
            return record
        old = self._replaced.get(container_id)
        if old is None:
            raise NotFound(f"no container {container_id}", details={"container": container_id})
        raise DeployRefused(
            "invalid",
            "swap_under_way",
            f"{container_id} is being replaced by {old.replaced_by}; wait until the swap"
            f" is done, or change {old.replaced_by}",
            409,
            {"container": container_id, "replaced_by": old.replaced_by},
        )

    def _deployment(self, namespace: str, name: str) -> DeploymentRecord:
        """``NotFound`` when the deployment is not there (deleted by a request that came
        first)."""
        deployment = self._deployments.get((namespace, name))
        if deployment is None:
            raise NotFound(f"no deployment {namespace}/{name}")
        return deployment

    def observed(self, container_id: str) -> ContainerStatus | None:
        return self._observed.get(container_id)

    def deployments(self) -> list[DeploymentRecord]:
        return [self._deployments[key] for key in sorted(self._deployments)]

    def deployment(self, namespace: str, name: str) -> DeploymentRecord | None:
        return self._deployments.get((namespace, name))

    def desired(self, node: str) -> tuple[int, list[DesiredContainer]]:
        """The node's desired state and its revision (which only grows)."""
        on_node = [c for c in self.containers() if c.node == node]
        return self._node_revision.get(node, 0), [desired_container(c) for c in on_node]

    def observe(self, node: str, status: Status) -> None:
        """What the node's agent reports it holds."""
        for container in status.containers:
            record = self._containers.get(container.id)
            if record is not None and record.node == node:
                self._observed[container.id] = container

    def quota_containers(self) -> list[QuotaContainer]:
        """Every container holding an allocation, as the quota engine counts them."""
        return [quota_container(c) for c in self.containers()]

    def _candidates(self) -> list[NodeState]:
        """The allocation states of the ready nodes that are not cordoned, but for those
        that cannot be used (``skipped_nodes``)."""
        usable = map(self._usable, self._ready_uncordoned())
        return [state for state in usable if isinstance(state, NodeState)]

    def skipped_nodes(self) -> dict[str, str]:
        """The ready, uncordoned nodes placement leaves out, and why: their records
        break today's rules (``NodeRegistry.unusable``), so nothing is placed there."""
        usable = map(self._usable, self._ready_uncordoned())
        return {found.node: found.reason for found in usable if isinstance(found, UnusableNode)}

    def _ready_uncordoned(self) -> list[str]:
        ready = (r.name for r in self._registry.all() if r.state == NodeHealth.READY)
        return [name for name in ready if name not in self._cordoned]

    def _usable(self, node: str) -> NodeState | UnusableNode:
        """The node's allocation state to place on, or why it cannot be used (even one
        that holds containers takes no more while its record breaks the rules)."""
        problem = self._registry.unusable(node)
        if problem is not None:
            return UnusableNode(node, problem)
        try:
            return self._state_of(node)
        except UnusableNode as unusable:
            return unusable

    def _state_of(self, node: str) -> NodeState:
        """A registered node's allocation state; one that holds nothing yet is made from
        its inventory, and kept until the inventory changes (most nodes of a large
        cluster: making it anew for each decision cost 68 ms a decision on 1,000 nodes,
        bench/deployments.py). ``UnusableNode`` when it cannot be made."""
        state = self._nodes.get(node)
        if state is not None:
            return state
        record = self._registry.get(node)
        if record is None:
            raise NotFound(f"no node {node}")
        made = self._fresh.get(node)
        if made is None or made[0] is not record.inventory:
            offered = registered_node(self._registry, node, share_base=self._share_base)
            fresh = NodeState(
                node,
                dict(offered.cores),
                numa=offered.numa,
                memory=offered.memory,
                numa_memory=offered.numa_memory,
                share_base=self._share_base,
            )
            made = self._fresh[node] = (record.inventory, fresh)
        return made[1]

    def _nodes_state(self, change: Decision, node: str) -> NodeState:
        return change.nodes[node] if node in change.nodes else self._state_of(node)

    def _record_limits(
        self, change: Decision, updates: dict[str, Limits], node: str, now: float
    ) -> None:
        """New Docker settings of containers already there (a shared pool that moved)."""
        for container_id, limits in updates.items():
            record = change.containers.get(container_id) or self._containers.get(container_id)
            if record is None or record.limits == limits:
                continue
            entry = HistoryEntry(at=now, event="limits", detail=f"shared pool on {node} moved")
            change.containers[container_id] = msgspec.structs.replace(
                record, limits=limits, history=[*record.history, entry]
            )

    def _release(self, change: Decision, record: ContainerRecord) -> None:
        state = self._nodes_state(change, record.node)
        if record.id in state.allocations:
            moved = release(state, record.id)
            change.nodes[record.node] = moved.state
            self._record_limits(change, moved.updates, record.node, self._clock())
        change.containers.pop(record.id, None)
        change.removed.append(record.id)
        if record.replaces in self._replaced:  # mid-swap: the old one goes with it
            change.removed.append(record.replaces)

    async def _apply(self, change: Decision) -> None:
        """Relabel, apply to memory, commit; on a failed commit put memory back."""
        self._relabel(change)
        before = (
            dict(self._nodes),
            dict(self._containers),
            dict(self._deployments),
            dict(self._replaced),
        )
        compares = tuple(
            Compare(allocation_key(node), self._allocation_revision.get(node, 0))
            for node in sorted(change.nodes)
        )
        puts = {allocation_key(n): to_json(stored(s)) for n, s in change.nodes.items()}
        puts |= {container_key(cid): to_json(r) for cid, r in change.containers.items()}
        puts |= {
            deployment_key(ns, name): to_json(d) for (ns, name), d in change.deployments.items()
        }
        staged = self.events.stage(change.notes)
        puts |= staged.puts
        preemptions = self._preemptions
        if change.preemptions:
            recent = self._clock() - self._quotas.cooldown_s
            preemptions = [r for r in self._preemptions if r["at"] > recent]
            preemptions.extend(change.preemptions)
            puts[PREEMPTIONS_KEY] = to_json(preemptions)
        deletes = (
            tuple(container_key(cid) for cid in change.removed)
            + tuple(deployment_key(ns, name) for ns, name in change.removed_deployments)
            + staged.deletes
        )
        self._nodes.update(change.nodes)
        for cid, record in change.containers.items():
            held, apart = (self._replaced, self._containers)
            if not record.replaced_by:
                held, apart = apart, held
            held[cid] = record
            apart.pop(cid, None)
        for cid in change.removed:
            self._containers.pop(cid, None)
            self._replaced.pop(cid, None)
            self._observed.pop(cid, None)
        self._deployments.update(change.deployments)
        for key in change.removed_deployments:
            self._deployments.pop(key, None)
        try:
            result = await self._store.commit(Txn(compares=compares, puts=puts, deletes=deletes))
        except BaseException:
            self._nodes, self._containers, self._deployments, self._replaced = before
            raise
        if not result.succeeded:
            self._nodes, self._containers, self._deployments, self._replaced = before
            raise DeployRefused(
                "conflict",
                "conflict",
                "another writer changed these nodes' allocations; try again",
                409,
                {"nodes": sorted(change.nodes)},
            )
        self.events.confirm(staged)
        self._preemptions = preemptions
        touched = set(change.nodes) | {r.node for r in change.containers.values()}
        removed_nodes = {before[1][cid].node for cid in change.removed if cid in before[1]}
        touched |= removed_nodes
        for node in change.nodes:
            self._allocation_revision[node] = result.revision
        for node in touched:
            self._node_revision[node] = result.revision
        for listener in self._listeners:
            await listener(sorted(touched))

    async def relabel(self) -> None:
        """Commit the labels every quota gives its containers now, where they moved: after
        a quota write, and at start (in case the coordinator stopped between the two)."""
        change = Decision()
        self._relabel(change)
        if change.containers:
            await self._apply(change)

    def _relabel(self, change: Decision) -> None:
        """Every quota's labels over the state as it will be after ``change``."""
        after = {**self._containers, **change.containers}
        for cid in change.removed:
            after.pop(cid, None)
        after = {cid: record for cid, record in after.items() if not record.replaced_by}
        counted = [quota_container(c) for c in after.values()]
        labels: dict[str, str] = {}
        for quota in self._quotas.all():
            labels |= label_containers(
                quota, counted, self._quotas.gb_per_gpu, share_base=self._share_base
            )
        now = self._clock()
        for cid, record in after.items():
            label = labels.get(f"{record.namespace}/{cid}", "")
            if label != record.capacity:
                entry = HistoryEntry(at=now, event="relabelled", detail=label or "unmanaged")
                history = record.history if not record.capacity else [*record.history, entry]
                if record.capacity:
                    moved = f"{record.capacity} -> {label or 'unmanaged'}"
                    change.notes.append(note_for("relabelled", moved, record))
                change.containers[cid] = msgspec.structs.replace(
                    record, capacity=label, history=history
                )
