"""Admitting and placing containers: new deployments, scale-up, and placing one again.

A deployment is admitted against its pool's limits and its quota's max, then placed by its
strategy on the ready, uncordoned nodes beside what they hold. One that does not fit may
preempt: placed one container at a time, a container that finds no room asks every ready
node for a preemption plan under the quota rules (quotas spec 8: only over-quota
containers of other quotas, R1/R2, the cool-down), takes the node ``choose_node`` picks
and stops the victims there. Like every removal, a victim keeps its cores, memory and
GPUs on its node until its agent reports it gone (``stopping``); its quota stops counting
it at once, as it does any stopping container. The preemptor is pending until then, with
the victims named in its reason, and the first pass after the report places it
(``pending.schedule`` takes preemptors first). Containers that need GPUs are placed one
at a time on the nodes that still have the devices.

Each public function is a decider (``sequencer``): it reads and writes a ``Draft``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction

import msgspec

from coordinator.deployments.draft import Draft
from coordinator.deployments.labels import relabel
from coordinator.deployments.outcome import (
    DeployOutcome,
    DeployRefused,
    check_extended_names,
    refused_by_placement,
)
from coordinator.deployments.pool_link import check_pool_limits, check_pool_use, placed_limits
from coordinator.deployments.records import PendingRecord
from coordinator.deployments.sequencer import Refused
from coordinator.deployments.translate import (
    container_of,
    new_id,
    note_for,
    pending_container,
    quota_candidate,
    quota_container,
    unit_need,
)
from coordinator.deployments.units import FreeUnits, Grant, free_units, room, shortage
from coordinator.deployments.why import stopping_on
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
from coordinator.placement.engine import AnyRequest
from coordinator.quotas import Admission, admit, choose_node, first_refused, plan_preemption
from coordinator.quotas import Container as QuotaContainer
from coordinator.services.events import Note
from shared.api.containers import ContainerRecord, HistoryEntry
from shared.api.deployments import DeploymentRecord, DeploymentSpec

# Why containers were placed, after "on <node>": one text for all, or one per id.
Why = str | Mapping[str, str]


def deploy(draft: Draft, namespace: str, spec: DeploymentSpec) -> DeployOutcome:
    """A new deployment, admitted and placed as a whole, or refused (with an event)."""
    if draft.deployment((namespace, spec.name)) is not None:
        raise DeployRefused(
            "invalid",
            "deployment_exists",
            f"deployment {namespace}/{spec.name} exists; scale or delete it",
            "conflict",
            {"namespace": namespace, "deployment": spec.name},
        )
    now = draft.context.clock()
    pool = spec.pool or namespace
    try:
        check_pool_use(draft, namespace, pool)
        resources = normalized(draft, spec)
        check_pool_limits(draft, pool, resources, spec.count)
        ids = _place_new(draft, namespace, spec, resources, now)
    except DeployRefused as refusal:
        told = _naming_stopping(draft, refusal)
        raise refused_with_event(told, namespace, spec.name) from refusal
    _note_admitted(draft, namespace, spec, ids)
    deployment = DeploymentRecord(namespace=namespace, spec=spec, created=now)
    draft.put_deployment(deployment)
    return DeployOutcome(deployment, [_shown(draft, spec, cid) for cid in ids])


def scale(draft: Draft, namespace: str, name: str, count: int) -> DeployOutcome:
    """Make the deployment count ``count`` containers in all, placed and pending: the
    new ones admitted and placed at once (``place_more``, refused as a whole when they
    do not fit), or the pending ones removed first, then the newest placed."""
    deployment = draft.existing_deployment((namespace, name))
    spec = deployment.spec
    mine = draft.of_deployment((namespace, name))
    pending = draft.pending_of((namespace, name))
    if count > len(mine) + len(pending):
        ids = [new_id(namespace, name) for _ in range(count - len(mine) - len(pending))]
        why = f", scaled to {count}"
        try:
            place_more(draft, spec, namespace, ids, why=why)
        except DeployRefused as refusal:
            told = _naming_stopping(draft, refusal)
            raise refused_with_event(told, namespace, name, f"scaling to {count}: ") from refusal
        _note_admitted(draft, namespace, spec, ids, why)
    # Fewer: the pending ones go first, the newest of them first; then the newest placed.
    for stand_in in pending[max(0, count - len(mine)) :]:
        draft.drop_pending(stand_in.id)
        draft.note(note_for("deleted", f"scaled down to {count}", stand_in))
    for record in reversed(mine[count:]):
        draft.stop(record, f"scaled down to {count}")
        draft.note(note_for("deleted", f"scaled down to {count}", record))
    updated = msgspec.structs.replace(deployment, spec=msgspec.structs.replace(spec, count=count))
    draft.put_deployment(updated)
    relabel(draft)
    return DeployOutcome(updated, draft.of_deployment((namespace, name)))


def place_more(
    draft: Draft, spec: DeploymentSpec, namespace: str, ids: list[str], *, why: Why
) -> None:
    """Containers ``ids`` more of the deployment, admitted against its pool and quota and
    placed with AUTO beside its others (whatever its strategy; ``nodes_limit`` still
    holds; one by one when they need units); ``why`` goes into their history (one for
    all, or one per id).
    ``DeployRefused`` when they do not all fit, and then some may be written: the caller
    refuses as a whole or tries on a copy (``Draft.attempt``)."""
    key = (namespace, spec.name)
    existing = Counter(record.node for record in draft.of_deployment(key))
    pool = spec.pool or namespace
    check_pool_use(draft, namespace, pool)
    resources = normalized(draft, spec)
    check_pool_limits(draft, pool, resources, len(ids))
    now = draft.context.clock()
    if unit_need(spec):
        _place_one_by_one(draft, namespace, spec, resources, ids, now, existing=existing, why=why)
        return
    wider = msgspec.structs.replace(spec, count=len(ids), strategy="auto")
    placement = _placement(draft, wider, resources, dict(existing))
    _admit(draft, namespace, spec, ids, now)
    _assign_all(draft, namespace, spec, placement, ids, now=now, why=why)


def normalized(draft: Draft, spec: DeploymentSpec) -> Normalized:
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
            draft.context.share_base,
        )
    except PlacementError as error:
        raise refused_by_placement("invalid", error, "invalid") from error


def refused_with_event(
    refusal: DeployRefused, namespace: str, deployment: str, doing: str = ""
) -> Refused:
    """``refusal``, to be answered once its ``refused`` event is committed."""
    why = f"{refusal.reason}: {doing}{refusal.message}"
    return Refused(refusal, [Note("refused", why, namespace=namespace, deployment=deployment)])


def _naming_stopping(draft: Draft, refusal: DeployRefused) -> DeployRefused:
    """A refusal for room that stopping containers still hold says so: their agents will
    give it back, so the same request may succeed then."""
    if refusal.reason != "capacity":
        return refusal
    waiting = stopping_on(draft, [state.name for state in draft.candidates()])
    if not waiting:
        return refusal
    details = {k: v for k, v in refusal.details.items() if k != "reason"}
    details["stopping"] = waiting
    message = f"{refusal.message}; {waiting}"
    # A refusal for room is a conflict (``refused_by_kind``), and stays one.
    return DeployRefused(refusal.reason, refusal.code, message, "conflict", details)


def counted(draft: Draft) -> list[QuotaContainer]:
    """The containers the quota engine counts: those of the namespaces a quota governs
    (no other can be admitted against, labelled or preempted). O(those containers)."""
    governed = {ns for quota in draft.quotas() for ns in quota.namespaces}
    return [quota_container(c) for c in draft.of_namespaces(governed)] if governed else []


def check_admission(
    draft: Draft,
    counted: list[QuotaContainer],
    candidate: QuotaContainer,
    extra: dict[str, object],
    *,
    previous: dict[str, int | str] | None = None,
) -> None:
    quotas = draft.context.quotas
    decision = admit(
        draft.quotas(),
        counted,
        candidate,
        quotas.gb_per_gpu,
        share_base=draft.context.share_base,
        previous=previous,
    )
    if not decision.admitted:
        raise _quota_refusal(decision, extra)


def _quota_refusal(decision: Admission, extra: dict[str, object]) -> DeployRefused:
    """The quota engine's refusal as a decision's, with ``extra`` details."""
    return DeployRefused(
        "quota",
        decision.code or "quota_max_exceeded",
        decision.reason,
        "forbidden",
        dict(decision.details) | extra,
    )


def _placed(draft: Draft, container_id: str) -> ContainerRecord:
    record = draft.container(container_id)
    assert record is not None, f"{container_id} was placed by this very decision"
    return record


def _shown(draft: Draft, spec: DeploymentSpec, container_id: str) -> ContainerRecord:
    """A container this decision made, placed or (a preemptor) pending."""
    pending = draft.pending(container_id)
    return _placed(draft, container_id) if pending is None else pending_container(pending, spec)


def _place_new(
    draft: Draft, namespace: str, spec: DeploymentSpec, resources: Normalized, now: float
) -> list[str]:
    """Admit and place a new deployment's containers: all at once by its strategy; or one
    at a time, preempting where allowed, when they do not fit (AUTO); or one at a time on
    the nodes with the units, when they need GPUs or extended resources."""
    ids = [new_id(namespace, spec.name) for _ in range(spec.count)]
    if unit_need(spec):
        _place_one_by_one(draft, namespace, spec, resources, ids, now)
        return ids
    try:
        placement = _placement(draft, spec, resources)
    except DeployRefused as refusal:
        if refusal.reason != "capacity" or spec.strategy != "auto":
            raise
        try:
            _place_one_by_one(draft, namespace, spec, resources, ids, now, preempt=True)
            return ids
        except DeployRefused as preempting:
            if preempting.reason != "capacity":
                raise
            # Say why it does not fit, and why preemption could not help.
            refusal.details["preemption"] = preempting.details.get("preemption", preempting.message)
            raise refusal from preempting
    total = sum(len(plans) for plans in placement.plans.values())
    if total != len(ids):  # EACH: ``count`` per node
        ids = [new_id(namespace, spec.name) for _ in range(total)]
    _admit(draft, namespace, spec, ids, now)
    _assign_all(draft, namespace, spec, placement, ids, now=now)
    return ids


def _place_one_by_one(
    draft: Draft,
    namespace: str,
    spec: DeploymentSpec,
    resources: Normalized,
    ids: list[str],
    now: float,
    *,
    existing: Counter[str] | None = None,
    why: Why = "",
    preempt: bool = False,
) -> None:
    """Containers ``ids`` of ``spec``, each admitted, then placed with AUTO beside
    ``existing`` (node -> containers of the deployment there) on the ready nodes -- only
    those that still have the units it needs (GPU devices, which it gets in inventory
    order, and extended resources). With ``preempt``, one that finds no room takes it
    from over-quota containers of other quotas where the quota rules allow it.
    ``DeployRefused`` when one cannot be placed."""
    need = unit_need(spec)
    quota_counted = counted(draft)
    beside = dict(existing or {})
    for index, container_id in enumerate(ids):
        candidate = quota_candidate(container_id, namespace, spec, now)
        check_admission(draft, quota_counted, candidate, {"admitted_before_refusal": index})
        free = _free_units(draft) if need else {}
        grants = room(need, free) if need else {}
        names = sorted(grants) if need else [s.name for s in draft.candidates()]
        views = [draft.node_state(name).view() for name in names]
        if not views and not need:
            raise DeployRefused(
                "capacity",
                "insufficient_capacity",
                "no node is ready and uncordoned",
                "conflict",
                {"admitted_before_refusal": index},
            )
        if not views:
            raise DeployRefused(
                "capacity",
                "insufficient_devices",
                f"no ready node has the devices for one more container ({need})",
                "conflict",
                {**shortage(need, free), "admitted_before_refusal": index},
            )
        try:
            placement = place_on(draft, views, resources, 1, "auto", spec.nodes_limit, beside)
        except PlacementError as error:
            if not preempt:
                refusal = refused_by_placement("capacity", error, "conflict")
                refusal.details["admitted_before_refusal"] = index
                raise refusal from error
            node, victims = _preempt_for(draft, candidate, views, quota_counted, now)
            if victims:
                gone = {f"{victim.namespace}/{victim.id}" for victim in victims}
                quota_counted = [c for c in quota_counted if c.key not in gone]
                _wait_for_victims(draft, namespace, spec, container_id, victims, now)
                quota_counted.append(candidate)  # counted for the rest of this decision
                continue
            placement = _placement_on(draft, node, resources, index)
        (node,) = placement.plans
        granted = {container_id: grants[node]} if need else None
        _assign_all(
            draft, namespace, spec, placement, [container_id], now=now, why=why, grants=granted
        )
        quota_counted.append(msgspec.structs.replace(candidate, node=node))
        beside[node] = beside.get(node, 0) + 1


def _free_units(draft: Draft) -> dict[str, FreeUnits]:
    """Candidate node -> the units (devices, extended resources) its containers do not
    hold once the draft is applied."""
    free = {}
    for state in draft.candidates():
        record = draft.context.registry.get(state.name)
        if record is not None:
            free[state.name] = free_units(record.inventory, draft.holders_on(state.name))
    return free


def _note_admitted(
    draft: Draft, namespace: str, spec: DeploymentSpec, ids: list[str], why: str = ""
) -> None:
    """The ``admitted`` event, first among the decision's: how many containers went into
    which pool, and how the quota that governs the namespace labels them."""
    relabel(draft)  # the labels they will be committed with
    placed = [record for record in map(draft.container, ids) if record is not None]
    labels = Counter(record.capacity for record in placed)
    governing = [q.name for q in draft.quotas() if namespace in q.namespaces]
    quota = (
        f"quota {governing[0]}: {labels['in-quota']} in-quota, {labels['over-quota']} over-quota"
        if governing
        else "no quota governs the namespace"
    )
    if len(placed) < len(ids):
        quota += f", {len(ids) - len(placed)} pending until the containers they preempted stop"
    reason = f"{len(ids)} container(s){why} into pool {spec.pool or namespace}; {quota}"
    draft.note_first(Note("admitted", reason, namespace=namespace, deployment=spec.name))


def _preempt_for(
    draft: Draft,
    candidate: QuotaContainer,
    views: list[Node],
    quota_counted: list[QuotaContainer],
    now: float,
) -> tuple[str, list[ContainerRecord]]:
    """Stop the victims of the best node's preemption plan for ``candidate``: that node's
    name and the victims, which hold their room until their agent reports them gone.
    ``DeployRefused`` with every node's reason when no node may preempt."""
    quotas = draft.context.quotas
    recent = draft.preemptions()
    plans = {
        view.name: plan_preemption(
            draft.quotas(),
            quota_counted,
            msgspec.structs.replace(candidate, node=view.name),
            {"cpu": Fraction(sum(view.cores.values()), view.share_base), "memory": view.memory},
            quotas.gb_per_gpu,
            now,
            recent,
            quotas.cooldown_s,
            share_base=draft.context.share_base,
        )
        for view in views
    }
    node = choose_node(plans)
    if node is None:
        raise DeployRefused(
            "capacity",
            "insufficient_capacity",
            f"no node has room for {candidate.name} and no preemption is allowed",
            "conflict",
            {"preemption": {name: plan.reason for name, plan in plans.items()}},
        )
    plan = plans[node]
    victims = []
    for key in plan.victims or []:
        victim = draft.container(key.split("/", 1)[1])
        assert victim is not None, f"victim {key} is counted, so it is live"
        why = f"by {candidate.name} of {candidate.namespace}: {plan.reason}"
        draft.stop(victim, f"preempted {why}")
        draft.note(note_for("preempted", why, victim))
        victims.append(victim)
    draft.change.preemptions.extend(plan.records(now))
    return node, victims


