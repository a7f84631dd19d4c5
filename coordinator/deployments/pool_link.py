"""Pools on containers: each pool's demand from its containers, pool limits at admission,
and the unbound containers' CPU quota from their pool's fair share.

Every container belongs to a pool (its deployment's, by default its namespace's). The pool
tree's update gets each pool's demand from its containers' requests, and after it the
unbound containers of each pool share the pool's CPU (its fair share of the cluster's
cores, split evenly, never above a container's own limit) as their CFS quota, pushed live
when it moves by more than ``QUOTA_CHANGE`` of its value.
"""

from __future__ import annotations

import msgspec

from coordinator.deployments.books import Books
from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused, Kind
from coordinator.deployments.translate import subtree
from coordinator.placement import Normalized
from coordinator.pools.access import pool_access
from shared.api.containers import HistoryEntry

MIN_CPU_QUOTA = 1000  # microseconds: the kernel refuses a CFS quota below 1 ms
QUOTA_CHANGE = 0.05  # a pool share moving an unbound container's CPU quota less is ignored


def check_pool_use(draft: Draft, namespace: str, pool: str) -> None:
    """``DeployRefused`` unless ``namespace`` may place containers in ``pool``
    (``pools.access``): invalid ``unknown_pool``, forbidden ``pool_forbidden``."""
    refused = pool_access(draft.context.pools.config()["pools"], namespace, pool)
    if refused is not None:
        kind: Kind = "invalid" if refused.code == "unknown_pool" else "forbidden"
        details: dict[str, object] = {"namespace": namespace, "pool": pool}
        raise DeployRefused("pool", refused.code, refused.message, kind, details)


def check_pool_limits(draft: Draft, pool: str, resources: Normalized, count: int) -> None:
    """``count`` more containers of ``resources`` in ``pool`` must keep the pool and each
    of its ancestors within its ``resource_limits`` (over its whole subtree's containers);
    ``DeployRefused`` (forbidden, reason "pool") with the numbers otherwise. A pool not in the
    tree limits nothing. O(depth x subtree) index lookups."""
    pools = draft.context.pools.config()["pools"]
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


def follow_pool_shares(draft: Draft, cores: dict[str, float]) -> None:
    """Set each unbound container's CFS quota from its pool's cores (``cores``: pool ->
    cores of its fair share); containers of pools without a share keep theirs. O(the
    containers of those pools)."""
    now = draft.context.clock()
    for pool, pool_cores in cores.items():
        unbound = [c for c in draft.of_pools([pool]) if not c.cpu_bind]
        if not unbound:
            continue
        each = pool_cores / len(unbound)
        for record in unbound:
            resources = draft.node_state(record.node).allocations[record.id].resources
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
                at=now, event="pool share", detail=f"cpu_quota {current} -> {quota}"
            )
            draft.change.containers[record.id] = msgspec.structs.replace(
                record, limits=limits, history=[*record.history, entry]
            )
