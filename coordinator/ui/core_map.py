"""A node's core map: every CPU of the node by NUMA node and physical core (its SMT
siblings side by side), with what holds it, laid out for an inline SVG.

Pure: it takes the inventory and the allocation's plain data and returns boxes with
coordinates; the template only draws them.

    groups = core_map(inventory, plans={"c-1": {2: 100}}, share_base=100,
                      holder=lambda cid: Holder(cid, "web", "/ui/deployments/a/web", 0))
    groups[0].cores[1].cpus[0].kind   -> "bound"

A CPU is ``bound`` when a container holds it whole, ``fragment`` when containers hold
pieces of it, ``shared`` when it is in the node's shared pool (the offered CPUs no bound
container uses, neither whole nor in part: ``NodeState.shared_pool``, where unbound
containers run) and ``withheld`` when the agent does not offer it (reserved for the
system, or isolated).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shared.inventory import Inventory

COLUMNS = 8  # physical cores per row of a NUMA node's map
CPU_WIDTH = 44
CPU_HEIGHT = 34
GAP = 6  # between physical cores, and around a core's CPUs
HEADER = 16  # a physical core's label above its CPUs


@dataclass(frozen=True)
class Holder:
    """Who holds a CPU as the viewer may see it: ``label`` (namespace/deployment and the
    container's id, or "another namespace"), ``short`` what fits on the CPU's box (""
    when hidden), ``href`` its page (None when hidden) and ``colour`` an index into the
    dashboard's palette (-1 for none: a hidden one, or one that holds no CPU)."""

    label: str
    short: str
    href: str | None
    colour: int


@dataclass(frozen=True)
class CpuCell:
    cpu: int
    kind: str  # bound, fragment, shared, withheld
    holders: tuple[Holder, ...]
    used_pieces: int
    x: int
    y: int
    title: str
    width: int = CPU_WIDTH
    height: int = CPU_HEIGHT


@dataclass(frozen=True)
class CoreBox:
    core: int
    x: int
    y: int
    width: int
    height: int
    cpus: tuple[CpuCell, ...]


@dataclass(frozen=True)
class NumaGroup:
    numa: int
    cores: tuple[CoreBox, ...]
    width: int
    height: int


def core_map(
    inventory: Inventory,
    *,
    plans: Mapping[str, Mapping[int, int]],
    share_base: int,
    holder: Callable[[str], Holder],
) -> list[NumaGroup]:
    """The node's CPUs grouped by NUMA node (ascending), then physical core (by its
    lowest CPU id), then CPU id. ``plans``: container id -> CPU id -> pieces it holds.
    Cost O(cpus + the plans' CPUs)."""
    offered = set(inventory.offered())
    holders: dict[int, list[tuple[str, int]]] = {}
    for container_id in sorted(plans):
        for cpu, pieces in plans[container_id].items():
            holders.setdefault(cpu, []).append((container_id, pieces))
    by_numa: dict[int, dict[int, list[int]]] = {}
    for entry in inventory.cpus:
        by_numa.setdefault(entry.numa, {}).setdefault(entry.core, []).append(entry.id)

    def cell(cpu: int, x: int, y: int) -> CpuCell:
        held = holders.get(cpu, [])
        seen = tuple(holder(container_id) for container_id, _ in held)
        used = sum(pieces for _, pieces in held)
        if cpu not in offered:
            kind = "withheld"
        elif any(pieces >= share_base for _, pieces in held):
            kind = "bound"
        elif held:
            kind = "fragment"
        else:
            kind = "shared"
        return CpuCell(cpu, kind, seen, used, x, y, _title(cpu, kind, seen, used, share_base))

    groups = []
    for numa in sorted(by_numa):
        cores = by_numa[numa]
        boxes = []
        siblings_most = max(len(cpus) for cpus in cores.values())
        box_width = siblings_most * (CPU_WIDTH + GAP) + GAP
        box_height = HEADER + CPU_HEIGHT + GAP
        for index, core in enumerate(sorted(cores)):
            x = (index % COLUMNS) * (box_width + GAP)
            y = (index // COLUMNS) * (box_height + GAP)
            cpus = tuple(
                cell(cpu, x + GAP + i * (CPU_WIDTH + GAP), y + HEADER)
                for i, cpu in enumerate(sorted(cores[core]))
            )
            boxes.append(CoreBox(core, x, y, box_width, box_height, cpus))
        columns = min(len(cores), COLUMNS)
        rows = -(-len(cores) // COLUMNS)
        width = columns * (box_width + GAP) - GAP
        height = rows * (box_height + GAP) - GAP
        groups.append(NumaGroup(numa, tuple(boxes), width, height))
    return groups


def _title(cpu: int, kind: str, holders: tuple[Holder, ...], used: int, share_base: int) -> str:
    """What a CPU's tooltip (its SVG <title>) says, in words."""
    if kind == "withheld":
        return f"CPU {cpu}: not offered (reserved or isolated)"
    if kind == "shared":
        return f"CPU {cpu}: shared pool"
    names = ", ".join(holder.label for holder in holders)
    if kind == "bound":
        return f"CPU {cpu}: bound to {names}"
    return f"CPU {cpu}: {used}/{share_base} pieces held by {names}"