def waiting_for_victims(victims: list[ContainerRecord]) -> str:
    """Why a preemptor is pending: "waiting for preempted containers to stop: c1, c2 on
    n1" (a plan's victims are all on one node)."""
    ids = ", ".join(victim.id for victim in victims)
    return f"waiting for preempted containers to stop: {ids} on {victims[0].node}"


def _wait_for_victims(
    draft: Draft,
    namespace: str,
    spec: DeploymentSpec,
    container_id: str,
    victims: list[ContainerRecord],
    now: float,
) -> None:
    """The preemptor ``container_id`` is pending until its victims are gone."""
    pending = PendingRecord(
        id=container_id,
        namespace=namespace,
        deployment=spec.name,
        since=now,
        cause=waiting_for_victims(victims),
        preempted=tuple(victim.id for victim in victims),
    )
    draft.put_pending(pending)
    draft.note(note_for("pending", pending.cause, pending))


def _placement_on(draft: Draft, node: str, resources: Normalized, index: int) -> Placement:
    """One container on ``node``, where the quota engine finds room without preempting;
    it counts amounts, not core layouts, so this can still fail (refused, nothing
    changed)."""
    try:
        return place([draft.node_state(node).view()], resources, 1, "auto")
    except PlacementError as error:
        refusal = refused_by_placement("capacity", error, "conflict")
        refusal.details["admitted_before_refusal"] = index
        raise refusal from error


