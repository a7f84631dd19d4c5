"""shared.inventory_text: an inventory as an operator reads it."""

from __future__ import annotations

import msgspec

from shared.cpuset import CpuSet
from shared.inventory import Cpu, Gpu, Inventory, MigDevice, NumaNode
from shared.inventory_text import describe_inventory

GiB = 1024**3


def small_inventory(**changes: object) -> Inventory:
    """Four CPUs in two SMT cores, CPU 0 reserved and CPU 3 isolated; NUMA node 1 has
    memory but no CPUs; an A30 split into two MIG devices and a T4 without NUMA affinity."""
    inventory = Inventory(
        hostname="small",
        cpus=[Cpu(id=i, core=i - i % 2, package=0, numa=0) for i in range(4)],
        online=CpuSet.parse("0-3"),
        isolated=CpuSet.parse("3"),
        reserved=CpuSet.parse("0"),
        numa_nodes=[
            NumaNode(id=0, cpus=CpuSet.parse("0-3"), memory=8 * GiB, distances={1: 20, 0: 10}),
            NumaNode(id=1, cpus=CpuSet(), memory=4 * GiB, distances={0: 20, 1: 10}),
        ],
        memory=12 * GiB,
        gpus=[
            Gpu(
                index=0,
                uuid="GPU-a30",
                name="NVIDIA A30",
                memory=24 * GiB,
                pci_bus_id="0000:17:00.0",
                numa=0,
                mig_enabled=True,
                mig_devices=[
                    MigDevice(
                        uuid="MIG-one",
                        profile="2g.12gb",
                        gpu_instance_id=1,
                        compute_instance_id=0,
                        memory=12 * GiB,
                    ),
                    MigDevice(
                        uuid="MIG-two",
                        profile="1g.6gb",
                        gpu_instance_id=5,
                        compute_instance_id=0,
                        memory=6 * GiB,
                    ),
                ],
            ),
            Gpu(
                index=1,
                uuid="GPU-t4",
                name="NVIDIA T4",
                memory=16 * GiB,
                pci_bus_id="0000:af:00.0",
                numa=None,
                mig_enabled=False,
            ),
        ],
        driver_version="550.54.15",
    )
    return msgspec.structs.replace(inventory, **changes)


def sections(text: str) -> list[list[str]]:
    return [block.split("\n") for block in text.split("\n\n")]


def test_summary() -> None:
    summary = sections(describe_inventory(small_inventory()))[0]
    assert summary == [
        "hostname       small",
        "cpus online    4 (0-3)",
        "cpus offered   2 (1-2)",
        "cpus reserved  1 (0)",
        "cpus isolated  1 (3)",
        "cores          2 in 1 package(s), 2 thread(s) per core",
        "memory         12.0Gi (12884901888 bytes)",
        "numa nodes     2",
        "gpus           2 (MIG devices: 2)",
        "nvidia driver  550.54.15",
        "extended       none",
        "problems       none",
    ]


def test_extended_resources_are_listed_by_name() -> None:
    text = describe_inventory(small_inventory(extended={"x.io/nic": 1, "example.com/fpga": 2}))
    assert "extended       example.com/fpga=2 x.io/nic=1" in text.split("\n")


def test_numa_table_shows_a_cpu_less_node_with_a_dash() -> None:
    numa = sections(describe_inventory(small_inventory()))[1]
    assert numa == [
        "NUMA  CPUS  MEMORY  DISTANCES",
        "0     0-3   8.0Gi   0:10 1:20",
        "1     -     4.0Gi   0:20 1:10",
    ]


def test_gpu_table_lists_mig_devices_under_their_gpu() -> None:
    gpus = sections(describe_inventory(small_inventory()))[2]
    assert gpus == [
        "GPU  NAME        MEMORY  NUMA  PCI / MIG IDS  MIG  UUID",
        "0    NVIDIA A30  24.0Gi  0     0000:17:00.0   on   GPU-a30",
        "       2g.12gb   12.0Gi        gi 1 ci 0           MIG-one",
        "       1g.6gb    6.0Gi         gi 5 ci 0           MIG-two",
        "1    NVIDIA T4   16.0Gi  -     0000:af:00.0   off  GPU-t4",
    ]


def test_host_without_gpus_has_no_gpu_table() -> None:
    text = describe_inventory(small_inventory(gpus=[], driver_version=""))
    assert len(sections(text)) == 2
    assert "gpus           0 (MIG devices: 0)" in text.split("\n")
    assert "nvidia driver  none" in text.split("\n")
    assert "GPU  NAME" not in text


def test_empty_cpu_sets_read_none_and_problems_are_joined() -> None:
    text = describe_inventory(
        small_inventory(
            isolated=CpuSet(),
            reserved=CpuSet(),
            problems=["gpu 1: ECC errors", "memory node 1 offline"],
        )
    )
    lines = text.split("\n")
    assert "cpus offered   4 (0-3)" in lines
    assert "cpus reserved  none" in lines
    assert "cpus isolated  none" in lines
    assert "problems       gpu 1: ECC errors; memory node 1 offline" in lines
