"""What this host offers: the probes' results assembled into one ``Inventory``.

    inventory = discover(sysfs_root=Path("/"), reserved=CpuSet.parse("0"), hostname="n1")

The probes only read; this is where their findings are combined and checked against
the configuration (reserved CPUs must exist), where the configured extended resources
join them, and where problems are collected.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pynvml

from agent.discovery.cpu import HostTotals, generic_topology, probe_cpus
from agent.discovery.gpu import NvmlApi, probe_gpus
from agent.discovery.sysfs import Sysfs, SysfsError
from shared.cpuset import CpuSet
from shared.inventory import Inventory


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
        extended=dict(sorted((extended or {}).items())),
        problems=[*topology.problems, *gpus.problems],
    )
