"""Small, valid values that many tests need, built in one place."""

from __future__ import annotations

from shared.cpuset import CpuSet
from shared.inventory import Cpu, Inventory, NumaNode


def make_inventory(problems: list[str] | None = None) -> Inventory:
    """A two-CPU host on one NUMA node, healthy unless ``problems`` say otherwise."""
    cpus = CpuSet([0, 1])
    return Inventory(
        hostname="host-a",
        cpus=[Cpu(id=0, core=0, package=0, numa=0), Cpu(id=1, core=1, package=0, numa=0)],
        online=cpus,
        isolated=CpuSet(),
        reserved=CpuSet(),
        numa_nodes=[NumaNode(id=0, cpus=cpus, memory=2**30, distances={0: 10})],
        memory=2**30,
        problems=list(problems or []),
    )
