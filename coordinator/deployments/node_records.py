"""A placement ``NodeState`` as stored at ``/allocations/<node>``: plain msgspec data,
converted both ways without loss (the state's own checks run again on load)."""

from __future__ import annotations

import msgspec

from coordinator.placement import Allocation, NodeState, Normalized, Plan
from coordinator.placement.shared_cpu import overcommit_ratio, overcommit_text

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
    allocations: dict[str, StoredAllocation]
    cpu_overcommit: str = "1"  # a record stored before there was one reads as no oversell


def allocation_key(node: str) -> str:
    return ALLOCATION_PREFIX + node


def stored(state: NodeState) -> StoredNode:
    return StoredNode(
        name=state.name,
        cores=dict(state.cores),
        numa=None if state.numa is None else dict(state.numa),
        memory=state.memory,
        numa_memory=None if state.numa_memory is None else dict(state.numa_memory),
        share_base=state.share_base,
        version=state.version,
        cpu_overcommit=overcommit_text(state.cpu_overcommit),
        allocations={
            cid: StoredAllocation(
                cores=dict(a.plan.cores),
                numa=a.plan.numa,
                memory=a.plan.memory,
                fragment=a.plan.fragment,
                cpu_request=a.resources.cpu_request,
                cpu_limit=a.resources.cpu_limit,
                memory_request=a.resources.memory_request,
                memory_limit=a.resources.memory_limit,
                cpu_bind=a.resources.cpu_bind,
                soft_memory=a.resources.soft_memory,
            )
            for cid, a in state.allocations.items()
        },
    )


def loaded(record: StoredNode) -> NodeState:
    return NodeState(
        record.name,
        dict(record.cores),
        numa=record.numa,
        memory=record.memory,
        numa_memory=record.numa_memory,
        share_base=record.share_base,
        version=record.version,
        cpu_overcommit=overcommit_ratio(record.cpu_overcommit),
        allocations={
            cid: Allocation(
                Plan(dict(a.cores), numa=a.numa, memory=a.memory, fragment=a.fragment),
                Normalized(
                    cpu_request=a.cpu_request,
                    cpu_limit=a.cpu_limit,
                    memory_request=a.memory_request,
                    memory_limit=a.memory_limit,
                    cpu_bind=a.cpu_bind,
                    soft_memory=a.soft_memory,
                    share_base=record.share_base,
                ),
            )
            for cid, a in record.allocations.items()
        },
    )
