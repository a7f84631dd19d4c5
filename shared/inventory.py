"""A host's hardware as the agent discovered it, sent to the coordinator in ``hello``.

CPU ids are the kernel's logical CPU numbers (what ``cpuset_cpus`` takes). A physical
core is named by the lowest CPU id among its SMT siblings, which is unique on the host
even where the kernel's ``core_id`` repeats across packages.
"""

from __future__ import annotations

import msgspec

from shared.cpuset import CpuSet


class Cpu(msgspec.Struct, frozen=True):
    id: int
    core: int  # lowest CPU id of its SMT siblings
    package: int
    numa: int


class NumaNode(msgspec.Struct, frozen=True):
    id: int
    cpus: CpuSet  # empty for a CPU-less memory node
    memory: int  # bytes
    distances: dict[int, int]  # NUMA node id -> relative distance (10 = local)


class MigDevice(msgspec.Struct, frozen=True):
    uuid: str
    profile: str  # e.g. "1g.10gb", "1g.10gb+me"
    gpu_instance_id: int
    compute_instance_id: int
    memory: int  # bytes


class Gpu(msgspec.Struct, frozen=True):
    index: int
    uuid: str
    name: str
    memory: int  # bytes
    pci_bus_id: str  # sysfs form, e.g. "0000:3b:00.0"
    numa: int | None  # None when the platform does not say
    mig_enabled: bool
    mig_devices: list[MigDevice] = []


class Inventory(msgspec.Struct, frozen=True):
    hostname: str
    cpus: list[Cpu]  # every online CPU with its topology
    online: CpuSet
    isolated: CpuSet  # isolcpus: kept out of general scheduling by the kernel
    reserved: CpuSet  # config reserved_cpus: kept for the system, like kubelet's
    numa_nodes: list[NumaNode]
    memory: int  # bytes
    gpus: list[Gpu] = []
    driver_version: str = ""  # NVIDIA driver, "" without one
    extended: dict[str, int] = {}  # named extended resources offered, from the agent's config
    problems: list[str] = []  # why the node is degraded; empty when healthy

    def offered(self) -> CpuSet:
        """CPUs the agent offers for placement: online, not isolated, not reserved."""
        return self.online - self.isolated - self.reserved

    def core_count(self) -> int:
        return len({cpu.core for cpu in self.cpus})

    def package_count(self) -> int:
        return len({cpu.package for cpu in self.cpus})

    def mig_device_count(self) -> int:
        return sum(len(gpu.mig_devices) for gpu in self.gpus)
