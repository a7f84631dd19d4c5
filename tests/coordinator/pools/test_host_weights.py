"""Pools on the hosts (``coordinator.pools.host_weights``): the issue's cases through the
real pool tree, and properties over random trees and placements (hypothesis):

- on every host, each container's weight is its entitlement at 1024 per core (within
  rounding, unless clamped to 2..262144), and the weight of its pool's cgroup there
  (``shared.pool_cgroups.group_shares``, as the agent sets it) is the pool's fair share on
  that host at 1024 per core, so any two pools' cgroups there weigh in proportion to
  their fair shares on that host, pools created on demand included (a container's pool
  need not be configured: ``coordinator.pools.on_demand``);
- a container's quota never exceeds its own limit, and exists only where a limit says so;
- the ceilings of an ancestor's leaves add up to at most its CPU limit.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.pools import PoolTree
from coordinator.pools.host_weights import (
    MAX_SHARES,
    MIN_SHARES,
    SHARES_PER_CORE,
    CpuWeight,
    PoolCpu,
    Unbound,
    host_weights,
    pool_ceilings,
)
from coordinator.pools.on_demand import tree_pools
from shared.pool_cgroups import group_shares
from tests.coordinator.pools.test_properties import configs

TWO_CPUS = {"cpu": 2.0, "memory": 0.0}
BURNERS = [Unbound(f"pa-{i}", "pa", "host", 1.0, 1.0) for i in range(3)] + [
    Unbound("pb-0", "pb", "host", 1.0, 1.0)
]


def _weights(config: dict[str, Any], containers: list[Unbound]) -> dict[str, CpuWeight]:
    demands: dict[str, dict[str, float]] = defaultdict(lambda: {"cpu": 0.0})
    for container in containers:
        demands[container.pool]["cpu"] += container.demand
    shares = PoolTree.from_config(config).update(TWO_CPUS, dict(demands), now=0.0)
    ceilings = pool_ceilings(config["pools"], shares, TWO_CPUS["cpu"])
    targets = {p: PoolCpu(s.total * 2.0, ceilings.get(p)) for p, s in shares.items()}
    return host_weights(targets, containers)


def test_equal_pools_get_equal_weights_on_the_host() -> None:
    weights = _weights({"pools": {"pa": {}, "pb": {}}}, BURNERS)
    assert {cid: w.shares for cid, w in weights.items()} == {
        "pa-0": 341,
        "pa-1": 341,
        "pa-2": 341,
        "pb-0": 1024,
    }
    assert {w.quota for w in weights.values()} == {1.0}  # each burner's own limit only


def test_a_strong_guarantee_adds_to_the_weights_of_its_pool() -> None:
    """Section 3, step 5: free capacity is added to guarantees by weight, so pa (strong
    1.5 of 2 cores, demand 3) gets 1.5 + 0.25 and pb (demand 1) 0.25: 1.75 / 0.25."""
    pools = {"pa": {"strong_guarantee_resources": {"cpu": 1.5}}, "pb": {}}
    weights = _weights({"pools": pools}, BURNERS)
    assert [weights[c.id].shares for c in BURNERS] == [597, 597, 597, 256]


def test_a_pool_limit_caps_by_quota_and_a_missing_pool_gets_the_least_weight() -> None:
    pools = {"pa": {"resource_limits": {"cpu": 1.2}}, "pb": {}}
    weights = _weights({"pools": pools}, BURNERS)
    assert [round(weights[c.id].quota or 0, 6) for c in BURNERS] == [0.4, 0.4, 0.4, 1.0]
    lost = host_weights({}, [Unbound("x", "gone", "host", 1.0)])
    assert lost == {"x": CpuWeight(shares=MIN_SHARES, quota=None)}


def test_a_burst_pool_spending_its_volume_is_held_to_its_fair_share() -> None:
    burst = {
        "guarantee_type": "burst",
        "resource_flow": {"cpu": 0.5},
        "burst_guarantee_resources": {"cpu": 1.0},
    }
    config = {"pools": {"pa": {"integral_guarantees": burst}, "pb": {}}}
    state = {"updated_at": 0.0, "pools": {"pa": {"volume_ratio_s": 100.0}}}
    tree = PoolTree.from_config(config, state=state)
    shares = tree.update(TWO_CPUS, {"pa": {"cpu": 3.0}, "pb": {"cpu": 1.0}}, now=1.0)
    assert shares["pa"].integral > 0
    ceilings = pool_ceilings(config["pools"], shares, 2.0)
    assert ceilings == {"pa": shares["pa"].total * 2.0}


UNCONFIGURED = ["ns-0", "ns-1"]  # namespaces' own pools, created on demand


@st.composite
def placements(draw: st.DrawFn) -> tuple[dict[str, Any], list[Unbound]]:
    """A tree and unbound containers in its leaves, and in pools it does not hold."""
    config = draw(configs())
    pools = config["pools"]
    leaves = [p for p in pools if not any(q["parent"] == p for q in pools.values())]
    leaves += UNCONFIGURED
    containers = []
    for index in range(draw(st.integers(1, 12))):
        demand = draw(st.sampled_from([0.01, 0.1, 0.5, 1.0, 2.0, 7.0]))
        limit = draw(st.sampled_from([None, demand, demand * 2]))
        pool, node = draw(st.sampled_from(leaves)), draw(st.sampled_from(["n0", "n1", "n2"]))
        containers.append(Unbound(f"c{index}", pool, node, demand, limit))
    return config, containers


@given(placements(), st.sampled_from([2.0, 16.0, 300.0]))
@settings(max_examples=300, deadline=None)
def test_per_host_weights_follow_fair_shares_and_quotas_keep_limits(
    placement: tuple[dict[str, Any], list[Unbound]], total_cpu: float
) -> None:
    config, containers = placement
    demands: dict[str, dict[str, float]] = defaultdict(lambda: {"cpu": 0.0})
    for container in containers:
        demands[container.pool]["cpu"] += container.demand
    pools = tree_pools(config["pools"], demands)
    tree = PoolTree.from_config({**config, "pools": pools})
    shares = tree.update({"cpu": total_cpu}, dict(demands), now=0.0)
    ceilings = pool_ceilings(pools, shares, total_cpu)
    targets = {p: PoolCpu(s.total * total_cpu, ceilings.get(p)) for p, s in shares.items()}
    weights = host_weights(targets, containers)
    assert {c.pool for c in containers} <= set(targets)  # every container's pool has a share

    # each pool's fair share on each host, and the weight of its cgroup there
    fair: dict[tuple[str, str], float] = defaultdict(float)
    members: dict[tuple[str, str], list[int]] = defaultdict(list)
    clamped: set[tuple[str, str]] = set()
    for container in containers:
        entitled = targets[container.pool].cores * container.demand
        entitled /= demands[container.pool]["cpu"]
        key = (container.node, container.pool)
        fair[key] += entitled
        members[key].append(weights[container.id].shares)
        if not MIN_SHARES < SHARES_PER_CORE * entitled < MAX_SHARES:
            clamped.add(key)
    for key, cores in fair.items():
        if key not in clamped and SHARES_PER_CORE * cores < MAX_SHARES - len(members[key]):
            parent = group_shares(members[key])
            assert abs(parent - SHARES_PER_CORE * cores) <= 0.5 * len(members[key])

    for container in containers:
        quota = weights[container.id].quota
        if container.limit is not None:
            assert quota is not None
            assert quota <= container.limit
        if ceilings.get(container.pool) is None and container.limit is None:
            assert quota is None

    for name, spec in config["pools"].items():
        limit = (spec.get("resource_limits") or {}).get("cpu")
        if limit is None:
            continue
        below = [p for p in ceilings if _under(config["pools"], p, name)]
        leaves = [p for p in below if not any(q["parent"] == p for q in config["pools"].values())]
        assert sum(ceilings[p] for p in leaves) <= limit + 1e-6


def _under(pools: dict[str, Any], pool: str | None, ancestor: str) -> bool:
    while pool is not None:
        if pool == ancestor:
            return True
        pool = pools[pool]["parent"]
    return False
