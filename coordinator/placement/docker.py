"""The Docker settings of one container, as data (placement spec section 7).

Every field is written on create and on each update, so a settings value is complete:
it is ``shared.protocol.Limits``, exactly what the agent receives.

    container_limits(Plan({3: 100, 5: 70}, numa=0, memory=GiB, fragment=5), bound_1_7)
        -> Limits(cpuset_cpus="3,5", cpuset_mems="0", cpu_shares=717, cpu_quota=-1,
                  cpu_period=100000, mem_limit=GiB, memswap_limit=GiB, mem_reservation=GiB // 2)
    container_limits(memory_plan, memory_mode_2cpu, shared_pool=(0, 1, 2))
        -> Limits(cpuset_cpus="0,1,2", cpu_shares=1024, cpu_quota=200000, ...)
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.placement.node import Plan
from coordinator.placement.request import MIN_MEMORY, Normalized
from shared.cpuset import docker_cpuset
from shared.protocol import Limits

CPU_PERIOD = 100_000  # microseconds: CFS's default period
FULL_SHARES = 1024  # Docker's default cpu-shares: a whole core's weight
MIN_SHARES = 2  # the kernel's minimum cpu.shares


def fragment_shares(pieces: int, share_base: int) -> int:
    """``max(2, round_half_up(1024 * pieces / share_base))`` in exact integer arithmetic:
    round_half_up(a / b) = (2a + b) // 2b. 70 of 100 pieces -> 717."""
    return max(MIN_SHARES, (2 * FULL_SHARES * pieces + share_base) // (2 * share_base))


def container_limits(plan: Plan, resources: Normalized, shared_pool: Iterable[int] = ()) -> Limits:
    """Section 7's table for one container.

    cpu-bind (``resources.cpu_bind``): cpuset = the plan's cores, mems = its NUMA id
    (NUMA-local) or "", shares from its fragment's pieces or 1024, quota -1. Memory mode:
    cpuset = ``shared_pool`` (the node's shared pool, ``NodeState.shared_pool()``), mems
    "", shares 1024, quota = cpu_limit * 100000 // P or -1 without a limit. Memory (both):
    limit and swap limit = memory_limit (0 = none), reservation max(limit // 2, 6Mi) or 0;
    soft memory: limit 0, swap limit 0, reservation = memory_request. Cost O(c log c).
    """
    p = resources.share_base
    if resources.cpu_bind:
        cpus = docker_cpuset(plan.cores)
        mems = "" if plan.numa is None else str(plan.numa)
        frag = plan.fragment
        shares = FULL_SHARES if frag is None else fragment_shares(plan.cores[frag], p)
        quota = -1
    else:
        cpus = docker_cpuset(shared_pool)
        mems = ""
        shares = FULL_SHARES
        quota = resources.cpu_limit * CPU_PERIOD // p if resources.cpu_limit else -1
    if resources.soft_memory:
        mem_limit, reservation = 0, resources.memory_request
    else:
        mem_limit = resources.memory_limit
        reservation = max(mem_limit // 2, MIN_MEMORY) if mem_limit else 0
    return Limits(
        cpuset_cpus=cpus,
        cpuset_mems=mems,
        cpu_shares=shares,
        cpu_quota=quota,
        cpu_period=CPU_PERIOD,
        mem_limit=mem_limit,
        memswap_limit=mem_limit,
        mem_reservation=reservation,
    )
