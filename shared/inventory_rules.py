"""The rules between an inventory's fields, which its types alone cannot state.

    inventory_violations(inventory)  -> []    (consistent)
    inventory_violations(broken)     -> [Violation("cpus[3].numa", 7, "names no NUMA node ...")]
    str(violation)                   -> "cpus[3].numa = 7: names no NUMA node of numa_nodes (0-1)"
    summary(violations)              -> "inventory.cpus[3].numa = 7: ... (and 1 more)"

An inventory is consistent when:

 1. CPU ids are distinct;
 2. ``online``, ``isolated`` and ``reserved`` name only CPUs of ``cpus``;
 3. each CPU's ``numa`` names a NUMA node of ``numa_nodes``;
 4. each CPU's ``core`` names a CPU of ``cpus`` whose core is itself and whose id is not
    above the CPU's own: the lowest of its SMT siblings;
 5. NUMA node ids are distinct;
 6. each NUMA node's ``cpus`` are exactly the CPUs that name it;
 7. distances name only NUMA nodes of ``numa_nodes``;
 8. no NUMA node holds more memory than the host;
 9. GPU indices are distinct, and so are the UUIDs of all GPUs and MIG devices;
10. only a GPU in MIG mode has MIG devices, each with at most its GPU's memory;
11. extended resource names are ``<domain>/<name>`` and name no GPU
    (``shared.resource_names.extended_name_problem``).

Violations come in the order of the rules (a GPU's rules 9 and 10 together), each over
its list in order. The ranges and lengths of single fields are the types' concern
(``shared.inventory``) and are not checked here. Cost
O(c + n·d + g) for c CPUs, n NUMA nodes with d distances each, and g GPU devices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from shared.bounds import shown
from shared.cpuset import CpuSet
from shared.inventory import Gpu, Inventory
from shared.resource_names import extended_name_problem


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (``field``, a path into the inventory), what was there
    (``value``) and the rule it breaks."""

    field: str
    value: object
    rule: str

    def __str__(self) -> str:
        return f"{self.field} = {shown(self.value)}: {self.rule}"


def summary(violations: Sequence[Violation]) -> str:
    """The first of ``violations`` (non-empty) with its path from the whole record, and
    how many more there are: "inventory.cpus[1].numa = 7: ... (and 1 more)"."""
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    return f"inventory.{violations[0]}{more}"


def inventory_violations(inventory: Inventory) -> list[Violation]:
    """Every rule of the module docstring that ``inventory`` breaks; empty when none."""
    return [
        *_cpu_violations(inventory),
        *_numa_violations(inventory),
        *_gpu_violations(inventory.gpus),
        *(
            Violation("extended", name, problem)
            for name in sorted(inventory.extended)
            if (problem := extended_name_problem(name)) is not None
        ),
    ]


def _cpu_violations(inventory: Inventory) -> Iterator[Violation]:
    first: dict[int, int] = {}  # CPU id -> index of its first entry
    for index, cpu in enumerate(inventory.cpus):
        if cpu.id in first:
            yield Violation(f"cpus[{index}].id", cpu.id, f"repeats cpus[{first[cpu.id]}]")
        else:
            first[cpu.id] = index
    known = CpuSet(first)
    for name in ("online", "isolated", "reserved"):
        cpus: CpuSet = getattr(inventory, name)
        if stray := cpus - known:
            yield Violation(name, str(cpus), f"names CPUs {stray} that are not in cpus")
    nodes = CpuSet(node.id for node in inventory.numa_nodes)
    for index, cpu in enumerate(inventory.cpus):
        if cpu.numa not in nodes:
            rule = f"names no NUMA node of numa_nodes ({nodes or 'none'})"
            yield Violation(f"cpus[{index}].numa", cpu.numa, rule)
    for index, cpu in enumerate(inventory.cpus):
        named = first.get(cpu.core)
        if named is None:
            rule = "names no CPU of cpus (a core is named by its lowest SMT sibling)"
        elif cpu.core > cpu.id:
            rule = f"is above the CPU's own id {cpu.id} (a core is named by its lowest sibling)"
        elif (core := inventory.cpus[named].core) != cpu.core:
            rule = f"names CPU {cpu.core}, whose own core is {core}"
        else:
            continue
        yield Violation(f"cpus[{index}].core", cpu.core, rule)


def _numa_violations(inventory: Inventory) -> Iterator[Violation]:
    first: dict[int, int] = {}
    for index, node in enumerate(inventory.numa_nodes):
        if node.id in first:
            rule = f"repeats numa_nodes[{first[node.id]}]"
            yield Violation(f"numa_nodes[{index}].id", node.id, rule)
        else:
            first[node.id] = index
    members: dict[int, list[int]] = {}
    for cpu in inventory.cpus:
        members.setdefault(cpu.numa, []).append(cpu.id)
    for index, node in enumerate(inventory.numa_nodes):
        expected = CpuSet(members.get(node.id, ()))
        if node.cpus != expected:
            rule = f"differs from the CPUs that name NUMA node {node.id} ({expected or 'none'})"
            yield Violation(f"numa_nodes[{index}].cpus", str(node.cpus), rule)
    for index, node in enumerate(inventory.numa_nodes):
        if stray := sorted(set(node.distances) - first.keys()):
            rule = f"names NUMA nodes {stray} that are not in numa_nodes"
            yield Violation(f"numa_nodes[{index}].distances", node.distances, rule)
    for index, node in enumerate(inventory.numa_nodes):
        if node.memory > inventory.memory:
            rule = f"is above the host's memory ({inventory.memory})"
            yield Violation(f"numa_nodes[{index}].memory", node.memory, rule)


def _gpu_violations(gpus: Sequence[Gpu]) -> Iterator[Violation]:
    first_index: dict[int, int] = {}
    first_uuid: dict[str, str] = {}  # UUID -> where it first appears

    def repeated(field: str, uuid: str) -> Violation | None:
        if uuid in first_uuid:
            return Violation(field, uuid, f"repeats {first_uuid[uuid]}")
        first_uuid[uuid] = field
        return None

    for index, gpu in enumerate(gpus):
        where = f"gpus[{index}]"
        if gpu.index in first_index:
            yield Violation(f"{where}.index", gpu.index, f"repeats gpus[{first_index[gpu.index]}]")
        else:
            first_index[gpu.index] = index
        if violation := repeated(f"{where}.uuid", gpu.uuid):
            yield violation
        if gpu.mig_devices and not gpu.mig_enabled:
            rule = "a GPU that is not in MIG mode has no MIG devices"
            yield Violation(f"{where}.mig_devices", len(gpu.mig_devices), rule)
        for number, device in enumerate(gpu.mig_devices):
            at = f"{where}.mig_devices[{number}]"
            if violation := repeated(f"{at}.uuid", device.uuid):
                yield violation
            if device.memory > gpu.memory:
                rule = f"is above its GPU's memory ({gpu.memory})"
                yield Violation(f"{at}.memory", device.memory, rule)
