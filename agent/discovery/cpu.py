"""The host's CPU topology and NUMA layout, read from sysfs with psutil as the fallback.

psutil only knows how many CPUs and bytes there are, so it stands in when sysfs does not
say (a masked /sys, a kernel without NUMA): one NUMA node 0 holding every online CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psutil

from agent.discovery.sysfs import Sysfs, SysfsError
from shared.cpuset import CpuSet
from shared.inventory import Cpu, NumaNode
from shared.logs import get_logger

log = get_logger("allot.agent.discovery")

CPU_DIR = "devices/system/cpu"
NODE_DIR = "devices/system/node"
# core_cpus_list replaced thread_siblings_list in Linux 5.x; older kernels have only the latter.
SIBLING_FILES = ("core_cpus_list", "thread_siblings_list")

_NODE_DIR_NAME = re.compile(r"node(\d+)")
_MEM_TOTAL = re.compile(r"^Node \d+ MemTotal:\s+(\d+) kB$", re.MULTILINE)


@dataclass(frozen=True)
class HostTotals:
    """What psutil knows about the host, injected so tests control the fallbacks."""

    logical_cpus: int
    memory: int  # bytes

    @classmethod
    def from_psutil(cls) -> HostTotals:
        return cls(psutil.cpu_count(logical=True) or 1, psutil.virtual_memory().total)


@dataclass(frozen=True)
class CpuTopology:
    cpus: list[Cpu]  # every online CPU, ascending id
    online: CpuSet
    isolated: CpuSet
    numa_nodes: list[NumaNode]  # ascending id
    memory: int  # bytes, the kernel's total for the host (/proc/meminfo, through psutil)
    problems: list[str]  # inconsistencies that make the node degraded


def probe_cpus(sysfs: Sysfs, totals: HostTotals) -> CpuTopology:
    online = _online_cpus(sysfs, totals)
    nodes, problems = _numa_nodes(sysfs, online)
    if not nodes:
        log.info("sysfs has no NUMA nodes, assuming one node 0 with every online CPU")
        nodes = [_single_node(online, totals.memory)]
    _note_memory_mismatch(nodes, totals.memory)
    nodes = [_within_host(node, totals.memory) for node in nodes]
    if membership := _membership_problems(online, nodes):
        problems += membership
        nodes = [_single_node(online, totals.memory)]
    for problem in problems:
        log.warning("CPU topology is inconsistent, the node is degraded", problem=problem)
    numa_of = {cpu: node.id for node in nodes for cpu in node.cpus}
    cpus = [_cpu(sysfs, cpu, online, numa_of[cpu]) for cpu in online]
    # isolcpus= may name CPUs that are offline or that this kernel does not have.
    isolated = (sysfs.cpuset(f"{CPU_DIR}/isolated") or CpuSet()) & online
    return CpuTopology(cpus, online, isolated, nodes, totals.memory, problems)


def generic_topology(totals: HostTotals, problem: str) -> CpuTopology:
    """The safe view when sysfs cannot be read, or what it says cannot be offered:
    psutil's CPUs, each its own core, on one package and one NUMA node, with the reason
    recorded as a problem."""
    log.warning("offering a generic CPU topology, the node is degraded", problem=problem)
    online = CpuSet(range(totals.logical_cpus))
    cpus = [Cpu(cpu, cpu, 0, 0) for cpu in online]
    node = _single_node(online, totals.memory)
    return CpuTopology(cpus, online, CpuSet(), [node], totals.memory, [problem])


def _online_cpus(sysfs: Sysfs, totals: HostTotals) -> CpuSet:
    online = sysfs.cpuset(f"{CPU_DIR}/online")
    if online is None:
        online = CpuSet(range(totals.logical_cpus))
        log.info("sysfs has no online CPU list, assuming psutil's CPUs", online=str(online))
    return online


def _cpu(sysfs: Sysfs, cpu: int, online: CpuSet, numa: int) -> Cpu:
    """The core is the lowest online id among the SMT siblings: unique, unlike ``core_id``."""
    topology = f"{CPU_DIR}/cpu{cpu}/topology"
    core = min((_siblings(sysfs, topology) & online) | CpuSet([cpu]))
    package = sysfs.integer(f"{topology}/physical_package_id")
    return Cpu(cpu, core, max(package or 0, 0), numa)  # some firmware names no package: -1


def _siblings(sysfs: Sysfs, topology: str) -> CpuSet:
    for name in SIBLING_FILES:
        if (siblings := sysfs.cpuset(f"{topology}/{name}")) is not None:
            return siblings
    return CpuSet()


def numa_node_ids(sysfs: Sysfs) -> list[int]:
    """Ids of the ``nodeK`` directories, skipping siblings such as ``online`` or ``has_cpu``."""
    matches = (_NODE_DIR_NAME.fullmatch(name) for name in sysfs.entries(NODE_DIR))
    return sorted(int(match.group(1)) for match in matches if match)


def _numa_nodes(sysfs: Sysfs, online: CpuSet) -> tuple[list[NumaNode], list[str]]:
    ids = numa_node_ids(sysfs)
    # The kernel prints each distance row over the online nodes in ascending id.
    columns = list(sysfs.cpuset(f"{NODE_DIR}/online") or ids)
    nodes = [_numa_node(sysfs, node_id, online, columns) for node_id in ids]
    problems = [
        f"NUMA node {node.id}: distance does not have one value per online node {columns}, "
        "so its distances are unknown"
        for node in nodes
        if not node.distances
    ]
    return nodes, problems


def _numa_node(sysfs: Sysfs, node_id: int, online: CpuSet, columns: list[int]) -> NumaNode:
    base = f"{NODE_DIR}/node{node_id}"
    cpus = (sysfs.cpuset(f"{base}/cpulist") or CpuSet()) & online  # empty on memory-only nodes
    row = sysfs.integers(f"{base}/distance") or []
    distances = dict(zip(columns, row, strict=True)) if len(row) == len(columns) else {}
    return NumaNode(node_id, cpus, _node_memory(sysfs, f"{base}/meminfo"), distances)


def _node_memory(sysfs: Sysfs, meminfo: str) -> int:
    match = _MEM_TOTAL.search(sysfs.text(meminfo) or "")
    if match is None:
        raise SysfsError(f"{sysfs.path(meminfo)} has no 'Node K MemTotal: N kB' line")
    return int(match.group(1)) * 1024


def _note_memory_mismatch(nodes: list[NumaNode], total: int) -> None:
    """Say so when the nodes' MemTotal lines do not add up to the host's total.

    They agree on ordinary hosts; a kernel that initialises memory lazily (a Firecracker
    guest with deferred_init) counts only the pages initialised so far per node, while
    /proc/meminfo already counts them all. The host's total is the one offered.
    """
    summed = sum(node.memory for node in nodes)
    if abs(summed - total) > total // 100:
        log.info("NUMA node memory does not add up to the host total", nodes=summed, host=total)


def _within_host(node: NumaNode, total: int) -> NumaNode:
    """The node with at most the host's memory. A node reports more only where
    /proc/meminfo is limited and /sys is not (LXCFS in a container), and then the limit
    is what the host can use."""
    if node.memory <= total:
        return node
    log.info("NUMA node memory above the host total, offering the total", node=node.id)
    return NumaNode(node.id, node.cpus, total, node.distances)


def _single_node(online: CpuSet, memory: int) -> NumaNode:
    return NumaNode(0, online, memory, {0: 10})  # 10: the kernel's distance to itself


def _membership_problems(online: CpuSet, nodes: list[NumaNode]) -> list[str]:
    """Checks, in order, that every online CPU belongs to exactly one NUMA node."""
    owners = {cpu: [node.id for node in nodes if cpu in node.cpus] for cpu in online}
    unowned = CpuSet(cpu for cpu, ids in owners.items() if not ids)
    cpulists = ", ".join(f"node{node.id}={node.cpus}" for node in nodes)
    shared = ", ".join(f"CPU {cpu} in nodes {ids}" for cpu, ids in owners.items() if len(ids) > 1)
    failures = {
        "every online CPU in a node": f"CPUs {unowned} in no node ({cpulists})" if unowned else "",
        "no CPU in two nodes": shared,
    }
    return [
        f"check {name!r} failed: {failure}; assuming one NUMA node 0 with every online CPU"
        for name, failure in failures.items()
        if failure
    ]
