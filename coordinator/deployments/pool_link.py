"""Pools on containers: each pool's demand from its containers, pool limits at admission,
and the unbound containers' CPU weights (and quotas where a limit says so) from their
pool's fair share.

Every container belongs to a pool (its deployment's, by default its namespace's); a pool
the configuration lacks joins the tree on demand, top level with weight 1
(``coordinator.pools.on_demand``), so every container has a fair share. The pool
tree's update gets each pool's demand from its containers' requests; after it, the unbound
containers of each pool get CPU weights in proportion to their part of the pool's fair
share (which their agent adds up as the weight of the pool's cgroup on the host), and a
hard CFS quota only where a limit says so (``coordinator.pools.host_weights`` states the
mapping), pushed live through the agents' desired state when a weight or quota
moves by more than ``SHARE_CHANGE`` of its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from coordinator.deployments.books import Books
from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused, Kind
from coordinator.deployments.translate import subtree
from coordinator.placement import Normalized
from coordinator.pools.access import pool_access
from coordinator.pools.host_weights import (
    CpuWeight,
    PoolCpu,
    PoolDemand,
    member_weight,
    pool_ceilings,
    shares_for,
)
from coordinator.pools.tree import Share
from shared.api.containers import ContainerRecord, HistoryEntry
from shared.protocol import Limits

MIN_CPU_QUOTA = 1000  # microseconds: the kernel refuses a CFS quota below 1 ms
# A pool's share, or an unbound container's CPU weight or quota, moving by this fraction
# of its value or less is not pushed: the update runs every period, and each push is a
# docker update on the host.
SHARE_CHANGE = 0.05


def check_pool_use(draft: Draft, namespace: str, pool: str) -> None:
    """``DeployRefused`` unless ``namespace`` may place containers in ``pool``
    (``pools.access``): invalid ``unknown_pool``, forbidden ``pool_forbidden``."""
    refused = pool_access(draft.pools(), namespace, pool)
    if refused is not None:
        kind: Kind = "invalid" if refused.code == "unknown_pool" else "forbidden"
        details: dict[str, object] = {"namespace": namespace, "pool": pool}
        raise DeployRefused("pool", refused.code, refused.message, kind, details)


def check_pool_limits(draft: Draft, pool: str, resources: Normalized, count: int) -> None:
    """``count`` more containers of ``resources`` in ``pool`` must keep the pool and each
    of its ancestors within its ``resource_limits`` (over its whole subtree's containers);
    ``DeployRefused`` (forbidden, reason "pool") with the numbers otherwise. A pool not in the
    tree limits nothing. O(depth x subtree) index lookups."""
    pools = draft.pools()
    share_base = draft.context.share_base
    adding = {
        "cpu": count * resources.cpu_request / resources.share_base,
        "memory": float(count * resources.memory_request),
    }
    name: str | None = pool
    while name is not None and name in pools:
        limits = pools[name].get("resource_limits") or {}
        if limits:
            cpu = memory = 0
            for member in subtree(pools, name):
                member_cpu, member_memory = draft.pool_requested(member)
                cpu, memory = cpu + member_cpu, memory + member_memory
            used = {"cpu": cpu / share_base, "memory": float(memory)}
            for resource, limit in limits.items():
                taken = used.get(resource, 0.0)
                if taken + adding.get(resource, 0.0) > float(limit):
                    raise DeployRefused(
                        "pool",
                        "pool_limit_exceeded",
                        f"pool {name!r}: {resource} used {taken:g} + request"
                        f" {adding.get(resource, 0.0):g} > limit {float(limit):g}",
                        "forbidden",
                        {"pool": name, "resource": resource, "used": taken, "limit": limit},
                    )
        name = pools[name].get("parent")


def pool_demands(books: Books, share_base: int) -> dict[str, dict[str, float]]:
    """Pool -> what its containers ask for: cores and bytes. O(pools)."""
    demands = {}
    for pool in books.pools():
        cpu, memory = books.pool_requested(pool)
        demands[pool] = {"cpu": cpu / share_base, "memory": float(memory)}
    return demands


def pool_usages(books: Books, share_base: int) -> dict[str, dict[str, float]]:
    """Pool -> what its containers use, as their agents last measured it: cores and bytes.
    A container its agent reports not running (exited, failed, not made yet) uses nothing;
    a figure not measured yet (a container just placed, or on a node whose agent does not
    say) counts as what the container asks for. O(containers reported)."""
    usages = pool_demands(books, share_base)
    for container_id, seen in books.observed.items():
        charge = books.charged(container_id)
        if charge is None:
            continue
        pool, cpu, memory = charge
        total = usages[pool]
        running = seen.state == "running"
        cpu_used = seen.cpu_usage if running else 0.0
        memory_used = seen.memory_usage if running else 0
        if cpu_used is not None:
            total["cpu"] += cpu_used - cpu / share_base
        if memory_used is not None:
            total["memory"] += memory_used - memory
    return usages


def pool_targets(
    pools: Mapping[str, Mapping[str, Any]], shares: Mapping[str, Share], total_cpu: float
) -> dict[str, PoolCpu]:
    """Pool -> its fair share in cores and the ceiling a limit puts on it
    (``host_weights.pool_ceilings``), for every pool of the update."""
    ceilings = pool_ceilings(pools, shares, total_cpu)
    return {
        pool: PoolCpu(share.total * total_cpu, ceilings.get(pool)) for pool, share in shares.items()
    }


def target_moved(before: PoolCpu, after: PoolCpu) -> bool:
    """Whether a pool's target moved by more than ``SHARE_CHANGE`` (a ceiling that
    appears or goes always counts)."""
    if (before.ceiling is None) != (after.ceiling is None):
        return True
    pairs = [(before.cores, after.cores)]
    if before.ceiling is not None and after.ceiling is not None:
        pairs.append((before.ceiling, after.ceiling))
    return any(abs(new - old) > SHARE_CHANGE * old for old, new in pairs)


def follow_pool_shares(draft: Draft, targets: Mapping[str, PoolCpu]) -> None:
    """Set each unbound container's CPU weight and quota from its pool's target
    (``coordinator.pools.host_weights``): the pool's containers pinned to cores count
    against its cores first. A weight or quota moving by ``SHARE_CHANGE`` or less is left
    as it is. O(the containers of those pools), with each distinct (demand, limit,
    current settings) worked out once: the update runs every second, and working out
    every container took 300 to 500 ms of CPU at 33,000 containers."""
    now = draft.context.clock()
    for pool, target in targets.items():
        unbound: list[tuple[ContainerRecord, float, float | None]] = []
        pinned = 0.0
        for record in draft.of_pools([pool]):
            resources = draft.node_state(record.node).allocations[record.id].resources
            if record.cpu_bind:
                pinned += demand_of(resources)
            else:
                unbound.append((record, demand_of(resources), _own_limit(resources)))
        if not unbound:
            continue
        cpu = PoolCpu(max(0.0, target.cores - pinned), target.ceiling)
        together = PoolDemand(sum(demand for _, demand, _ in unbound), len(unbound))
        worked_out: dict[tuple[float, float | None, Limits], Limits] = {}
        for record, demand, limit in unbound:
            case = (demand, limit, record.limits)
            limits = worked_out.get(case)
            if limits is None:
                wanted = member_weight(cpu, together, demand, limit)
                limits = worked_out[case] = _limits(record.limits, wanted)
            if limits == record.limits:
                continue
            detail = "; ".join(
                f"{name} {getattr(record.limits, name)} -> {getattr(limits, name)}"
                for name in ("cpu_shares", "cpu_quota")
                if getattr(record.limits, name) != getattr(limits, name)
            )
            entry = HistoryEntry(at=now, event="pool share", detail=detail)
            draft.change.containers[record.id] = msgspec.structs.replace(
                record, limits=limits, history=[*record.history, entry]
            )


def _own_limit(resources: Normalized) -> float | None:
    """The container's own CPU limit in cores (None without one)."""
    return resources.cpu_limit / resources.share_base if resources.cpu_limit else None


