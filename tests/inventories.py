"""Hypothesis strategies for inventories the coordinator must take: every field within its
bounds and every rule of ``shared.inventory_rules`` kept, over sparse CPU and NUMA ids,
SMT, CPU-less NUMA nodes, isolated and reserved CPUs, GPUs with and without MIG, and
extended resources."""

from __future__ import annotations

from hypothesis import strategies as st

from shared.cpuset import CpuSet
from shared.inventory import (
    MAX_EXTENDED_UNITS,
    MAX_GPU_MEMORY,
    Cpu,
    Gpu,
    Inventory,
    MigDevice,
    NumaNode,
)

MAX_TEST_CPU_ID = 300
MAX_TEST_NUMA_ID = 20
PROFILES = ("1g.10gb", "1g.10gb+me", "2g.20gb", "3g.40gb", "1c.2g.20gb", "7g.80gb+gfx")
EXTENDED_NAMES = ("example.com/fpga", "vendor.io/Nic_v2", "a.b/c-d.e")


def subsets(cpus: CpuSet) -> st.SearchStrategy[CpuSet]:
    return st.sets(st.sampled_from(list(cpus))).map(CpuSet) if cpus else st.just(CpuSet())


@st.composite
def mig_devices(draw: st.DrawFn, gpu: int, memory: int) -> list[MigDevice]:
    count = draw(st.integers(min_value=0, max_value=3))
    return [
        MigDevice(
            uuid=f"MIG-{gpu}-{number}",
            profile=draw(st.sampled_from(PROFILES)),
            gpu_instance_id=draw(st.integers(min_value=0, max_value=14)),
            compute_instance_id=draw(st.integers(min_value=0, max_value=7)),
            memory=draw(st.integers(min_value=1, max_value=memory)),
        )
        for number in range(count)
    ]


@st.composite
def gpus(draw: st.DrawFn, numa_ids: list[int]) -> list[Gpu]:
    indices = draw(st.lists(st.integers(min_value=0, max_value=255), max_size=3, unique=True))
    found = []
    for index in indices:
        memory = draw(st.integers(min_value=1, max_value=MAX_GPU_MEMORY))
        mig_enabled = draw(st.booleans())
        found.append(
            Gpu(
                index=index,
                uuid=f"GPU-{index}",
                name=draw(st.sampled_from(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"])),
                memory=memory,
                pci_bus_id=f"0000:{index:02x}:00.0",
                numa=draw(st.none() | st.sampled_from(numa_ids)),
                mig_enabled=mig_enabled,
                mig_devices=draw(mig_devices(index, memory)) if mig_enabled else [],
            )
        )
    return found


@st.composite
def inventories(draw: st.DrawFn) -> Inventory:
    """A consistent inventory (no violations, every field within its bounds)."""
    threads = draw(st.integers(min_value=1, max_value=2))
    core_count = draw(st.integers(min_value=1, max_value=8))
    ids = draw(
        st.lists(
            st.integers(min_value=0, max_value=MAX_TEST_CPU_ID),
            min_size=core_count * threads,
            max_size=core_count * threads,
            unique=True,
        )
    )
    numa_ids = sorted(
        draw(st.sets(st.integers(min_value=0, max_value=MAX_TEST_NUMA_ID), min_size=1, max_size=4))
    )
    cpus = []
    for core in range(core_count):
        siblings = sorted(ids[core * threads : (core + 1) * threads])
        numa = draw(st.sampled_from(numa_ids))
        package = draw(st.integers(min_value=0, max_value=3))
        cpus += [Cpu(cpu, siblings[0], package, numa) for cpu in siblings]
    cpus.sort(key=lambda cpu: cpu.id)
    online = CpuSet(ids)
    memory = draw(st.integers(min_value=1, max_value=2**44))
    distance = st.integers(min_value=10, max_value=255)
    numa_nodes = [
        NumaNode(
            node,
            CpuSet(cpu.id for cpu in cpus if cpu.numa == node),
            draw(st.integers(min_value=0, max_value=memory)),
            draw(st.dictionaries(st.sampled_from(numa_ids), distance)),
        )
        for node in numa_ids
    ]
    return Inventory(
        hostname=draw(st.sampled_from(["host-a", "gpu-07.example", "h" * 253])),
        cpus=cpus,
        online=online,
        isolated=draw(subsets(online)),
        reserved=draw(subsets(online)),
        numa_nodes=numa_nodes,
        memory=memory,
        gpus=draw(gpus(numa_ids)),
        driver_version=draw(st.sampled_from(["", "550.54.15"])),
        extended=draw(
            st.dictionaries(
                st.sampled_from(EXTENDED_NAMES),
                st.integers(min_value=0, max_value=MAX_EXTENDED_UNITS),
            )
        ),
        problems=draw(st.lists(st.sampled_from(["NVML: no permission", "x" * 4096]), max_size=2)),
    )
