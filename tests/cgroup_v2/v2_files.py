"""What a container's cgroup v2 files show for the limits Docker was given (runc with the
systemd driver, under ``system.slice/docker-<id>.scope``):

    expected_files(limits, runc="1.1.5", online=CpuSet([0, 1]), memory_nodes=CpuSet([0]))
    # {"cpuset.cpus.effective": "0", "cpu.weight": "20", "cpu.max": "max 100000", ...}
    cpu_weight(512, runc="1.1.5")   # 20: the linear map of runc before 1.3.2
    cpu_weight(512, runc="1.3.2")   # 59: the log-quadratic map since (runc PR 4785)

runc 1.3.2 and 1.4.0 changed the map so that the default 1024 shares give the default
weight 100 (opencontainers/runc issue 4896); both map 2 to 1 and 262144 to 10000.
"""

from __future__ import annotations

import math
import re

from agent.runtime.settings import Settings
from shared.cpuset import CpuSet
from shared.protocol import Limits

MAX_SHARES = 262_144
MAX_WEIGHT = 10_000
FIRST_QUADRATIC = (1, 3, 2)  # 1.4.0-rc.1 and later, and 1.3.2 and later in 1.3


def expected_files(
    limits: Limits, *, runc: str, online: CpuSet, memory_nodes: CpuSet
) -> dict[str, str]:
    """The v2 files, as the kernel prints them, of a container made with ``limits`` on a
    host with these CPUs and memory nodes. cgroup v2 has no soft memory limit: Docker's
    reservation is ``memory.low``; and it counts swap apart, so ``memory.swap.max`` is
    the swap limit less the memory limit. Unset cpusets are the parent's, which the
    ``.effective`` files show."""
    settings = Settings.of(limits, online=online, memory_nodes=memory_nodes)

    quota = "max" if settings.cpu_quota <= 0 else str(settings.cpu_quota)
    return {
        "cpuset.cpus.effective": str(settings.cpuset_cpus),
        "cpuset.mems.effective": str(settings.cpuset_mems),
        "cpu.weight": str(cpu_weight(settings.cpu_shares, runc=runc)),
        "cpu.max": f"{quota} {settings.cpu_period}",
        "memory.max": str(settings.mem_limit) if settings.mem_limit else "max",
        "memory.low": str(settings.mem_reservation),
        "memory.swap.max": _swap(settings),
    }


def _swap(settings: Settings) -> str:
    """Docker's swap limit counts the memory too; without one a memory limit gets as much
    swap again, and -1 is no swap limit."""
    if not settings.mem_limit or settings.memswap_limit < 0:
        return "max"
    if settings.memswap_limit == 0:
        return str(settings.mem_limit)
    return str(settings.memswap_limit - settings.mem_limit)


def cpu_weight(shares: int, *, runc: str) -> int:
    """The ``cpu.weight`` runc version ``runc`` writes for ``shares`` (2..262144)."""
    if _quadratic(runc):
        if shares <= 2:
            return 1
        if shares >= MAX_SHARES:
            return MAX_WEIGHT
        # The same double arithmetic as runc's Go: math.Log2, math.Pow, math.Ceil.
        log = math.log2(shares)
        exponent = (log * log + 125 * log) / 612.0 - 7.0 / 34.0
        return math.ceil(math.pow(10, exponent))
    return 1 + (shares - 2) * 9999 // 262_142


def _quadratic(runc: str) -> bool:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", runc)
    if match is None:
        raise ValueError(f"not a runc version: {runc!r}")
    version = tuple(int(part) for part in match.groups())
    return version >= FIRST_QUADRATIC
