"""Deployments in the coordinator: admit, place, commit all at once, push to the agents.

    outcome = await service.deploy("team-a", spec)     # or DeployRefused with the numbers
    await service.delete_container(container_id)
    revision, containers = service.desired("node-a")     # what the node's agent must run

A deployment is decided in one turn of the event loop on the in-memory state (no await
between reading and changing it, so two decisions can never spend the same capacity),
then committed in one store transaction: every touched node's allocations (compared with
the revision they were read at), every new or changed container and the deployment. If
the commit fails the in-memory state is put back and nothing happened. Only then are the
touched nodes' agents sent their new desired state.

A lost node's containers stay allocated for a grace period (the node may come back with
them still running); then, in one commit, they are released and those whose restart
policy asks for it are placed again on the ready nodes. When the node's agent returns it
is told to remove what was given up, since its desired state no longer holds it.

A deployment that does not fit may preempt: placed one container at a time, a container
that finds no room asks every ready node for a preemption plan under the quota rules
(quotas spec 8: only over-quota containers of other quotas, R1/R2, the cool-down), takes
the node ``choose_node`` picks, releases the victims there and places it. The victims and
the new containers are committed together, so no capacity is counted twice or lost.

Every container belongs to a pool (its deployment's, by default its namespace's). The
pool tree's update gets each pool's demand from its containers' requests, and after it
the unbound containers of each pool share the pool's CPU (its fair share of the cluster's
cores, split evenly, never above a container's own limit) as their CFS quota, pushed
live when it moves by more than ``QUOTA_CHANGE`` of its value.

Quota labels (in-quota / over-quota) are recomputed for every quota after each change
and stored with the containers whose label moved; the agents get them with the desired
state.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import msgspec

from coordinator.deployments.node_records import (
    ALLOCATION_PREFIX,
    StoredNode,
    allocation_key,
    loaded,
    stored,
)
from coordinator.deployments.outcome import (
    DeployOutcome,
    DeployRefused,
    check_extended_names,
    refused_by_kind,
    refused_by_placement,
)
from coordinator.deployments.records import (
    CONTAINER_PREFIX,
    DEPLOYMENT_PREFIX,
    ContainerRecord,
    DeploymentRecord,
    DeploymentSpec,
    HistoryEntry,
    container_key,
    deployment_key,
)
from coordinator.deployments.translate import (
    desired_container,
    limits_change,
    new_id,
    note_for,
    quota_candidate,
    quota_container,
    quota_requests,
    subtree,
    unit_need,
)
from coordinator.deployments.units import (
    FreeUnits,
    Grant,
    free_units,
    held_extended,
    room,
    shortage,
)
from coordinator.errors import NotFound
from coordinator.events import EventLog, Note
from coordinator.nodes import NodeState as NodeHealth
from coordinator.placement import (
    Delta,
    Node,
    NodeState,
    Normalized,
    Placement,
    PlacementError,
    Planner,
    Resources,
    assign,
    normalize,
    place,
    realloc,
    release,
    replace,
    set_node,
)
from coordinator.plan_nodes import node_from_inventory
from coordinator.pool_service import PoolService
from coordinator.quota_service import QuotaService
from coordinator.quotas import Container as QuotaContainer
from coordinator.quotas import (
    PreemptionRecord,
    admit,
    choose_node,
    label_containers,
    plan_preemption,
)
from coordinator.registry import NodeRegistry
from coordinator.store import Compare, Store, Txn
from shared.codec import json_decoder, to_json
from shared.logs import get_logger
from shared.protocol import ContainerStatus, DesiredContainer, Limits, Status
from shared.quantity import format_cpu, format_memory

log = get_logger("allot.coordinator.deployments")

_decode_node: msgspec.json.Decoder[StoredNode] = json_decoder(StoredNode)
_decode_container: msgspec.json.Decoder[ContainerRecord] = json_decoder(ContainerRecord)
_decode_deployment: msgspec.json.Decoder[DeploymentRecord] = json_decoder(DeploymentRecord)

Listener = Callable[[Sequence[str]], Awaitable[None]]
CORDON_PREFIX = "/cordoned/"
MIN_CPU_QUOTA = 1000  # microseconds: the kernel refuses a CFS quota below 1 ms
QUOTA_CHANGE = 0.05  # a pool share moving an unbound container's CPU quota less is ignored


@dataclass
class _Change:
    """What one decision does, applied to memory first and then committed."""

    nodes: dict[str, NodeState] = field(default_factory=dict)
    containers: dict[str, ContainerRecord] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    deployments: dict[tuple[str, str], DeploymentRecord] = field(default_factory=dict)
    removed_deployments: list[tuple[str, str]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    preemptions: list[PreemptionRecord] = field(default_factory=list)


class DeploymentService:
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
        # The store revision of each node's allocation key, which a commit compares, and
        # the revision of the node's desired state (its allocation or any of its
        # containers), which only grows and goes to its agent.
        self._allocation_revision: dict[str, int] = {}
        self._node_revision: dict[str, int] = {}
        self._containers: dict[str, ContainerRecord] = {}
        self._deployments: dict[tuple[str, str], DeploymentRecord] = {}
        self._observed: dict[str, ContainerStatus] = {}
        # Recent preemptions, for the cool-down (quotas spec 8.3); kept in memory only: a
        # restart forgets them, which at worst lets a victim's quota preempt back early.
        self._preemptions: list[PreemptionRecord] = []
        self._cordoned: set[str] = set()
        self._listeners: list[Listener] = []
        quotas.counted = self.quota_containers

    @classmethod
    async def load(
        cls,
        store: Store,
        registry: NodeRegistry,
        quotas: QuotaService,
        pools: PoolService,
        *,
        share_base: int,
    ) -> DeploymentService:
        events = await EventLog.load(store, clock=time.time)
        service = cls(store, registry, quotas, events, pools, share_base=share_base)
        for entry in await store.range(ALLOCATION_PREFIX):
            state = loaded(_decode_node.decode(entry.value))
            service._nodes[state.name] = state
            service._allocation_revision[state.name] = entry.mod_revision
            service._node_revision[state.name] = entry.mod_revision
        for entry in await store.range(CONTAINER_PREFIX):
            record = _decode_container.decode(entry.value)
            service._containers[record.id] = record
            revision = service._node_revision.get(record.node, 0)
            service._node_revision[record.node] = max(revision, entry.mod_revision)
        for entry in await store.range(CORDON_PREFIX):
            service._cordoned.add(entry.key.removeprefix(CORDON_PREFIX))
        for entry in await store.range(DEPLOYMENT_PREFIX):
            deployment = _decode_deployment.decode(entry.value)
            service._deployments[(deployment.namespace, deployment.spec.name)] = deployment
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

    # -- reading -------------------------------------------------------------------

    def containers(self) -> list[ContainerRecord]:
        return [self._containers[cid] for cid in sorted(self._containers)]

    def container(self, container_id: str) -> ContainerRecord | None:
        return self._containers.get(container_id)

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

    # -- deciding ------------------------------------------------------------------

    async def deploy(self, namespace: str, spec: DeploymentSpec) -> DeployOutcome:
        if (namespace, spec.name) in self._deployments:
            raise DeployRefused(
                "invalid",
                "deployment_exists",
                f"deployment {namespace}/{spec.name} exists; scale or delete it",
                409,
                {"namespace": namespace, "deployment": spec.name},
            )
        now = self._clock()
        change = _Change()
        try:
            resources = self._normalized(spec)
            self._check_pool_limits(spec.pool or namespace, resources, spec.count)
            ids = self._place_new(change, namespace, spec, resources, now)
        except DeployRefused as refusal:
            await self._record_refusal(refusal, namespace, spec.name)
            raise
        deployment = DeploymentRecord(namespace=namespace, spec=spec, created=now)
        change.deployments[(namespace, spec.name)] = deployment
        await self._apply(change)
        placed = [self._containers[cid] for cid in ids]
        return DeployOutcome(deployment, placed)

    def _place_new(
        self,
        change: _Change,
        namespace: str,
        spec: DeploymentSpec,
        resources: Normalized,
        now: float,
    ) -> list[str]:
        """Admit and place a new deployment's containers into ``change``: all at once by
        its strategy; or one at a time, preempting where allowed, when they do not fit
        (AUTO); or one at a time on the nodes with the units, when they need GPUs or
        extended resources."""
        if unit_need(spec):
            return self._place_one_by_one(change, namespace, spec, resources, spec.count, now)
        try:
            placement = self._placement(spec, resources)
        except DeployRefused as refusal:
            if refusal.reason != "capacity" or spec.strategy != "auto":
                raise
            try:
                return self._place_one_by_one(
                    change, namespace, spec, resources, spec.count, now, preempt=True
                )
            except DeployRefused as preempting:
                if preempting.reason != "capacity":
                    raise
                # Say why it does not fit, and why preemption could not help.
                refusal.details["preemption"] = preempting.details.get(
                    "preemption", preempting.message
                )
                raise refusal from preempting
        total = sum(len(plans) for plans in placement.plans.values())  # EACH: per node
        ids = [new_id(namespace, spec.name) for _ in range(total)]
        self._admit(namespace, spec, ids, now)
        self._assign_all(change, namespace, spec, placement, ids, now=now)
        return ids

    def _place_one_by_one(
        self,
        change: _Change,
        namespace: str,
        spec: DeploymentSpec,
        resources: Normalized,
        count: int,
        now: float,
        *,
        existing: dict[str, int] | None = None,
        why: str = "",
        preempt: bool = False,
    ) -> list[str]:
        """``count`` more containers of ``spec`` into ``change``, each admitted, then
        placed with AUTO beside ``existing`` (node -> containers of the deployment there)
        on the ready nodes -- only those that still have the units it needs (GPU devices,
        which it gets in inventory order, and extended resources). With ``preempt``, one
        that finds no room takes it from over-quota containers of other quotas where the
        quota rules allow it. ``DeployRefused`` when one cannot be placed."""
        need = unit_need(spec)
        counted = self._counted(change)
        beside = dict(existing or {})
        ids: list[str] = []
        for index in range(count):
            container_id = new_id(namespace, spec.name)
            candidate = quota_candidate(container_id, namespace, spec, now)
            self._check_admission(counted, candidate, {"admitted_before_refusal": index})
            free = self._free_units(change) if need else {}
            grants = room(need, free) if need else {}
            names = sorted(grants) if need else [s.name for s in self._candidates()]
            views = [self._nodes_state(change, name).view() for name in names]
            if not views:
                raise DeployRefused(
                    "capacity",
                    "insufficient_devices",
                    f"no ready node has the devices for one more container ({need})",
                    409,
                    {**shortage(need, free), "admitted_before_refusal": index},
                )
            try:
                placement = place(views, resources, 1, "auto", spec.nodes_limit, beside)
            except PlacementError as error:
                if not preempt:
                    refusal = refused_by_placement("capacity", error, 409)
                    refusal.details["admitted_before_refusal"] = index
                    raise refusal from error
                node = self._preempt_for(change, candidate, views, counted, now)
                counted = [c for c in counted if c.name not in change.removed]
                placement = self._placement_on(change, node, resources, index)
            (node,) = placement.plans
            granted = {container_id: grants[node]} if need else None
            self._assign_all(
                change, namespace, spec, placement, [container_id], now=now, why=why, grants=granted
            )
            counted.append(msgspec.structs.replace(candidate, node=node))
            beside[node] = beside.get(node, 0) + 1
            ids.append(container_id)
        return ids

    def _counted(self, change: _Change) -> list[QuotaContainer]:
        """The containers the quota engine counts once ``change`` is applied."""
        after = {**self._containers, **change.containers}
        return [quota_container(c) for cid, c in sorted(after.items()) if cid not in change.removed]

    def _free_units(self, change: _Change) -> dict[str, FreeUnits]:
        """Candidate node -> the units (devices, extended resources) its containers do
        not hold once ``change`` is applied."""
        after = {**self._containers, **change.containers}
        held = [c for cid, c in after.items() if cid not in change.removed]
        free = {}
        for state in self._candidates():
            record = self._registry.get(state.name)
            if record is not None:
                there = (c for c in held if c.node == state.name)
                free[state.name] = free_units(record.inventory, there)
        return free

    async def scale(self, namespace: str, name: str, count: int) -> DeployOutcome | None:
        """Make the deployment hold ``count`` containers in all: the new ones admitted and
        placed with AUTO beside the existing ones (whatever the deployment's strategy;
        ``nodes_limit`` still holds; one by one when they need units), or the newest
        removed first."""
        deployment = self._deployments.get((namespace, name))
        if deployment is None:
            return None
        spec = deployment.spec
        mine = sorted(
            (c for c in self.containers() if (c.namespace, c.deployment) == (namespace, name)),
            key=lambda c: (c.created, c.id),
        )
        now = self._clock()
        change = _Change()
        if count > len(mine):
            existing: dict[str, int] = {}
            for record in mine:
                existing[record.node] = existing.get(record.node, 0) + 1
            try:
                resources = self._normalized(spec)
                self._check_pool_limits(spec.pool or namespace, resources, count - len(mine))
                more, why = count - len(mine), f", scaled to {count}"
                if unit_need(spec):
                    self._place_one_by_one(
                        change, namespace, spec, resources, more, now, existing=existing, why=why
                    )
                else:
                    wider = msgspec.structs.replace(spec, count=more, strategy="auto")
                    placement = self._placement(wider, resources, existing)
                    ids = [new_id(namespace, name) for _ in range(more)]
                    self._admit(namespace, spec, ids, now)
                    self._assign_all(change, namespace, spec, placement, ids, now=now, why=why)
            except DeployRefused as refusal:
                await self._record_refusal(refusal, namespace, name, f"scaling to {count}: ")
                raise
        for record in reversed(mine[count:]):
            self._release(change, record)
            change.notes.append(note_for("deleted", f"scaled down to {count}", record))
        updated = msgspec.structs.replace(
            deployment, spec=msgspec.structs.replace(spec, count=count)
        )
        change.deployments[(namespace, name)] = updated
        await self._apply(change)
        kept = [c for c in self.containers() if (c.namespace, c.deployment) == (namespace, name)]
        return DeployOutcome(updated, kept)

    async def _record_refusal(
        self, refusal: DeployRefused, namespace: str, deployment: str, doing: str = ""
    ) -> None:
        why = f"{refusal.reason}: {doing}{refusal.message}"
        await self.events.record([Note("refused", why, namespace=namespace, deployment=deployment)])

    async def realloc(self, container_id: str, delta: Delta) -> ContainerRecord | None:
        """Change a running container's resources by ``delta``, in place and all or
        nothing (placement spec 10): checked against its quota's max, planned on its
        node, committed, then pushed (the agent updates the limits without a restart)."""
        record = self._containers.get(container_id)
        if record is None:
            return None
        state = self._nodes[record.node]
        try:
            moved = realloc(state, container_id, delta)
        except PlacementError as error:
            refusal = refused_by_kind(error)
            await self.events.record([note_for("refused", f"realloc: {error.message}", record)])
            raise refusal from error
        if not moved.updates:
            return record
        resources = moved.state.allocations[container_id].resources
        requests = {
            **record.requests,  # its devices and extended resources stay as they were
            "cpu": format_cpu(resources.cpu_request, share_base=self._share_base),
            "memory": resources.memory_request,
        }
        grown = msgspec.structs.replace(record, requests=requests)
        try:
            self._admit_one(grown)
        except DeployRefused as refusal:
            await self.events.record([note_for("refused", f"realloc: {refusal.message}", record)])
            raise
        now = self._clock()
        change = _Change(nodes={record.node: moved.state})
        old_limits = record.limits
        change.containers[container_id] = grown
        self._record_limits(change, moved.updates, record.node, now)
        after = change.containers[container_id]
        entry = HistoryEntry(
            at=now, event="realloc", detail=limits_change(old_limits, after.limits)
        )
        change.containers[container_id] = msgspec.structs.replace(
            after, history=[*record.history, entry]
        )
        change.notes.append(note_for("realloc", entry.detail, record))
        await self._apply(change)
        return self._containers[container_id]

    async def release_lost(self, grace_seconds: float) -> list[str]:
        """Release the containers of nodes lost for at least ``grace_seconds`` and place
        again those whose restart policy asks for it; the ids released."""
        now = self._clock()
        lost = {
            record.name
            for record in self._registry.all()
            if record.state == NodeHealth.LOST and now - record.state_since >= grace_seconds
        }
        gone = [c for c in self.containers() if c.node in lost]
        if not gone:
            return []
        change = _Change()
        for record in gone:
            self._release(change, record)
            why = f"node {record.node} lost for more than {grace_seconds:g}s"
            change.notes.append(note_for("released", why, record))
        for record in gone:
            if record.restart_policy != "no":
                self._place_again(
                    change, record, now, why=f"in place of {record.id} on lost node {record.node}"
                )
        await self._apply(change)
        return [record.id for record in gone]

    def _place_again(
        self, change: _Change, lost: ContainerRecord, now: float, *, why: str
    ) -> str | None:
        """A new container of ``lost``'s deployment, placed like one more of it; if the
        ready nodes have no room that is an event and it is left out. The new id."""
        deployment = self._deployments.get((lost.namespace, lost.deployment))
        if deployment is None:
            return None
        spec = deployment.spec
        after = {**self._containers, **change.containers}
        existing: dict[str, int] = {}
        for record in after.values():
            same = (record.namespace, record.deployment) == (lost.namespace, lost.deployment)
            if same and record.id not in change.removed:
                existing[record.node] = existing.get(record.node, 0) + 1
        try:
            (fresh,) = self._place_one_by_one(
                change,
                lost.namespace,
                spec,
                self._normalized(spec),
                1,
                now,
                existing=existing,
                why=f", {why}",
            )
        except DeployRefused as refusal:
            change.notes.append(note_for("refused", f"not placed again: {refusal.message}", lost))
            return None
        return fresh

    async def replace(
        self, container_id: str, image: str, command: list[str] | None
    ) -> ContainerRecord | None:
        """A new container with a new image (and command, if given) in the old one's
        allocation: nothing is planned or charged twice (placement spec 10). The swap
        is one commit; the node's agent then removes the old container and starts the
        new one with identical limits."""
        record = self._containers.get(container_id)
        if record is None:
            return None
        fresh = new_id(record.namespace, record.deployment)
        state = self._nodes[record.node]
        moved = replace(state, container_id, fresh)
        now = self._clock()
        entry = HistoryEntry(at=now, event="replaced", detail=f"{container_id} ({record.image})")
        change = _Change(nodes={record.node: moved.state}, removed=[container_id])
        change.containers[fresh] = msgspec.structs.replace(
            record,
            id=fresh,
            image=image,
            command=record.command if command is None else command,
            created=now,
            history=[*record.history, entry],
        )
        change.notes.append(note_for("replaced", f"by {fresh} with image {image}", record))
        await self._apply(change)
        return self._containers[fresh]

    def _check_pool_limits(self, pool: str, resources: Normalized, count: int) -> None:
        """``count`` more containers of ``resources`` in ``pool`` must keep the pool and
        each of its ancestors within its ``resource_limits`` (over its whole subtree's
        containers); ``DeployRefused`` (403, reason "pool") with the numbers otherwise.
        A pool not in the tree limits nothing."""
        pools = self._pools.config()["pools"]
        adding = {
            "cpu": count * resources.cpu_request / resources.share_base,
            "memory": float(count * resources.memory_request),
        }
        demands = self.pool_demands()
        name: str | None = pool
        while name is not None and name in pools:
            within = subtree(pools, name)
            for resource, limit in (pools[name].get("resource_limits") or {}).items():
                used = sum(demands.get(member, {}).get(resource, 0.0) for member in within)
                if used + adding.get(resource, 0.0) > float(limit):
                    raise DeployRefused(
                        "pool",
                        "pool_limit_exceeded",
                        f"pool {name!r}: {resource} used {used:g} + request"
                        f" {adding.get(resource, 0.0):g} > limit {float(limit):g}",
                        403,
                        {"pool": name, "resource": resource, "used": used, "limit": limit},
                    )
            name = pools[name].get("parent")

    def pool_demands(self) -> dict[str, dict[str, float]]:
        """Pool -> what its containers ask for: cores and bytes."""
        demands: dict[str, dict[str, float]] = {}
        for record in self._containers.values():
            resources = self._nodes[record.node].allocations[record.id].resources
            demand = demands.setdefault(record.pool, {"cpu": 0.0, "memory": 0.0})
            demand["cpu"] += resources.cpu_request / resources.share_base
            demand["memory"] += resources.memory_request
        return demands

    async def follow_pool_shares(self, cores: dict[str, float]) -> None:
        """Set each unbound container's CFS quota from its pool's cores (``cores``: pool
        -> cores of its fair share); containers of pools without a share keep theirs."""
        change = _Change()
        unbound_by_pool: dict[str, list[ContainerRecord]] = {}
        for container in self.containers():
            if not container.cpu_bind:
                unbound_by_pool.setdefault(container.pool, []).append(container)
        for pool, pool_cores in cores.items():
            unbound = unbound_by_pool.get(pool, [])
            if not unbound:
                continue
            each = pool_cores / len(unbound)
            for record in unbound:
                resources = self._nodes[record.node].allocations[record.id].resources
                limit = resources.cpu_limit / resources.share_base
                quota = int(min(each, limit) * record.limits.cpu_period) if limit else -1
                quota = max(quota, MIN_CPU_QUOTA) if quota != -1 else -1
                current = record.limits.cpu_quota
                if current > 0 and quota > 0 and abs(quota - current) <= QUOTA_CHANGE * current:
                    continue
                if quota == current:
                    continue
                limits = msgspec.structs.replace(record.limits, cpu_quota=quota)
                entry = HistoryEntry(
                    at=self._clock(), event="pool share", detail=f"cpu_quota {current} -> {quota}"
                )
                change.containers[record.id] = msgspec.structs.replace(
                    record, limits=limits, history=[*record.history, entry]
                )
        if change.containers:
            await self._apply(change)

    def allocation(self, node: str) -> tuple[NodeState, bool]:
        """The node's allocation state and whether it is cordoned."""
        return self._state_of(node), node in self._cordoned

    def extended(self, node: str) -> tuple[dict[str, int], dict[str, int]]:
        """What the node offers of extended resources, and what its containers hold."""
        record = self._registry.get(node)
        if record is None:
            raise NotFound(f"no node {node}")
        there = (c for c in self._containers.values() if c.node == node)
        return dict(sorted(record.inventory.extended.items())), held_extended(there)

    async def set_node(self, node: str, mode: str, **fields: Any) -> NodeState:
        """Change what the node offers (placement spec 11), absolute or delta; refused as
        a whole when it would go below what is allocated. Running containers stay where
        they are; those on the shared pool get the new pool."""
        state = self._state_of(node)
        try:
            moved = set_node(state, mode, **fields)
        except PlacementError as error:
            raise refused_by_kind(error) from error
        change = _Change(nodes={node: moved.state})
        self._record_limits(change, moved.updates, node, self._clock())
        offered = f"{len(moved.state.cores)} cores, {format_memory(moved.state.memory)}"
        change.notes.append(Note("node", f"capacity set ({mode}): {offered}", node=node))
        await self._apply(change)
        return moved.state

    async def cordon(self, node: str, cordoned: bool) -> None:
        """A cordoned node takes no new container; what runs there stays."""
        self._state_of(node)  # 404 for an unknown node
        if (node in self._cordoned) == cordoned:
            return
        note = Note("node", "cordoned" if cordoned else "uncordoned", node=node)
        staged = self.events.stage([note])
        key = CORDON_PREFIX + node
        txn = Txn(
            puts={key: b"{}", **staged.puts} if cordoned else staged.puts,
            deletes=staged.deletes if cordoned else (key, *staged.deletes),
        )
        await self._store.commit(txn)
        self.events.confirm(staged)
        if cordoned:
            self._cordoned.add(node)
        else:
            self._cordoned.discard(node)

    async def drain(self, node: str) -> dict[str, str | None]:
        """Cordon the node and move every container off it: each is released and placed
        again on the other nodes in the same commit (one with no room elsewhere is
        released all the same, and the refusal is an event). Each id released -> the id
        of the container placed in its stead (None when there was no room)."""
        await self.cordon(node, True)
        gone = [c for c in self.containers() if c.node == node]
        if not gone:
            return {}
        now = self._clock()
        change = _Change()
        for record in gone:
            self._release(change, record)
            change.notes.append(note_for("released", f"node {node} drained", record))
        moved = {
            record.id: self._place_again(change, record, now, why=f"moved off drained node {node}")
            for record in gone
        }
        await self._apply(change)
        return moved

    async def delete_container(self, container_id: str) -> ContainerRecord | None:
        record = self._containers.get(container_id)
        if record is None:
            return None
        change = _Change(notes=[note_for("deleted", "on request", record)])
        self._release(change, record)
        await self._apply(change)
        return record

    async def delete_deployment(self, namespace: str, name: str) -> list[str] | None:
        if (namespace, name) not in self._deployments:
            return None
        change = _Change(removed_deployments=[(namespace, name)])
        gone = [c for c in self.containers() if (c.namespace, c.deployment) == (namespace, name)]
        for record in gone:
            self._release(change, record)
            change.notes.append(note_for("deleted", "its deployment was deleted", record))
        await self._apply(change)
        return [record.id for record in gone]

    def _normalized(self, spec: DeploymentSpec) -> Normalized:
        wanted = spec.resources
        check_extended_names(wanted.extended)
        cpu_limit = wanted.cpu if wanted.cpu_limit is None else wanted.cpu_limit
        memory_limit = wanted.memory if wanted.memory_limit is None else wanted.memory_limit
        try:
            return normalize(
                Resources(
                    cpu_request=wanted.cpu,
                    cpu_limit=cpu_limit,
                    memory_request=wanted.memory,
                    memory_limit=memory_limit,
                    cpu_bind=spec.cpu_bind,
                    soft_memory=spec.soft_memory,
                ),
                self._share_base,
            )
        except PlacementError as error:
            raise refused_by_placement("invalid", error, 422) from error

    def _preempt_for(
        self,
        change: _Change,
        candidate: QuotaContainer,
        views: list[Node],
        counted: list[QuotaContainer],
        now: float,
    ) -> str:
        """Release, into ``change``, the victims of the best node's preemption plan for
        ``candidate``; that node's name. ``DeployRefused`` with every node's reason when
        no node may preempt."""
        recent = [*self._preemptions, *change.preemptions]
        plans = {
            view.name: plan_preemption(
                self._quotas.all(),
                counted,
                msgspec.structs.replace(candidate, node=view.name),
                {"cpu": Fraction(sum(view.cores.values()), view.share_base), "memory": view.memory},
                self._quotas.gb_per_gpu,
                now,
                recent,
                self._quotas.cooldown_s,
                share_base=self._share_base,
            )
            for view in views
        }
        node = choose_node(plans)
        if node is None:
            raise DeployRefused(
                "capacity",
                "insufficient_capacity",
                f"no node has room for {candidate.name} and no preemption is allowed",
                409,
                {"preemption": {name: plan.reason for name, plan in plans.items()}},
            )
        plan = plans[node]
        for key in plan.victims or []:
            victim = {**self._containers, **change.containers}[key.split("/", 1)[1]]
            self._release(change, victim)
            why = f"by {candidate.name} of {candidate.namespace}: {plan.reason}"
            change.notes.append(note_for("preempted", why, victim))
        change.preemptions.extend(plan.records(now))
        return node

    def _placement_on(
        self, change: _Change, node: str, resources: Normalized, index: int
    ) -> Placement:
        """One container on ``node`` after its victims left; the quota engine counts
        amounts, not core layouts, so this can still fail (refused, nothing changed)."""
        try:
            return place([self._nodes_state(change, node).view()], resources, 1, "auto")
        except PlacementError as error:
            refusal = refused_by_placement("capacity", error, 409)
            refusal.details["admitted_before_refusal"] = index
            raise refusal from error

    def _admit(self, namespace: str, spec: DeploymentSpec, ids: list[str], now: float) -> None:
        """Each new container in turn against its quota's max (quotas spec 6)."""
        counted = self.quota_containers()
        for index, container_id in enumerate(ids):
            candidate = quota_candidate(container_id, namespace, spec, now)
            self._check_admission(counted, candidate, {"admitted_before_refusal": index})
            counted.append(candidate)

    def _admit_one(self, record: ContainerRecord) -> None:
        """A container's new requests against its quota's max (itself counted once)."""
        self._check_admission(self.quota_containers(), quota_container(record), {})

    def _check_admission(
        self, counted: list[QuotaContainer], candidate: QuotaContainer, extra: dict[str, object]
    ) -> None:
        decision = admit(
            self._quotas.all(),
            counted,
            candidate,
            self._quotas.gb_per_gpu,
            share_base=self._share_base,
        )
        if not decision.admitted:
            raise DeployRefused(
                "quota",
                decision.code or "quota_max_exceeded",
                decision.reason,
                decision.status or 403,
                dict(decision.details) | extra,
            )

    def _placement(
        self, spec: DeploymentSpec, resources: Normalized, existing: dict[str, int] | None = None
    ) -> Placement:
        views = [state.view() for state in self._candidates()]
        try:
            return place(views, resources, spec.count, spec.strategy, spec.nodes_limit, existing)
        except PlacementError as error:
            refusal = refused_by_placement("capacity", error, 409)
            refusal.details["capacities"] = Planner(views, resources).capacities()
            raise refusal from error

    def _assign_all(
        self,
        change: _Change,
        namespace: str,
        spec: DeploymentSpec,
        placement: Placement,
        ids: list[str],
        *,
        now: float,
        why: str = "",
        grants: dict[str, Grant] | None = None,
    ) -> None:
        """Charge each planned container to its node and record it; ``why`` goes into
        its history after where it was placed; ``grants``: container -> its units."""
        resources = placement.resources
        pending = iter(ids)
        for node, plans in sorted(placement.plans.items()):
            state = self._nodes_state(change, node)
            for plan in plans:
                container_id = next(pending)
                try:
                    moved = assign(state, container_id, plan, resources)
                except PlacementError as error:  # the plan was made on this very state
                    raise refused_by_placement("capacity", error, 409) from error
                state = moved.state
                self._record_limits(change, moved.updates, node, now)
                change.containers[container_id] = ContainerRecord(
                    id=container_id,
                    namespace=namespace,
                    deployment=spec.name,
                    node=node,
                    image=spec.image,
                    command=list(spec.command),
                    env=dict(spec.env),
                    labels=dict(spec.labels),
                    restart_policy=spec.restart_policy,
                    cpu_bind=spec.cpu_bind,
                    requests=quota_requests(spec),
                    priority=spec.priority,
                    pool=spec.pool or namespace,
                    created=now,
                    capacity="",
                    limits=moved.updates[container_id],
                    gpus=(grants or {}).get(container_id, Grant()).gpus,
                    extended=(grants or {}).get(container_id, Grant()).extended,
                    history=[HistoryEntry(at=now, event="placed", detail=f"on {node}{why}")],
                )
                change.notes.append(
                    Note(
                        "placed",
                        f"on {node}{why}",
                        namespace=namespace,
                        deployment=spec.name,
                        container=container_id,
                        node=node,
                    )
                )
            change.nodes[node] = state

    def _candidates(self) -> list[NodeState]:
        """The allocation states of the ready nodes that are not cordoned."""
        ready = [r for r in self._registry.all() if r.state == NodeHealth.READY]
        return [
            self._state_of(record.name)
            for record in sorted(ready, key=lambda r: r.name)
            if record.name not in self._cordoned
        ]

    def _state_of(self, node: str) -> NodeState:
        """A registered node's allocation state, made from its inventory on first use."""
        state = self._nodes.get(node)
        if state is not None:
            return state
        record = self._registry.get(node)
        if record is None:
            raise NotFound(f"no node {node}")
        offered = node_from_inventory(node, record.inventory, share_base=self._share_base)
        return NodeState(
            node,
            dict(offered.cores),
            numa=offered.numa,
            memory=offered.memory,
            numa_memory=offered.numa_memory,
            share_base=self._share_base,
        )

    def _nodes_state(self, change: _Change, node: str) -> NodeState:
        return change.nodes[node] if node in change.nodes else self._state_of(node)

    def _record_limits(
        self, change: _Change, updates: dict[str, Limits], node: str, now: float
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

    def _release(self, change: _Change, record: ContainerRecord) -> None:
        state = self._nodes_state(change, record.node)
        if record.id in state.allocations:
            moved = release(state, record.id)
            change.nodes[record.node] = moved.state
            self._record_limits(change, moved.updates, record.node, self._clock())
        change.containers.pop(record.id, None)
        change.removed.append(record.id)

    async def _apply(self, change: _Change) -> None:
        """Relabel, apply to memory, commit; on a failed commit put memory back."""
        self._relabel(change)
        before = (
            dict(self._nodes),
            dict(self._containers),
            dict(self._deployments),
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
        deletes = (
            tuple(container_key(cid) for cid in change.removed)
            + tuple(deployment_key(ns, name) for ns, name in change.removed_deployments)
            + staged.deletes
        )
        self._nodes.update(change.nodes)
        self._containers.update(change.containers)
        for cid in change.removed:
            self._containers.pop(cid, None)
            self._observed.pop(cid, None)
        self._deployments.update(change.deployments)
        for key in change.removed_deployments:
            self._deployments.pop(key, None)
        try:
            result = await self._store.commit(Txn(compares=compares, puts=puts, deletes=deletes))
        except BaseException:
            self._nodes, self._containers, self._deployments = before
            raise
        if not result.succeeded:
            self._nodes, self._containers, self._deployments = before
            raise DeployRefused(
                "conflict",
                "conflict",
                "another writer changed these nodes' allocations; try again",
                409,
                {"nodes": sorted(change.nodes)},
            )
        self.events.confirm(staged)
        recent = self._clock() - self._quotas.cooldown_s
        self._preemptions = [r for r in self._preemptions if r["at"] > recent]
        self._preemptions.extend(change.preemptions)
        touched = set(change.nodes) | {r.node for r in change.containers.values()}
        removed_nodes = {before[1][cid].node for cid in change.removed if cid in before[1]}
        touched |= removed_nodes
        for node in change.nodes:
            self._allocation_revision[node] = result.revision
        for node in touched:
            self._node_revision[node] = result.revision
        for listener in self._listeners:
            await listener(sorted(touched))

    def _relabel(self, change: _Change) -> None:
        """Every quota's labels over the state as it will be after ``change``."""
        after = {**self._containers, **change.containers}
        for cid in change.removed:
            after.pop(cid, None)
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
