"""Containers a deployment counts that no node holds: pending, each with a reason, until
the scheduler places them. Each function is a decider (``sequencer``) or part of one.

A container becomes pending when its node is drained or lost, or when it is deleted by
request (like Nomad's ``alloc stop`` or a Kubernetes pod delete): a stand-in with a new
id takes its place in its deployment's count and is placed at once when there is room,
else by a later scheduler pass (``schedule``), which runs whenever room may have
appeared. Only scaling down and deleting the deployment lower the count.

A container that preempted others is pending too, until their agent reports them gone.
A pass takes the deployments with such preemptors first, since the room their victims
leave was taken for them; then by priority, then the namespace furthest below its
quota's min, then the age of its oldest pending container. A
deployment's pending containers are alike, so they are placed together: as many as fit,
found by halving (about log2(n) placements), which bounds a pass by the deployments
waiting rather than the containers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial

from coordinator.deployments.books import DeploymentKey
from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused
from coordinator.deployments.placing import (
    counted,
    normalized,
    place_more,
    waiting_for_victims,
)
from coordinator.deployments.records import PendingRecord
from coordinator.deployments.translate import new_id, note_for
from coordinator.deployments.why import why_not
from coordinator.quotas import used
from coordinator.quotas.validation import parse_quota
from shared.api.containers import ContainerRecord
from shared.api.deployments import DeploymentSpec


@dataclass
class Pass:
    """What a scheduler pass did: pending id -> the node it went to, and for those still
    pending, why; after ``replace_with_stand_ins``, each released container's stand-in."""

    placed: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)
    stand_ins: dict[str, str] = field(default_factory=dict)  # released id -> stand-in id


def replace_with_stand_ins(
    draft: Draft,
    gone: list[ContainerRecord],
    cause: Callable[[ContainerRecord], str],
    *,
    event: str = "released",
    stop: bool = True,
) -> Pass:
    """Stop ``gone`` (live containers; ``event`` is the kind of each one's event), or
    release them at once when not ``stop`` (their node is lost), each leaving a pending
    stand-in; place the stand-ins where there is room. Those left pending have a
    ``pending`` event with the reason."""
    stand_ins: dict[str, PendingRecord] = {}
    for record in gone:
        if stop:
            draft.stop(record, cause(record))
        else:
            draft.release(record)
        draft.note(note_for(event, cause(record), record))
        stand_ins[record.id] = _stand_in(draft, record, cause(record))
    done = schedule(draft, only={pending.id for pending in stand_ins.values()})
    done.stand_ins = {old: pending.id for old, pending in stand_ins.items()}
    for old, pending in stand_ins.items():
        if pending.id in done.waiting:
            why = f"in place of {old} ({pending.cause}): {done.waiting[pending.id]}"
            draft.note(note_for("pending", why, pending))
    return done


def _stand_in(draft: Draft, record: ContainerRecord, cause: str) -> PendingRecord:
    """A pending container in place of ``record``, which this decision released."""
    pending = PendingRecord(
        id=new_id(record.namespace, record.deployment),
        namespace=record.namespace,
        deployment=record.deployment,
        since=draft.context.clock(),
        cause=cause,
        replaces=record.id,
    )
    draft.put_pending(pending)
    return pending


def schedule(draft: Draft, only: Iterable[str] | None = None) -> Pass:
    """One scheduler pass over every pending container (or the ids in ``only``)."""
    wanted = None if only is None else set(only)
    groups: dict[DeploymentKey, list[PendingRecord]] = {}
    for pending in draft.all_pending():
        if wanted is None or pending.id in wanted:
            groups.setdefault((pending.namespace, pending.deployment), []).append(pending)
    done = Pass()
    standing = _min_standing(draft, {namespace for namespace, _ in groups})
    specs = {key: _spec(draft, key) for key in groups}
    for key in sorted(groups, key=lambda k: _order(specs[k], standing, groups[k], k)):
        group = sorted(groups[key], key=lambda p: (p.since, p.id))
        placed, why = _place_group(draft, specs[key], key[0], group)
        for pending in group[:placed]:
            draft.drop_pending(pending.id)
            record = draft.container(pending.id)
            assert record is not None, f"{pending.id} was placed by this very pass"
            done.placed[pending.id] = record.node
        done.waiting.update((p.id, _preempted_stopping(draft, p) or why) for p in group[placed:])
    return done


def _preempted_stopping(draft: Draft, pending: PendingRecord) -> str:
    """Why a preemptor waits while the containers it preempted are still stopping, or ""."""
    found = (draft.stopping(victim) for victim in pending.preempted)
    stopping = [record for record in found if record is not None]
    return waiting_for_victims(stopping) if stopping else ""


def _spec(draft: Draft, key: DeploymentKey) -> DeploymentSpec:
    deployment = draft.deployment(key)
    assert deployment is not None, f"pending containers outlived deployment {key}"
    return deployment.spec


def _order(
    spec: DeploymentSpec,
    standing: dict[str, Fraction],
    group: list[PendingRecord],
    key: DeploymentKey,
) -> tuple[bool, int, float | Fraction, float, DeploymentKey]:
    oldest = min(pending.since for pending in group)
    preemptor = any(pending.preempted for pending in group)
    return (not preemptor, -spec.priority, standing.get(key[0], math.inf), oldest, key)


def _min_standing(draft: Draft, namespaces: set[str]) -> dict[str, Fraction]:
    """Namespace -> how far its quota's use has come towards its min: the largest
    used/min over the resources the min names (0 is furthest below). Namespaces that
    no quota with a min governs are not in it."""
    share_base = draft.context.share_base
    quotas = [q for q in draft.quotas() if q.min and namespaces & set(q.namespaces)]
    if not quotas:
        return {}
    containers = counted(draft)
    gb_per_gpu = draft.context.quotas.gb_per_gpu
    standing: dict[str, Fraction] = {}
    for quota in quotas:
        minimum = parse_quota(quota, share_base=share_base).min
        use = used(quota, containers, gb_per_gpu, share_base=share_base)
        ratios = [Fraction(use.get(r, 0)) / amount for r, amount in minimum.items() if amount]
        for namespace in quota.namespaces:
            standing[namespace] = max(ratios, default=Fraction(0))
    return standing


def _why(draft: Draft, spec: DeploymentSpec, refusal: DeployRefused) -> str:
    try:
        return why_not(draft, normalized(draft, spec), refusal)
    except DeployRefused:  # its resources break today's rules: the refusal says how
        return refusal.message


def _place_group(
    draft: Draft, spec: DeploymentSpec, namespace: str, group: list[PendingRecord]
) -> tuple[int, str]:
    """Place the first k of ``group`` for the largest k that fits (k containers of a
    deployment fit whenever k + 1 do); k, and why the next one does not fit ("" when
    all did)."""
    refused = ""
    low, high = 0, len(group)  # the first ``low`` are placed; more than ``high`` do not fit
    size = high
    while low < high:
        more = group[low:size]
        ids = [pending.id for pending in more]
        why = {p.id: f", in place of {p.replaces} ({p.cause})" for p in more}
        try:
            draft.attempt(partial(place_more, spec=spec, namespace=namespace, ids=ids, why=why))
        except DeployRefused as refusal:
            refused = _why(draft, spec, refusal)
            high = size - 1
        else:
            low = size
        size = (low + high + 1) // 2
    return low, refused
