"""What this host offers: the probes' results assembled into one ``Inventory``.

    inventory = discover(sysfs_root=Path("/"), reserved=CpuSet.parse("0"), hostname="n1")

The probes only read; this is where their findings are combined and checked against
the configuration (reserved CPUs must exist), where the configured extended resources
join them, and where problems are collected. Last, the result is checked by the rules
the coordinator applies to a hello (``shared.protocol.inventory_refusal``): one that
breaks them (firmware with strange NUMA distances, a GPU NVML reports without memory)
gives way to a safe generic view, which the node offers degraded, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pynvml

from agent.discovery.cpu import CpuTopology, HostTotals, generic_topology, probe_cpus
from agent.discovery.gpu import GpuReport, NvmlApi, probe_gpus
from agent.discovery.sysfs import Sysfs, SysfsError
from shared.cpuset import CpuSet
from shared.inventory import Inventory
from shared.logs import get_logger
from shared.protocol import inventory_refusal

log = get_logger("allot.agent.discovery")


class DiscoveryError(Exception):
    """The configuration does not fit this host; the message says what to change."""


def discover(
    *,
    sysfs_root: Path,
    reserved: CpuSet,
    hostname: str,
    nvml: NvmlApi = pynvml,
    totals: HostTotals | None = None,
    extended: Mapping[str, int] | None = None,
) -> Inventory:
    """What the host has, plus the ``extended`` resources its configuration offers
    (counted units the host cannot discover, such as FPGAs behind a vendor driver)."""
    sysfs = Sysfs(sysfs_root)
    totals = totals if totals is not None else HostTotals.from_psutil()
    try:
        topology = probe_cpus(sysfs, totals)
    except SysfsError as error:
        topology = generic_topology(totals, f"cannot read the CPU topology: {error}")
    missing = reserved - topology.online
    if missing:
        raise DiscoveryError(
            f"reserved_cpus {reserved} names CPUs {missing} that are not online"
            f" (online: {topology.online})"
        )
    gpus = probe_gpus(nvml, lambda bdf: sysfs.integer(f"bus/pci/devices/{bdf}/numa_node"))
    inventory = _assembled(hostname, topology, reserved, gpus, extended or {})
    refusal = inventory_refusal(inventory)
    if refusal is None:
        return inventory
    problem = f"discovery found what the coordinator would refuse: {refusal}"
    generic = generic_topology(totals, problem)
    none = GpuReport(gpus=[], driver_version="", problems=[])
    return _assembled(hostname, generic, reserved & generic.online, none, extended or {})


def _assembled(
    hostname: str,
    topology: CpuTopology,
    reserved: CpuSet,
    gpus: GpuReport,
    extended: Mapping[str, int],
) -> Inventory:
    return Inventory(
        hostname=hostname,
        cpus=topology.cpus,
        online=topology.online,
        isolated=topology.isolated,
        reserved=reserved,
        numa_nodes=topology.numa_nodes,
        memory=topology.memory,
        gpus=gpus.gpus,
        driver_version=gpus.driver_version,
        extended=dict(sorted(extended.items())),
        problems=[*topology.problems, *gpus.problems],
    )
