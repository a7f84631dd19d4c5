"""An inventory as an operator reads it: a summary, then tables of NUMA nodes and GPUs.

Shared by ``allot-agent discover`` (what this host has) and ``allotctl node NAME`` (what
the coordinator was told), so the two always print a host the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.cpuset import CpuSet
from shared.inventory import Inventory
from shared.quantity import format_memory_approx
from shared.text import table


def _cpus(cpus: CpuSet) -> str:
    return f"{len(cpus)} ({cpus})" if len(cpus) else "none"


def describe_counts(counts: Mapping[str, int]) -> str:
    """Named extended resources as one line: ``example.com/fpga=2 example.com/nic=1``."""
    return " ".join(f"{name}={count}" for name, count in sorted(counts.items())) or "none"


def describe_inventory(inventory: Inventory) -> str:
    threads = len(inventory.cpus) // max(1, inventory.core_count())
    summary = [
        ("hostname", inventory.hostname),
        ("cpus online", _cpus(inventory.online)),
        ("cpus offered", _cpus(inventory.offered())),
        ("cpus reserved", _cpus(inventory.reserved)),
        ("cpus isolated", _cpus(inventory.isolated)),
        (
            "cores",
            f"{inventory.core_count()} in {inventory.package_count()} package(s),"
            f" {threads} thread(s) per core",
        ),
        ("memory", f"{format_memory_approx(inventory.memory)} ({inventory.memory} bytes)"),
        ("numa nodes", str(len(inventory.numa_nodes))),
        ("gpus", f"{len(inventory.gpus)} (MIG devices: {inventory.mig_device_count()})"),
        ("nvidia driver", inventory.driver_version or "none"),
        ("extended", describe_counts(inventory.extended)),
        ("problems", "; ".join(inventory.problems) or "none"),
    ]
    parts = [table(None, summary)]
    numa_rows = [
        (
            node.id,
            str(node.cpus) or "-",
            format_memory_approx(node.memory),
            " ".join(f"{peer}:{distance}" for peer, distance in sorted(node.distances.items())),
        )
        for node in inventory.numa_nodes
    ]
    parts.append(table(["NUMA", "CPUS", "MEMORY", "DISTANCES"], numa_rows))
    if inventory.gpus:
        gpu_rows: list[tuple[object, ...]] = []
        for gpu in inventory.gpus:
            numa = "-" if gpu.numa is None else gpu.numa
            mig = "on" if gpu.mig_enabled else "off"
            memory = format_memory_approx(gpu.memory)
            gpu_rows.append((gpu.index, gpu.name, memory, numa, gpu.pci_bus_id, mig, gpu.uuid))
            for device in gpu.mig_devices:
                ids = f"gi {device.gpu_instance_id} ci {device.compute_instance_id}"
                memory = format_memory_approx(device.memory)
                gpu_rows.append(("", f"  {device.profile}", memory, "", ids, "", device.uuid))
        headers = ["GPU", "NAME", "MEMORY", "NUMA", "PCI / MIG IDS", "MIG", "UUID"]
        parts.append(table(headers, gpu_rows))
    return "\n\n".join(parts)
