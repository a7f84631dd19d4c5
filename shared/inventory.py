"""A host's hardware as the agent discovered it, sent to the coordinator in ``hello``.

CPU ids are the kernel's logical CPU numbers (what ``cpuset_cpus`` takes). A physical
core is named by the lowest CPU id among its SMT siblings, which is unique on the host
even where the kernel's ``core_id`` repeats across packages.

Every field carries its range or length (``shared.bounds``), so a value out of range is
refused as the frame is decoded; the rules between fields (a CPU's NUMA node exists, ...)
are ``shared.inventory_rules``. Building a struct in Python checks neither: the agent's
discovery checks its result with both before it sends it.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from shared.bounds import MAX_CPUS, MAX_MEMORY, Messages, Name
from shared.cpuset import MAX_CPU_ID, CpuSet

MAX_NUMA_NODES = 1024  # the kernel's MAX_NUMNODES at its largest (NODES_SHIFT = 10)
MAX_GPUS = 256
MAX_MIG_DEVICES = 64  # per GPU; NVML makes at most 7 today
MAX_GPU_MEMORY = 2**40  # bytes: 1 TiB on one GPU
MAX_EXTENDED = 256  # extended resources one node offers
MAX_EXTENDED_UNITS = 1_000_000  # units of one extended resource
MAX_RESOURCE_NAME = 317  # <domain>/<name>: a DNS subdomain (253), "/", a name (63)
# Every profile NVML names: "1g.10gb", "1g.10gb+me", compute-instance slices such as
# "1c.2g.20gb", and suffixes like "+gfx" or "+me.all". Which profiles can be requested is
# the quota engine's rule; an inventory reports what the GPU has.
MIG_PROFILE_PATTERN = r"([1-9][0-9]*c\.)?[1-9][0-9]*g\.[1-9][0-9]*gb(\+[a-z]+(\.[a-z]+)*)?"

CpuId = Annotated[int, Meta(ge=0, le=MAX_CPU_ID)]
NumaId = Annotated[int, Meta(ge=0, le=MAX_NUMA_NODES - 1)]
PackageId = Annotated[int, Meta(ge=0, le=2**31 - 1)]  # the kernel's int, minus "unknown" (-1)
# The kernel's NUMA distances are bytes: 10 is a node's distance to itself, 255 unreachable.
Distance = Annotated[int, Meta(ge=10, le=255)]
NodeBytes = Annotated[int, Meta(ge=0, le=MAX_MEMORY)]  # a NUMA node may hold no memory
HostBytes = Annotated[int, Meta(ge=1, le=MAX_MEMORY)]
GpuBytes = Annotated[int, Meta(ge=1, le=MAX_GPU_MEMORY)]
GpuIndex = Annotated[int, Meta(ge=0, le=MAX_GPUS - 1)]
InstanceId = Annotated[int, Meta(ge=0, le=2**31 - 1)]
# NVML's UUIDs ("GPU-5f3c...", "MIG-GPU-5f3c.../1/0"): printable ASCII without spaces.
Uuid = Annotated[str, Meta(min_length=1, max_length=128, pattern=r"^[!-~]+$")]
MigProfile = Annotated[str, Meta(max_length=64, pattern=f"^{MIG_PROFILE_PATTERN}$")]
PciAddress = Annotated[str, Meta(pattern=r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")]
ExtendedName = Annotated[str, Meta(max_length=MAX_RESOURCE_NAME)]
ExtendedUnits = Annotated[int, Meta(ge=0, le=MAX_EXTENDED_UNITS)]


class Cpu(msgspec.Struct, frozen=True):
    id: CpuId
    core: CpuId  # lowest CPU id of its SMT siblings
    package: PackageId
    numa: NumaId


class NumaNode(msgspec.Struct, frozen=True):
    id: NumaId
    cpus: CpuSet  # empty for a CPU-less memory node
    memory: NodeBytes
    # NUMA node id -> relative distance (10 = local); empty when the kernel's row was unreadable
    distances: Annotated[dict[NumaId, Distance], Meta(max_length=MAX_NUMA_NODES)]


class MigDevice(msgspec.Struct, frozen=True):
    uuid: Uuid
    profile: MigProfile  # e.g. "1g.10gb", "1g.10gb+me"
    gpu_instance_id: InstanceId
    compute_instance_id: InstanceId
    memory: GpuBytes


class Gpu(msgspec.Struct, frozen=True):
    index: GpuIndex
    uuid: Uuid
    name: Name
    memory: GpuBytes
    pci_bus_id: PciAddress  # sysfs form, e.g. "0000:3b:00.0"
    numa: NumaId | None  # None when the platform does not say
    mig_enabled: bool
    mig_devices: Annotated[list[MigDevice], Meta(max_length=MAX_MIG_DEVICES)] = []


class Inventory(msgspec.Struct, frozen=True):
    hostname: Name
    cpus: Annotated[list[Cpu], Meta(max_length=MAX_CPUS)]  # every online CPU with its topology
    online: CpuSet
    isolated: CpuSet  # isolcpus: kept out of general scheduling by the kernel
    reserved: CpuSet  # config reserved_cpus: kept for the system, like kubelet's
    numa_nodes: Annotated[list[NumaNode], Meta(max_length=MAX_NUMA_NODES)]
    memory: HostBytes
    gpus: Annotated[list[Gpu], Meta(max_length=MAX_GPUS)] = []
    driver_version: Name = ""  # NVIDIA driver, "" without one
    # named extended resources offered, from the agent's config
    extended: Annotated[dict[ExtendedName, ExtendedUnits], Meta(max_length=MAX_EXTENDED)] = {}
    problems: Messages = []  # why the node is degraded; empty when healthy

    def offered(self) -> CpuSet:
        """CPUs the agent offers for placement: online, not isolated, not reserved."""
        return self.online - self.isolated - self.reserved

    def core_count(self) -> int:
        return len({cpu.core for cpu in self.cpus})

    def package_count(self) -> int:
        return len({cpu.package for cpu in self.cpus})

    def mig_device_count(self) -> int:
        return sum(len(gpu.mig_devices) for gpu in self.gpus)
