"""Docker settings (spec section 7), one row per line of the table."""

from __future__ import annotations

import pytest

from coordinator.placement import GiB, MiB, Normalized, Plan, container_limits
from coordinator.placement.docker import fragment_shares
from shared.protocol import Limits

MEMORY_PLAN = Plan({}, None, GiB, None)

# (plan, resources, shared pool, expected Limits)
ROWS = [
    pytest.param(
        Plan({5: 70, 3: 100}, 0, GiB, 5),
        Normalized(170, 170, GiB, GiB, True, False, 100),
        (),
        Limits(
            cpuset_cpus="3,5",
            cpuset_mems="0",
            cpu_shares=717,
            cpu_quota=-1,
            cpu_period=100_000,
            mem_limit=GiB,
            memswap_limit=GiB,
            mem_reservation=GiB // 2,
        ),
        id="bind-fragment-numa-local",
    ),
    pytest.param(
        Plan({12: 100, 2: 100}, None, GiB, None),
        Normalized(200, 200, GiB, GiB, True, False, 100),
        (),
        Limits(
            cpuset_cpus="2,12",
            cpuset_mems="",
            cpu_shares=1024,
            cpu_quota=-1,
            cpu_period=100_000,
            mem_limit=GiB,
            memswap_limit=GiB,
            mem_reservation=GiB // 2,
        ),
        id="bind-whole-cross-numa-numeric-order",
    ),
    pytest.param(
        Plan({4: 1}, None, 0, 4),
        Normalized(1, 0, 0, 0, True, False, 1000),
        (),
        Limits(cpuset_cpus="4", cpu_shares=2, cpu_quota=-1, cpu_period=100_000),
        id="bind-tiny-fragment-min-2-shares-no-memory",
    ),
    pytest.param(
        MEMORY_PLAN,
        Normalized(200, 250, GiB, 2 * GiB, False, False, 100),
        (0, 1, 7),
        Limits(
            cpuset_cpus="0,1,7",
            cpuset_mems="",
            cpu_shares=1024,
            cpu_quota=250_000,
            cpu_period=100_000,
            mem_limit=2 * GiB,
            memswap_limit=2 * GiB,
            mem_reservation=GiB,
        ),
        id="memory-mode-with-cpu-limit",
    ),
    pytest.param(
        MEMORY_PLAN,
        Normalized(200, 0, GiB, GiB, False, False, 100),
        (3,),
        Limits(
            cpuset_cpus="3",
            cpu_shares=1024,
            cpu_quota=-1,
            cpu_period=100_000,
            mem_limit=GiB,
            memswap_limit=GiB,
            mem_reservation=GiB // 2,
        ),
        id="memory-mode-without-cpu-limit",
    ),
    pytest.param(
        MEMORY_PLAN,
        Normalized(5, 5, GiB, GiB, False, False, 1000),
        (0,),
        Limits(
            cpuset_cpus="0",
            cpu_shares=1024,
            cpu_quota=500,
            cpu_period=100_000,
            mem_limit=GiB,
            memswap_limit=GiB,
            mem_reservation=GiB // 2,
        ),
        id="memory-mode-quota-in-pieces-of-1000",
    ),
    pytest.param(
        Plan({0: 100}, 1, GiB, None),
        Normalized(100, 100, GiB, 2 * GiB, True, True, 100),
        (),
        Limits(
            cpuset_cpus="0",
            cpuset_mems="1",
            cpu_shares=1024,
            cpu_quota=-1,
            cpu_period=100_000,
            mem_limit=0,
            memswap_limit=0,
            mem_reservation=GiB,
        ),
        id="bind-soft-memory",
    ),
    pytest.param(
        MEMORY_PLAN,
        Normalized(100, 0, GiB, 2 * GiB, False, True, 100),
        (0, 1),
        Limits(
            cpuset_cpus="0,1",
            cpu_shares=1024,
            cpu_quota=-1,
            cpu_period=100_000,
            mem_limit=0,
            memswap_limit=0,
            mem_reservation=GiB,
        ),
        id="memory-mode-soft-memory",
    ),
    pytest.param(
        MEMORY_PLAN,
        Normalized(100, 0, GiB, 0, False, False, 100),
        (0,),
        Limits(cpuset_cpus="0", cpu_shares=1024, cpu_quota=-1, cpu_period=100_000),
        id="memory-limit-0-no-hard-limit",
    ),
    pytest.param(
        MEMORY_PLAN,
        Normalized(100, 0, 8 * MiB, 8 * MiB, False, False, 100),
        (0,),
        Limits(
            cpuset_cpus="0",
            cpu_shares=1024,
            cpu_quota=-1,
            cpu_period=100_000,
            mem_limit=8 * MiB,
            memswap_limit=8 * MiB,
            mem_reservation=6 * MiB,
        ),
        id="reservation-floor-6Mi",
    ),
]


@pytest.mark.parametrize(("plan", "resources", "pool", "expected"), ROWS)
def test_docker_settings(
    plan: Plan, resources: Normalized, pool: tuple[int, ...], expected: Limits
) -> None:
    assert container_limits(plan, resources, pool) == expected


@pytest.mark.parametrize(
    ("pieces", "share_base", "shares"),
    [
        pytest.param(70, 100, 717, id="seed-1.7"),  # 716.8 -> 717
        pytest.param(50, 100, 512, id="half-core"),
        pytest.param(1, 100, 10, id="one-piece"),  # 10.24 -> 10
        pytest.param(1, 1000, 2, id="floor-2"),  # 1.024 -> 1 -> 2
        pytest.param(5, 2048, 3, id="half-rounds-up"),  # 2.5 -> 3 (not banker's 2)
        pytest.param(3, 2048, 2, id="one-and-a-half"),  # 1.5 -> 2
        pytest.param(99, 100, 1014, id="nearly-whole"),  # 1013.76 -> 1014
    ],
)
def test_fragment_shares(pieces: int, share_base: int, shares: int) -> None:
    assert fragment_shares(pieces, share_base) == shares
