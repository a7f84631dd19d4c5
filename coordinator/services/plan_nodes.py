"""Nodes as the placement engine sees them: from a registered node's inventory, or from
a what-if request's inline description.

    node_from_inventory("n1", inventory, share_base=100)
    registered_node(registry, "n1", share_base=100)      # or UnusableNode, with the reason
    node_from_spec(InlineNode(name="n1", cores=24, memory="64Gi"), share_base=100)

A registered node offers share_base pieces on each offered CPU (online, not isolated,
not reserved); its NUMA map covers exactly those CPUs and its NUMA memory names exactly
the NUMA nodes they sit on (a CPU-less memory node has no cores to plan on).
"""

from __future__ import annotations

import msgspec

from coordinator.errors import NotFound, UnusableNode
from coordinator.placement import Node, PlacementError
from coordinator.services.registry import NodeRecords
from shared.api.nodes import NodeRecord
from shared.inventory import Inventory
from shared.quantity import QuantityError, parse_count, parse_memory


class InlineNode(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A node described in a what-if request."""

    name: str
    cores: int | dict[str, int]  # a core count (ids 0..n-1 at share_base), or pieces per id
    numa: dict[str, int] | None = None  # core id -> NUMA node id
    memory: int | str = 0
    numa_memory: dict[str, int | str] | None = None  # NUMA node id -> bytes
    existing: int = 0  # containers of the deployment already there


class NodeSpecError(ValueError):
    """An inline node that cannot be read; the message names the node and the field."""


def node_from_inventory(name: str, inventory: Inventory, *, share_base: int) -> Node:
    offered = inventory.offered()
    numa = {cpu.id: cpu.numa for cpu in inventory.cpus if cpu.id in offered}
    used = set(numa.values())
    numa_memory = {node.id: node.memory for node in inventory.numa_nodes if node.id in used}
    return Node(
        name,
        dict.fromkeys(offered, share_base),
        numa=numa or None,
        memory=inventory.memory,
        numa_memory=numa_memory or None,
        share_base=share_base,
    )


def registered_node(registry: NodeRecords, name: str, *, share_base: int) -> Node:
    """The registered node ``name`` from its inventory; ``UnusableNode`` when its record
    breaks today's rules or the placement engine cannot take it (either way a record an
    older version stored: a hello that breaks them is refused), ``NotFound`` when there
    is no such node."""
    record = registry.get(name)
    if record is None:
        raise NotFound(f"no node {name}")
    return usable_node(record, registry.unusable(name), share_base=share_base)


def usable_node(record: NodeRecord, problem: str | None, *, share_base: int) -> Node:
    """The node of ``record`` from its inventory; ``UnusableNode`` when ``problem`` says
    its record breaks today's rules, or the placement engine cannot take it."""
    if problem is None:
        try:
            return node_from_inventory(record.name, record.inventory, share_base=share_base)
        except PlacementError as error:
            problem = error.message
    raise UnusableNode(record.name, problem)


def node_from_spec(spec: InlineNode, *, share_base: int) -> Node:
    where = f"node {spec.name!r}"
    try:
        if isinstance(spec.cores, int):
            count = parse_count(f"{where} cores", spec.cores)
            cores = dict.fromkeys(range(count), share_base)
        else:
            cores = {
                _id(where, "cores", k): parse_count(f"{where} cores[{k}]", v)
                for k, v in spec.cores.items()
            }
        numa = None
        if spec.numa is not None:
            numa = {
                _id(where, "numa", k): parse_count(f"{where} numa[{k}]", v)
                for k, v in spec.numa.items()
            }
        numa_memory = None
        if spec.numa_memory is not None:
            numa_memory = {
                _id(where, "numa_memory", k): parse_memory(v, field=f"{where} numa_memory[{k}]")
                for k, v in spec.numa_memory.items()
            }
        memory = parse_memory(spec.memory, field=f"{where} memory")
        parse_count(f"{where} existing", spec.existing)
    except QuantityError as error:
        raise NodeSpecError(str(error)) from None
    return Node(
        spec.name, cores, numa=numa, memory=memory, numa_memory=numa_memory, share_base=share_base
    )


def _id(where: str, field: str, key: str) -> int:
    if not key.isascii() or not key.isdigit():
        raise NodeSpecError(f"{where} {field}: {key!r} is not a non-negative integer id")
    return int(key)