def _admit(draft: Draft, namespace: str, spec: DeploymentSpec, ids: list[str], now: float) -> None:
    """The new containers in turn against their quota's max (quotas spec 6), the state
    weighed once (``first_refused``); nothing to weigh where no quota governs."""
    quotas = draft.context.quotas
    if not any(namespace in quota.namespaces for quota in draft.quotas()):
        return
    candidates = [quota_candidate(cid, namespace, spec, now) for cid in ids]
    refused = first_refused(
        draft.quotas(),
        counted(draft),
        candidates,
        quotas.gb_per_gpu,
        share_base=draft.context.share_base,
    )
    if refused is not None:
        index, decision = refused
        raise _quota_refusal(decision, {"admitted_before_refusal": index})


def place_on(
    draft: Draft,
    views: Sequence[Node],
    request: AnyRequest,
    count: int,
    strategy: str,
    nodes_limit: int = 0,
    existing: Mapping[str, int] | None = None,
) -> Placement:
    """The engine's ``place`` as every decision calls it: with the nodes the draft's
    context holds under CPU pressure, so that AUTO puts unbound containers on calm nodes
    first (``placement.pressure``). A plan (``DeploymentService.plan``) calls it too, so
    it answers what the deploy would do. ``PlacementError`` as ``place`` raises it."""
    pressured = draft.context.pressured()
    return place(views, request, count, strategy, nodes_limit, existing, pressured=pressured)


