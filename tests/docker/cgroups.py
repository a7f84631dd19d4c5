"""Read a container's limits back from its cgroup files, under cgroup v1 or v2.

The path comes from ``/proc/<pid>/cgroup`` of the container's main process, so it does
not depend on Docker's cgroup driver (cgroupfs or systemd) or on where the hierarchy is.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import docker

from agent.runtime.settings import Settings
from agent.runtime.usage import CGROUP_ROOT, cgroup_dir
from shared.cpuset import CpuSet
from tests.docker.cpu_weight import cpu_weight, least_shares


def read_limit(pid: int, controller: str, *, v1: str, v2: str) -> str:
    """The content of the controller's file: ``v1`` under cgroup v1, ``v2`` under v2."""
    directory = cgroup_dir(pid, controller)
    name = v1 if (directory / v1).exists() else v2
    return (directory / name).read_text().strip()


# Larger than any real memory: what cgroup v1 shows for "no limit" (PAGE_COUNTER_MAX).
_V1_UNLIMITED = 2**62


def cgroup_settings(pid: int) -> Settings:
    """The limits the kernel enforces on ``pid``, read from its cgroup files, in the
    runtime's canonical form (no quota is -1, no memory limit is 0). Under cgroup v2 the
    shares are known only up to runc's weight: compare with ``as_held(settings)``."""
    if (cgroup_dir(pid, "memory") / "memory.limit_in_bytes").exists():
        return _v1_settings(pid)
    return v2_settings(cgroup_dir(pid, "memory"), runc=_runc_version())


def as_held(settings: Settings) -> Settings:
    """``settings`` as ``cgroup_settings`` reads them back on this host."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return as_v2_holds(settings, runc=_runc_version())
    return settings


def as_v2_holds(settings: Settings, *, runc: str) -> Settings:
    """``settings`` as they read back from cgroup v2 files runc ``runc`` wrote: the shares
    the fewest with the same weight."""
    return replace(
        settings, cpu_shares=least_shares(cpu_weight(settings.cpu_shares, runc=runc), runc=runc)
    )


@cache
def _runc_version() -> str:
    """The version of the runc this host's Docker runs containers with, e.g. "1.1.5"."""
    client = docker.from_env()
    try:
        components = client.version().get("Components", [])
    finally:
        client.close()
    for component in components:
        if component.get("Name") == "runc":
            return str(component["Version"])
    raise LookupError("Docker does not say which runc it runs (no runc in docker version)")


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


def v2_settings(directory: Path, *, runc: str) -> Settings:
    """The limits in the cgroup v2 directory ``directory``, written by runc ``runc``. v2
    has a weight for shares and keeps swap apart from memory; an unset cpuset is the
    parent's, which the ``.effective`` file shows."""

    def read(name: str) -> str:
        return (directory / name).read_text().strip()

    def memory(name: str) -> int:
        value = read(name)
        return 0 if value == "max" else int(value)

    quota, period = read("cpu.max").split()
    limit = memory("memory.max")
    swap = memory("memory.swap.max") if (directory / "memory.swap.max").exists() else 0
    return Settings(
        cpuset_cpus=CpuSet.parse(read("cpuset.cpus.effective")),
        cpuset_mems=CpuSet.parse(read("cpuset.mems.effective")),
        cpu_shares=least_shares(int(read("cpu.weight")), runc=runc),
        cpu_quota=-1 if quota == "max" else int(quota),
        cpu_period=int(period),
        mem_limit=limit,
        memswap_limit=limit + swap if limit else 0,
        mem_reservation=memory("memory.low"),
    )
