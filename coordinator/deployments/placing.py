"""Admitting and placing containers: new deployments, scale-up, and placing one again.

A deployment is admitted against its pool's limits and its quota's max, then placed by its
strategy on the ready, uncordoned nodes beside what they hold. One that does not fit may
preempt: placed one container at a time, a container that finds no room asks every ready
node for a preemption plan under the quota rules (quotas spec 8: only over-quota
containers of other quotas, R1/R2, the cool-down), takes the node ``choose_node`` picks,
releases the victims there and places it. The victims and the new containers go into the
same decision, so no capacity is counted twice or lost. Containers that need GPUs are
placed one at a time on the nodes that still have the devices.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import msgspec

from coordinator.deployments.ledger import Decision
from coordinator.deployments.outcome import (
    DeployOutcome,
    DeployRefused,
    check_extended_names,
    refused_by_placement,
)
from coordinator.deployments.pool_link import PoolLink
from coordinator.deployments.records import (
    ContainerRecord,
    DeploymentRecord,
    DeploymentSpec,
    HistoryEntry,
)
from coordinator.deployments.translate import (
    new_id,
    note_for,
    quota_candidate,
    quota_container,
    quota_requests,
    unit_need,
)
from coordinator.deployments.units import FreeUnits, Grant, free_units, room, shortage
from coordinator.events import Note
from coordinator.placement import (
    Node,
    Normalized,
    Placement,
    PlacementError,
    Planner,
    Resources,
    assign,
    normalize,
    place,
)
from coordinator.quotas import Container as QuotaContainer
from coordinator.quotas import admit, choose_node, plan_preemption


class Placing(PoolLink):
    """New containers: admitted, placed, preempting where the quota rules allow."""

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
        change = Decision()
        try:
            self._check_pool_use(namespace, spec.pool or namespace)
            resources = self._normalized(spec)
            self._check_pool_limits(spec.pool or namespace, resources, spec.count)
            ids = self._place_new(change, namespace, spec, resources, now)
        except DeployRefused as refusal:
            await self._record_refusal(refusal, namespace, spec.name)
            raise
        self._note_admitted(change, namespace, spec, ids)
        deployment = DeploymentRecord(namespace=namespace, spec=spec, created=now)
        change.deployments[(namespace, spec.name)] = deployment
        await self._apply(change)
        placed = [self._containers[cid] for cid in ids]
        return DeployOutcome(deployment, placed)

    def _place_new(
        self,
        change: Decision,
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
        change: Decision,
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

    def _counted(self, change: Decision) -> list[QuotaContainer]:
        """The containers the quota engine counts once ``change`` is applied."""
        after = {**self._containers, **change.containers}
        return [quota_container(c) for cid, c in sorted(after.items()) if cid not in change.removed]

    def _free_units(self, change: Decision) -> dict[str, FreeUnits]:
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

    async def scale(self, namespace: str, name: str, count: int) -> DeployOutcome:
        """Make the deployment hold ``count`` containers in all: the new ones admitted and
        placed with AUTO beside the existing ones (whatever the deployment's strategy;
        ``nodes_limit`` still holds; one by one when they need units), or the newest
        removed first."""
        deployment = self._deployment(namespace, name)
        spec = deployment.spec
        mine = sorted(
            (c for c in self.containers() if (c.namespace, c.deployment) == (namespace, name)),
            key=lambda c: (c.created, c.id),
        )
        now = self._clock()
        change = Decision()
        if count > len(mine):
            existing: dict[str, int] = {}
            for record in mine:
                existing[record.node] = existing.get(record.node, 0) + 1
            try:
                self._check_pool_use(namespace, spec.pool or namespace)
                resources = self._normalized(spec)
                self._check_pool_limits(spec.pool or namespace, resources, count - len(mine))
                more, why = count - len(mine), f", scaled to {count}"
                if unit_need(spec):
                    ids = self._place_one_by_one(
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
            self._note_admitted(change, namespace, spec, ids, why)
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

    def _note_admitted(
        self, change: Decision, namespace: str, spec: DeploymentSpec, ids: list[str], why: str = ""
    ) -> None:
        """The ``admitted`` event, first among the decision's: how many containers went
        into which pool, and how the quota that governs the namespace labels them."""
        self._relabel(change)  # the labels they will be committed with
        labels = Counter(change.containers[cid].capacity for cid in ids)
        governing = [q.name for q in self._quotas.all() if namespace in q.namespaces]
        quota = (
            f"quota {governing[0]}: {labels['in-quota']} in-quota,"
            f" {labels['over-quota']} over-quota"
            if governing
            else "no quota governs the namespace"
        )
        reason = f"{len(ids)} container(s){why} into pool {spec.pool or namespace}; {quota}"
        note = Note("admitted", reason, namespace=namespace, deployment=spec.name)
        change.notes.insert(0, note)

    async def _record_refusal(
        self, refusal: DeployRefused, namespace: str, deployment: str, doing: str = ""
    ) -> None:
        why = f"{refusal.reason}: {doing}{refusal.message}"
        await self.events.record([Note("refused", why, namespace=namespace, deployment=deployment)])

    def _place_again(
        self, change: Decision, lost: ContainerRecord, now: float, *, why: str
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
        change: Decision,
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
        self, change: Decision, node: str, resources: Normalized, index: int
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

    def _admit_change(self, before: ContainerRecord, after: ContainerRecord) -> None:
        """A container's new requests against its quota's max (itself counted once): only
        what grows is weighed, so a change that lowers use is always admitted."""
        counted, candidate = self.quota_containers(), quota_container(after)
        self._check_admission(counted, candidate, {}, previous=before.requests)

    def _check_admission(
        self,
        counted: list[QuotaContainer],
        candidate: QuotaContainer,
        extra: dict[str, object],
        *,
        previous: dict[str, int | str] | None = None,
    ) -> None:
        decision = admit(
            self._quotas.all(),
            counted,
            candidate,
            self._quotas.gb_per_gpu,
            share_base=self._share_base,
            previous=previous,
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
        change: Decision,
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
