"""Pools on the hosts: the pool tree's fair shares as the CPU weights of the unbound
containers, with a hard CFS quota only where a limit says so (pools spec section 9).

The mapping, in the spec's words:

0. Every container belongs to a leaf pool: its deployment's, by default its namespace's,
   which joins the tree on demand as a top-level pool of weight 1 when it is not
   configured (``coordinator.pools.on_demand``; the spec's single ``default`` pool made
   per namespace). So every unbound container's weight comes from the tree.
1. A pool's fair share (``total``, a share of the cluster) is its CPU allowance:
   T x total_cpu cores. Its containers pinned to cores count against it first; the rest
   is apportioned to its unbound containers in proportion to their CPU demand (a
   container's CPU limit, or its request without one). That part is what the container
   is *entitled* to; a pool's entitlement on a host is the sum over its containers there.
2. Every unbound container's CPU weight is its entitlement at 1024 per core (Docker's
   convention: ``cpu.shares`` 1024 is one core's weight), sent to its agent as its
   ``cpu_shares`` with the name of its pool. Weights are therefore in proportion to
   entitlements across all pools and at every depth of the tree: the tree has already
   folded nesting, guarantees, limits and volumes into the leaf pools' fair shares, and
   each host gets every pool's fair share in proportion to the demand the pool placed
   there. An agent on Docker's cgroupfs driver, or its systemd driver on cgroup v2, puts
   a pool's containers on its host in one cgroup of the pool's (``shared.pool_cgroups``;
   a slice under systemd) weighted with their entitlements
   added: the pool's fair share on that host at 1024 per core; each member keeps its own
   weight inside, against its siblings only. Under contention the kernel hands out CPU
   between the pools' cgroups in proportion to these weights, so each pool gets its fair
   share on the host, and within a pool between its members by demand; CPU that some
   container leaves idle goes to its pool's other containers first, then to whoever can
   use it, since a weight limits nothing.
3. A hard CFS quota stays only where a limit says so: the container's own CPU limit; its
   part (by demand) of a pool's ``resource_limits`` cpu, the pool's or any ancestor's
   (an ancestor's limit divided over its subtree in proportion to fair shares); and a
   burst pool spending its volume (integral share > 0), which may use its fair share and
   no more, so that the volume it is charged is the CPU it got. The quota is never above
   the container's own limit and never below 0.01 core.

Under CPU pressure (spec section 9: "containers of pools whose usage exceeds their fair
share are throttled first, largest relative excess first; containers within their pool's
share last"): on a contended host the kernel gives each container min(what it wants,
L x its weight) at one level L for the host. Per pool that is the spec's order exactly:
a pool within its share gets what it wants, and the pools above theirs are cut, the
largest use relative to its share first, down to one common multiple of their shares,
never below the share while the shares fit the host. It holds per pool as long as each
pool's containers on a host are loaded alike (all busy, all idle, or each at the same
fraction of its demand; one container per pool per host is the common case). With a
cgroup per pool it holds however a pool's containers are loaded: the kernel fills per
pool first. Side by side, as containers run where the agent does not group them (Docker's
systemd driver on cgroup v1, or a container made before its agent grouped), it does not
hold for a pool with an idle and a busy container on one host: the idle one's weight goes
to every container there by weight, not to its busy sibling (shares 1 and 1 core on 2
CPUs, ``pa`` one idle and one busy container of 1 core, ``pb`` one busy of 2: ``pa`` gets
2/3 core and ``pb``, above its share, 4/3; with the pools' cgroups 1 and 1). Proven over
a model of the kernel in ``tests/coordinator/pools/test_kernel_split.py``, and measured
in ``bench/pool_cgroups.py`` and ``tests/docker/test_pool_cgroups.py``.

Weights are clamped to cgroup v1's 2..262144 ``cpu.shares``. Under cgroup v2 Docker writes
``cpu.weight`` from the shares through runc: runc before 1.3.2 (Debian bookworm's 1.1.5,
the cgroup v2 VM's) maps linearly, ``1 + (shares - 2) * 9999 // 262142``, so proportions
hold there to within one weight unit (about 1/39 of a core at 1024 per core); runc 1.3.2
and later map log-quadratically (1024 -> 100), which keeps order but not proportion.

    weights = host_weights({"pa": PoolCpu(1.0)}, [Unbound("c1", "pa", "n1", demand=1.0)])
    weights["c1"]  -> CpuWeight(shares=1024, quota=None)

Cost O(pools + containers).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from coordinator.pools.config import BURST
from coordinator.pools.tree import Share

SHARES_PER_CORE = 1024
MIN_SHARES = 2  # cgroup v1's bounds on cpu.shares
MAX_SHARES = 262_144
MIN_QUOTA_CORES = 0.01  # the spec's floor for a quota (the kernel refuses below 1 ms)


@dataclass(frozen=True, slots=True)
class PoolCpu:
    """A pool's CPU on the hosts: ``cores`` of fair share for its unbound containers
    (after its pinned containers' part), and ``ceiling`` cores it may not exceed (None:
    no limit says so)."""

    cores: float
    ceiling: float | None = None


@dataclass(frozen=True, slots=True)
class Unbound:
    """An unbound container: its pool, its node, its CPU demand in cores and its own CPU
    limit in cores (None without one)."""

    id: str
    pool: str
    node: str
    demand: float
    limit: float | None = None


@dataclass(frozen=True, slots=True)
class CpuWeight:
    """What a container gets: ``shares`` (its weight at 1024 per core of entitlement) and
    ``quota`` in cores (None: no hard quota)."""

    shares: int
    quota: float | None


def host_weights(
    pools: Mapping[str, PoolCpu], containers: Iterable[Unbound]
) -> dict[str, CpuWeight]:
    """Container id -> its weight and quota (the module docstring's mapping).

    Postconditions: ``shares == clamp(round(1024 * entitled), 2, 262144)`` where
    ``entitled = pool.cores * demand / (the pool's summed demand)`` (split evenly when the
    pool's demand is 0); ``quota`` is None or within [min(0.01, limit), limit] for a
    container with a limit. A container of a pool not in ``pools`` is entitled to 0 (the
    coordinator passes every pool that holds containers: one not configured is created on
    demand, ``coordinator.pools.on_demand``)."""
    listed = list(containers)
    demand: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for container in listed:
        demand[container.pool] += container.demand
        count[container.pool] += 1
    return {
        container.id: member_weight(
            pools.get(container.pool, PoolCpu(0.0)),
            PoolDemand(demand[container.pool], count[container.pool]),
            container.demand,
            container.limit,
        )
        for container in listed
    }


@dataclass(frozen=True, slots=True)
class PoolDemand:
    """What a pool's unbound containers ask for together: ``cores`` summed, and how many
    they are."""

    cores: float
    count: int


def member_weight(
    pool: PoolCpu, together: PoolDemand, demand: float, limit: float | None
) -> CpuWeight:
    """The weight and quota of one of the pool's unbound containers, by its ``demand`` and
    its own ``limit`` in cores (``host_weights``' postconditions): it depends on nothing
    else of the container, so containers alike in both get the same."""
    part = demand / together.cores if together.cores > 0 else 1 / together.count
    return CpuWeight(
        shares=shares_for(pool.cores * part),
        quota=_quota(None if pool.ceiling is None else pool.ceiling * part, limit),
    )


def shares_for(cores: float) -> int:
    """``cores`` of entitlement as cgroup v1 cpu.shares: 1024 per core, rounded, in
    2..262144."""
    return min(MAX_SHARES, max(MIN_SHARES, round(SHARES_PER_CORE * max(cores, 0.0))))


def _quota(ceiling: float | None, limit: float | None) -> float | None:
    caps = [cap for cap in (ceiling, limit) if cap is not None]
    if not caps:
        return None
    quota = max(min(caps), MIN_QUOTA_CORES)
    return quota if limit is None else min(quota, limit)


def pool_ceilings(
    pools: Mapping[str, Mapping[str, Any]], shares: Mapping[str, Share], total_cpu: float
) -> dict[str, float]:
    """Pool -> the cores it may not exceed, for the pools some limit caps (module
    docstring, item 3); pools absent are uncapped.

    ``pools``: the configured pools as written (name -> fields, a valid tree); ``shares``:
    the last update's fair shares, ratios of the cluster. An ancestor ``a`` with a cpu
    limit L_a caps pool p below it at L_a x T_p / T_a (0 when T_a is 0), so the caps of
    its subtree's leaves add up to L_a. Cost O(pools x depth)."""
    ceilings: dict[str, float] = {}
    for name, spec in pools.items():
        caps = []
        share = shares.get(name)
        mine = 0.0 if share is None else share.total
        integral = spec.get("integral_guarantees") or {}
        if integral.get("guarantee_type") == BURST and share is not None and share.integral > 0:
            caps.append(share.total * total_cpu)
        ancestor: str | None = name
        while ancestor is not None and ancestor in pools:
            limit = (pools[ancestor].get("resource_limits") or {}).get("cpu")
            if limit is not None:
                above = shares.get(ancestor)
                whole = 0.0 if above is None else above.total
                caps.append(float(limit) * mine / whole if whole > 0 else 0.0)
            ancestor = pools[ancestor].get("parent")
        if caps:
            ceilings[name] = min(caps)
    return ceilings
