"""Pools on containers: each pool's demand from its containers, pool limits at admission,
and the unbound containers' CPU quota from their pool's fair share.

Every container belongs to a pool (its deployment's, by default its namespace's). The pool
tree's update gets each pool's demand from its containers' requests, and after it the
unbound containers of each pool share the pool's CPU (its fair share of the cluster's
cores, split evenly, never above a container's own limit) as their CFS quota, pushed live
when it moves by more than ``QUOTA_CHANGE`` of its value.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from coordinator.deployments.ledger import Decision, Ledger
from coordinator.deployments.outcome import DeployRefused
from coordinator.deployments.records import ContainerRecord, HistoryEntry
from coordinator.deployments.translate import subtree
from coordinator.placement import Normalized
from coordinator.pools.access import pool_access

MIN_CPU_QUOTA = 1000  # microseconds: the kernel refuses a CFS quota below 1 ms
QUOTA_CHANGE = 0.05  # a pool share moving an unbound container's CPU quota less is ignored


class PoolLink(Ledger):
    """Pools seen from their containers."""

    def _check_pool_use(self, namespace: str, pool: str) -> None:
        """``DeployRefused`` unless ``namespace`` may place containers in ``pool``
        (``pools.access``): 422 ``unknown_pool``, 403 ``pool_forbidden``."""
        refused = pool_access(self._pools.config()["pools"], namespace, pool)
        if refused is not None:
            status = 422 if refused.code == "unknown_pool" else 403
            details: dict[str, object] = {"namespace": namespace, "pool": pool}
            raise DeployRefused("pool", refused.code, refused.message, status, details)

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
        return self._per_pool(self._requested)

    def pool_usages(self) -> dict[str, dict[str, float]]:
        """Pool -> what its containers use, as their agents last measured it: cores and
        bytes. A figure not measured yet (a container just placed, or on a node whose
        agent does not say) counts as what the container asks for."""

        def used(record: ContainerRecord) -> tuple[float, float]:
            cpu, memory = self._requested(record)
            seen = self._observed.get(record.id)
            if seen is None:
                return cpu, memory
            return (
                cpu if seen.cpu_usage is None else seen.cpu_usage,
                memory if seen.memory_usage is None else float(seen.memory_usage),
            )

        return self._per_pool(used)

    def _requested(self, record: ContainerRecord) -> tuple[float, float]:
        resources = self._nodes[record.node].allocations[record.id].resources
        return resources.cpu_request / resources.share_base, float(resources.memory_request)

    def _per_pool(
        self, amounts: Callable[[ContainerRecord], tuple[float, float]]
    ) -> dict[str, dict[str, float]]:
        """Pool -> its containers' ``amounts`` summed: {"cpu": cores, "memory": bytes}."""
        pools: dict[str, dict[str, float]] = {}
        for record in self._containers.values():
            cpu, memory = amounts(record)
            total = pools.setdefault(record.pool, {"cpu": 0.0, "memory": 0.0})
            total["cpu"] += cpu
            total["memory"] += memory
        return pools

    async def follow_pool_shares(self, cores: dict[str, float]) -> None:
        """Set each unbound container's CFS quota from its pool's cores (``cores``: pool
        -> cores of its fair share); containers of pools without a share keep theirs."""
        change = Decision()
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
