"""Read a container's limits back from its cgroup files, under cgroup v1 or v2.

The path comes from ``/proc/<pid>/cgroup`` of the container's main process, so it does
not depend on Docker's cgroup driver (cgroupfs or systemd) or on where the hierarchy is.
"""

from __future__ import annotations

from agent.runtime.settings import Settings
from agent.runtime.usage import cgroup_dir
from shared.cpuset import CpuSet


def read_limit(pid: int, controller: str, *, v1: str, v2: str) -> str:
    """The content of the controller's file: ``v1`` under cgroup v1, ``v2`` under v2."""
    directory = cgroup_dir(pid, controller)
    name = v1 if (directory / v1).exists() else v2
    return (directory / name).read_text().strip()


# Larger than any real memory: what cgroup v1 shows for "no limit" (PAGE_COUNTER_MAX).
_V1_UNLIMITED = 2**62


def cgroup_settings(pid: int) -> Settings:
    """The limits the kernel enforces on ``pid``, read from its cgroup files, in the
    runtime's canonical form (no quota is -1, no memory limit is 0)."""
    if (cgroup_dir(pid, "memory") / "memory.limit_in_bytes").exists():
        return _v1_settings(pid)
    return _v2_settings(pid)


def _v1_settings(pid: int) -> Settings:
    def read(controller: str, name: str) -> str:
        return (cgroup_dir(pid, controller) / name).read_text().strip()

    def memory(name: str) -> int:
        value = int(read("memory", name))
        return 0 if value >= _V1_UNLIMITED else value

    return Settings(
        cpuset_cpus=CpuSet.parse(read("cpuset", "cpuset.cpus")),
        cpuset_mems=CpuSet.parse(read("cpuset", "cpuset.mems")),
        cpu_shares=int(read("cpu", "cpu.shares")),
        cpu_quota=int(read("cpu", "cpu.cfs_quota_us")),
        cpu_period=int(read("cpu", "cpu.cfs_period_us")),
        mem_limit=memory("memory.limit_in_bytes"),
        memswap_limit=memory("memory.memsw.limit_in_bytes"),
        mem_reservation=memory("memory.soft_limit_in_bytes"),
    )


def _v2_settings(pid: int) -> Settings:
    """cgroup v2 has a weight for shares (runc maps 2..262144 onto 1..10000, so the
    shares read back are the nearest value that maps to the same weight) and keeps swap
    apart from memory."""
    directory = cgroup_dir(pid, "memory")

    def read(name: str) -> str:
        return (directory / name).read_text().strip()

    def memory(name: str) -> int:
        value = read(name)
        return 0 if value == "max" else int(value)

    quota, period = read("cpu.max").split()
    weight = int(read("cpu.weight"))
    limit = memory("memory.max")
    swap = memory("memory.swap.max") if (directory / "memory.swap.max").exists() else 0
    return Settings(
        cpuset_cpus=CpuSet.parse(read("cpuset.cpus")),
        cpuset_mems=CpuSet.parse(read("cpuset.mems")),
        cpu_shares=2 + -(-(weight - 1) * 262142 // 9999),
        cpu_quota=-1 if quota == "max" else int(quota),
        cpu_period=int(period),
        mem_limit=limit,
        memswap_limit=limit + swap if limit else 0,
        mem_reservation=memory("memory.low"),
    )
