"""What a node's allocation state must change when its agent reports other hardware.

    fields = capacity_delta(offered_before, offered_after)
    set_node(state, "delta", **fields)        # placement spec 11, refused below allocation

A node's stored capacity starts as what its inventory offers and may since have been
changed by an administrator (SetNode). When the hardware changes (a CPU taken offline,
a new reserved_cpus, memory added), the capacity moves by the difference between what
the old and the new inventory offer, as a SetNode delta: the administrator's own changes
stay, and SetNode's checks refuse a change that would take away what containers hold.
Pure; the cost is O(c) in the cores of the two offers.
"""

from __future__ import annotations

from typing import TypedDict

from coordinator.placement import Node


class CapacityDelta(TypedDict):
    """Keyword arguments of ``set_node(state, "delta", ...)``."""

    cores: dict[int, int]  # core id -> pieces added (negative: taken away)
    numa: dict[int, int]  # core id -> its NUMA node, for cores new or moved
    memory: int  # bytes added
    numa_memory: dict[int, int]  # NUMA node id -> bytes added


def capacity_delta(before: Node, after: Node) -> CapacityDelta:
    """The SetNode delta that turns ``before``'s offer into ``after``'s: applied to a node
    whose capacity is ``before``, the result is exactly ``after``."""
    cores = {
        core: after.cores.get(core, 0) - before.cores.get(core, 0)
        for core in sorted(before.cores.keys() | after.cores.keys())
    }
    old_numa, new_numa = before.numa or {}, after.numa or {}
    old_memory, new_memory = before.numa_memory or {}, after.numa_memory or {}
    return CapacityDelta(
        cores={core: pieces for core, pieces in cores.items() if pieces},
        numa={core: numa for core, numa in sorted(new_numa.items()) if old_numa.get(core) != numa},
        memory=after.memory - before.memory,
        numa_memory={
            numa: new_memory.get(numa, 0) - old_memory.get(numa, 0)
            for numa in sorted(old_memory.keys() | new_memory.keys())
            if numa not in old_memory or new_memory.get(numa, 0) != old_memory[numa]
        },
    )