def _placement(
    draft: Draft,
    spec: DeploymentSpec,
    resources: Normalized,
    existing: dict[str, int] | None = None,
) -> Placement:
    views = draft.candidate_views()
    try:
        return place_on(
            draft, views, resources, spec.count, spec.strategy, spec.nodes_limit, existing
        )
    except PlacementError as error:
        refusal = refused_by_placement("capacity", error, "conflict")
        refusal.details["capacities"] = Planner(views, resources).capacities()
        raise refusal from error


def _assign_all(
    draft: Draft,
    namespace: str,
    spec: DeploymentSpec,
    placement: Placement,
    ids: list[str],
    *,
    now: float,
    why: Why = "",
    grants: dict[str, Grant] | None = None,
) -> None:
    """Charge each planned container to its node and record it; ``why`` goes into its
    history after where it was placed; ``grants``: container -> its units."""
    resources = placement.resources
    pending = iter(ids)
    for node, plans in sorted(placement.plans.items()):
        state = draft.node_state(node)
        for plan in plans:
            container_id = next(pending)
            try:
                moved = assign(state, container_id, plan, resources)
            except PlacementError as error:  # the plan was made on this very state
                raise refused_by_placement("capacity", error, "conflict") from error
            state = moved.state
            draft.put_node(state)
            draft.record_limits(moved.updates, node)
            grant = (grants or {}).get(container_id, Grant())
            placed = f"on {node}{why if isinstance(why, str) else why[container_id]}"
            record = container_of(
                spec,
                namespace,
                container_id,
                node=node,
                created=now,
                limits=placed_limits(moved.updates[container_id], resources),
                history=[HistoryEntry(at=now, event="placed", detail=placed)],
                gpus=grant.gpus,
                extended=grant.extended,
            )
            draft.put_container(record)
            draft.note(
                Note(
                    "placed",
                    placed,
                    namespace=namespace,
                    deployment=spec.name,
                    container=container_id,
                    node=node,
                )
            )
