"""A container's Docker limits in one canonical form, so that what the coordinator asks
for and what ``docker inspect`` reports can be compared field by field.

Docker spells "not set" several ways (``CpuShares`` 0 means 1024, ``CpuQuota`` 0 means
no quota, an empty cpuset means every CPU); ``Settings.of`` maps each to the one value
it stands for on this host.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from shared.cpuset import CpuSet
from shared.protocol import Limits
from shared.quantity import format_memory

DEFAULT_CPU_SHARES = 1024
DEFAULT_CPU_PERIOD = 100_000
NO_QUOTA = -1


@dataclass(frozen=True)
class Settings:
    cpuset_cpus: CpuSet
    cpuset_mems: CpuSet
    cpu_shares: int
    cpu_quota: int  # -1: no CFS quota
    cpu_period: int
    mem_limit: int  # 0: no limit
    memswap_limit: int
    mem_reservation: int

    @classmethod
    def of(cls, limits: Limits, *, online: CpuSet, memory_nodes: CpuSet) -> Settings:
        """``limits`` as they take effect on a host with these CPUs and memory nodes."""
        memory = max(limits.mem_limit, 0)
        return cls(
            cpuset_cpus=CpuSet.parse(limits.cpuset_cpus) or online,
            cpuset_mems=CpuSet.parse(limits.cpuset_mems) or memory_nodes,
            cpu_shares=limits.cpu_shares or DEFAULT_CPU_SHARES,
            cpu_quota=limits.cpu_quota if limits.cpu_quota > 0 else NO_QUOTA,
            cpu_period=limits.cpu_period or DEFAULT_CPU_PERIOD,
            mem_limit=memory,
            memswap_limit=limits.memswap_limit if memory else 0,
            mem_reservation=max(limits.mem_reservation, 0),
        )

    @property
    def cpu_limit_cores(self) -> float:
        """The most CPU these settings let a container use, in cores: its CPUs, or its
        CFS quota over its period where that is lower."""
        cores = float(len(self.cpuset_cpus))
        if self.cpu_quota > 0:
            return min(cores, self.cpu_quota / self.cpu_period)
        return cores

    def changes_from(self, before: Settings) -> dict[str, str]:
        """Each field that differs, as ``"old -> new"``, in the order of the fields."""
        return {
            name: f"{_show(name, getattr(before, name))} -> {_show(name, getattr(self, name))}"
            for name in _NAMES
            if getattr(before, name) != getattr(self, name)
        }

    def removed_only_by_recreating(self, before: Settings) -> list[str]:
        """Fields ``before`` sets that ``self`` leaves unset and no update can clear: a
        memory limit and its swap limit. To Docker's update 0 means "unchanged" and it
        refuses -1 ("Minimum memory limit allowed is 6MB", Docker 20.10; moby issue
        22516), so only a container made anew with ``self`` is without them."""
        if self.mem_limit or not before.mem_limit:
            return []
        return [name for name in ("mem_limit", "memswap_limit") if getattr(before, name)]

    def unsettable_from(self, before: Settings) -> list[str]:
        """Fields no way of Docker's takes from ``before`` to ``self``: a swap limit to
        remove while the memory limit stays. An update cannot clear it, and a container
        made anew gets Docker's default of twice the memory limit (the coordinator always
        sets the swap limit to the memory limit, so only a hand-written target asks this)."""
        if not self.mem_limit or self.memswap_limit or not before.memswap_limit:
            return []
        return ["memswap_limit"]


_NAMES = tuple(field.name for field in fields(Settings))
_MEMORY_FIELDS = frozenset({"mem_limit", "memswap_limit", "mem_reservation"})


def _show(name: str, value: object) -> str:
    if name in _MEMORY_FIELDS and isinstance(value, int) and value > 0:
        return format_memory(value)
    return str(value)
