"""A placement ``NodeState`` as stored: plain msgspec data, converted both ways without
loss (the state's own checks run again on load).

Each node has a header at ``/allocations/<node>`` (its capacity and version; the key a
commit compares) and each of its allocations a key of its own,
``/allocations/<node>/<container>``, so that a decision writes what it changed and not
every allocation of every node it touched (which, with 330 containers a node, made etcd's
history grow 20 MB/s). A header stored before that holds its allocations inline
(``allocations_apart`` false); it loads as it is, and the node's next write stores every
allocation at its own key.

    puts, deletes = node_writes(before, after, inline=False)   # what a commit writes
    node, container = parse_key(key)                          # container "" for a header
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from coordinator.placement import Allocation, NodeState, Normalized, Plan
from coordinator.placement.shared_cpu import overcommit_ratio, overcommit_text
from shared.codec import to_json

ALLOCATION_PREFIX = "/allocations/"


class StoredAllocation(msgspec.Struct, frozen=True, kw_only=True):
    cores: dict[int, int]
    numa: int | None
    memory: int
    fragment: int | None
    cpu_request: int
    cpu_limit: int
    memory_request: int
    memory_limit: int
    cpu_bind: bool
    soft_memory: bool


class StoredNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    cores: dict[int, int]
    numa: dict[int, int] | None
    memory: int
    numa_memory: dict[int, int] | None
    share_base: int
    version: int
    # Only in a header stored before allocations had keys of their own.
    allocations: dict[str, StoredAllocation] = {}
    allocations_apart: bool = False
    cpu_overcommit: str = "1"  # a record stored before there was one reads as no oversell


def allocation_key(node: str) -> str:
    """The node's header: the key a commit touching the node compares."""
    return ALLOCATION_PREFIX + node


def container_allocation_key(node: str, container_id: str) -> str:
    return f"{ALLOCATION_PREFIX}{node}/{container_id}"


def parse_key(key: str) -> tuple[str, str]:
    """(node, container id) of a key under ``ALLOCATION_PREFIX``; the id is "" for a
    header. Neither a node name nor a container id holds a slash."""
    node, _, container_id = key.removeprefix(ALLOCATION_PREFIX).partition("/")
    return node, container_id


def node_writes(
    before: NodeState | None, after: NodeState, *, inline: bool
) -> tuple[dict[str, bytes], list[str]]:
    """The puts and deletes that store ``after`` where ``before`` was stored (None: none
    was): the header, and the allocations that changed, came or went. ``inline``: the
    stored header still holds its allocations, so every allocation is written.
    O(allocations of the node), with a write only for each that changed."""
    puts = {allocation_key(after.name): to_json(header(after))}
    held = {} if before is None or inline else before.allocations
    for container_id, allocation in after.allocations.items():
        was = held.get(container_id)
        if was is not allocation and was != allocation:
            key = container_allocation_key(after.name, container_id)
            puts[key] = to_json(stored_allocation(allocation))
    gone = [] if before is None else before.allocations.keys() - after.allocations.keys()
    return puts, [container_allocation_key(after.name, cid) for cid in sorted(gone)]


def header(state: NodeState) -> StoredNode:
    return StoredNode(
        name=state.name,
        cores=dict(state.cores),
        numa=None if state.numa is None else dict(state.numa),
        memory=state.memory,
        numa_memory=None if state.numa_memory is None else dict(state.numa_memory),
        share_base=state.share_base,
        version=state.version,
        cpu_overcommit=overcommit_text(state.cpu_overcommit),
        allocations_apart=True,
    )


def stored_allocation(allocation: Allocation) -> StoredAllocation:
    plan, resources = allocation.plan, allocation.resources
    return StoredAllocation(
        cores=dict(plan.cores),
        numa=plan.numa,
        memory=plan.memory,
        fragment=plan.fragment,
        cpu_request=resources.cpu_request,
        cpu_limit=resources.cpu_limit,
        memory_request=resources.memory_request,
        memory_limit=resources.memory_limit,
        cpu_bind=resources.cpu_bind,
        soft_memory=resources.soft_memory,
    )


def loaded_allocation(stored: StoredAllocation, share_base: int) -> Allocation:
    return Allocation(
        Plan(dict(stored.cores), numa=stored.numa, memory=stored.memory, fragment=stored.fragment),
        Normalized(
            cpu_request=stored.cpu_request,
            cpu_limit=stored.cpu_limit,
            memory_request=stored.memory_request,
            memory_limit=stored.memory_limit,
            cpu_bind=stored.cpu_bind,
            soft_memory=stored.soft_memory,
            share_base=share_base,
        ),
    )


def loaded(record: StoredNode, allocations: Mapping[str, Allocation]) -> NodeState:
    """The state of a header and the node's allocations (for a header holding them
    inline, those it holds come first)."""
    inline = {cid: loaded_allocation(a, record.share_base) for cid, a in record.allocations.items()}
    return NodeState(
        record.name,
        dict(record.cores),
        numa=record.numa,
        memory=record.memory,
        numa_memory=record.numa_memory,
        share_base=record.share_base,
        version=record.version,
        cpu_overcommit=overcommit_ratio(record.cpu_overcommit),
        allocations=inline | dict(allocations),
    )
