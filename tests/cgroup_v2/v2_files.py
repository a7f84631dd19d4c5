"""What a container's cgroup v2 files show for the limits Docker was given (runc with the
systemd driver, under ``system.slice/docker-<id>.scope``):

    expected_files(limits, runc="1.1.5", online=CpuSet([0, 1]), memory_nodes=CpuSet([0]))
    # {"cpuset.cpus.effective": "0", "cpu.weight": "20", "cpu.max": "max 100000", ...}

The weight depends on the runc version (tests/docker/cpu_weight.py).
"""

from __future__ import annotations

from agent.runtime.settings import Settings
from shared.cpuset import CpuSet
from shared.protocol import Limits
from tests.docker.cpu_weight import cpu_weight


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
