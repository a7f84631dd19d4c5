"""What a container holds on a node in whole units rather than cores and bytes: GPU
devices, handed out by UUID (``gpus``), and named extended resources such as
``example.com/fpga``, handed out by count. Pure.

    need = UnitNeed(GpuNeed(whole=1), {"example.com/fpga": 2})
    free = free_units(inventory, holders=containers_on_the_node)
    take(need, free)          -> Grant(gpus=["GPU-bbb"], extended={"example.com/fpga": 2}),
                                 or None when the node has too few
    room(need, {"n1": free})  -> {"n1": Grant(...)}: the nodes that can take one more

Invariant: a node's free count of an extended resource is what its inventory offers less
what the containers there hold, never below 0, so the grants taken one after another
(each counted as held before the next) never hand out a unit twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.deployments.gpus import GPU_RESOURCE, MIG_RESOURCE, FreeDevices, GpuNeed
from coordinator.deployments.gpus import free_devices as free_gpu_devices
from coordinator.deployments.gpus import pick as pick_devices
from shared.inventory import Inventory


class Holder(Protocol):
    """A container as far as units go: the devices and extended resources it holds."""

    @property
    def gpus(self) -> list[str]: ...

    @property
    def extended(self) -> dict[str, int]: ...


@dataclass(frozen=True)
class UnitNeed:
    gpus: GpuNeed = field(default_factory=GpuNeed)
    extended: Mapping[str, int] = field(default_factory=dict)  # resource -> units

    def __bool__(self) -> bool:
        return bool(self.gpus) or any(self.extended.values())

    def __str__(self) -> str:
        parts = [str(self.gpus)] if self.gpus else []
        parts += [f"{n} x {name}" for name, n in sorted(self.extended.items()) if n]
        return " + ".join(parts) or "no devices"

    def quota_requests(self) -> dict[str, int]:
        """The same, in the quota engine's resource names (also the names of ``counts``)."""
        wanted = self.gpus.quota_requests()
        wanted |= {name: n for name, n in sorted(self.extended.items()) if n}
        return wanted


@dataclass(frozen=True)
class FreeUnits:
    devices: FreeDevices
    extended: dict[str, int]  # resource -> units not held

    def counts(self) -> dict[str, int]:
        """How many of each are free, in the quota engine's resource names."""
        free = {GPU_RESOURCE: len(self.devices.whole)} if self.devices.whole else {}
        free |= {MIG_RESOURCE.format(p): len(ids) for p, ids in sorted(self.devices.mig.items())}
        return free | dict(sorted(self.extended.items()))


@dataclass(frozen=True)
class Grant:
    """What one container gets on a node."""

    gpus: list[str] = field(default_factory=list)  # device UUIDs
    extended: dict[str, int] = field(default_factory=dict)


def free_units(inventory: Inventory, holders: Iterable[Holder]) -> FreeUnits:
    """What the node still has once ``holders`` (the containers there) took theirs.
    O(devices + held)."""
    holding = list(holders)
    devices = free_gpu_devices(inventory, (uuid for h in holding for uuid in h.gpus))
    held = held_extended(holding)
    offered = inventory.extended
    return FreeUnits(devices, {name: max(0, n - held.get(name, 0)) for name, n in offered.items()})


def held_extended(holders: Iterable[Holder]) -> dict[str, int]:
    """Extended resource -> the units ``holders`` hold together, by name. O(held)."""
    total: dict[str, int] = {}
    for holder in holders:
        for name, count in holder.extended.items():
            total[name] = total.get(name, 0) + count
    return dict(sorted(total.items()))


def take(need: UnitNeed, free: FreeUnits) -> Grant | None:
    """What one container gets from ``free``, or None when the node has too few of
    something: devices in inventory order, extended resources by count."""
    if any(n > free.extended.get(name, 0) for name, n in need.extended.items()):
        return None
    devices = pick_devices(need.gpus, free.devices) if need.gpus else []
    if devices is None:
        return None
    return Grant(devices, {name: n for name, n in sorted(need.extended.items()) if n})


def room(need: UnitNeed, free: Mapping[str, FreeUnits]) -> dict[str, Grant]:
    """Node -> what one more container gets there, for the nodes that have enough."""
    grants = {node: take(need, units) for node, units in sorted(free.items())}
    return {node: grant for node, grant in grants.items() if grant is not None}


def shortage(need: UnitNeed, free: Mapping[str, FreeUnits]) -> dict[str, object]:
    """The numbers of a refusal: what one container needs and what each node has free
    of those resources."""
    wanted = need.quota_requests()
    return {
        "needed": wanted,
        "free": {
            node: {name: units.counts().get(name, 0) for name in wanted}
            for node, units in sorted(free.items())
        },
    }