def demand_of(resources: Normalized) -> float:
    """CPU demand in cores of a container of ``resources``: its limit, or its request."""
    return (resources.cpu_limit or resources.cpu_request) / resources.share_base


def placed_limits(limits: Limits, resources: Normalized) -> Limits:
    """A newly placed container's Docker settings: an unbound one weighs what it asks
    for, 1024 per core of its demand, instead of placement's flat 1024 (placement spec
    section 7). That is its entitlement whenever its pool's fair share covers the pool's
    demand, as on a cluster with room, so the pools' next update (``follow_pool_shares``)
    leaves it as it is. With 1024, every new unbound container was written and pushed to
    its agent twice (its host making it, then a docker update), and the update a second
    later walked and rewrote each one: 1,000 of the 1,000 containers a deployment had
    just placed."""
    if resources.cpu_bind:
        return limits
    return msgspec.structs.replace(limits, cpu_shares=shares_for(demand_of(resources)))


def _limits(current: Limits, wanted: CpuWeight) -> Limits:
    """``current`` with the wanted weight and quota, or ``current`` itself when neither
    moves by more than ``SHARE_CHANGE``."""
    quota = -1
    if wanted.quota is not None:
        quota = max(MIN_CPU_QUOTA, int(wanted.quota * current.cpu_period))
    shares = wanted.shares
    if _close(shares, current.cpu_shares):
        shares = current.cpu_shares
    if quota > 0 and current.cpu_quota > 0 and _close(quota, current.cpu_quota):
        quota = current.cpu_quota
    if (shares, quota) == (current.cpu_shares, current.cpu_quota):
        return current
    return msgspec.structs.replace(current, cpu_shares=shares, cpu_quota=quota)


def _close(new: int, old: int) -> bool:
    return abs(new - old) <= SHARE_CHANGE * old
