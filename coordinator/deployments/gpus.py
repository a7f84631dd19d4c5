"""Which GPU devices a container gets on a node: whole GPUs (those not in MIG mode) and
MIG devices by profile, handed out by UUID. Pure.

    need = GpuNeed(whole=1, mig={"1g.10gb": 2})
    free = free_devices(inventory, taken={"GPU-aaa"})
    pick(need, free)   -> ["GPU-bbb", "MIG-111", "MIG-222"], or None when it does not fit

Devices are taken in the inventory's order (GPU index, then MIG slot), so the same state
always gives the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from shared.inventory import Inventory

MIG_RESOURCE = "nvidia.com/mig-{}"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class GpuNeed:
    whole: int = 0
    mig: dict[str, int] = field(default_factory=dict)  # MIG profile -> devices

    def __bool__(self) -> bool:
        return self.whole > 0 or any(self.mig.values())

    def __str__(self) -> str:
        parts = [f"{self.whole} GPU"] if self.whole else []
        parts += [f"{n} x MIG {p}" for p, n in sorted(self.mig.items()) if n]
        return " + ".join(parts) or "no GPU"

    def quota_requests(self) -> dict[str, int]:
        """The same, in the quota engine's resource names."""
        wanted = {GPU_RESOURCE: self.whole} if self.whole else {}
        wanted |= {MIG_RESOURCE.format(p): n for p, n in sorted(self.mig.items()) if n}
        return wanted


@dataclass(frozen=True)
class FreeDevices:
    whole: list[str]  # UUIDs of free GPUs not in MIG mode
    mig: dict[str, list[str]]  # profile -> UUIDs of free MIG devices


def free_devices(inventory: Inventory, taken: Iterable[str]) -> FreeDevices:
    used = set(taken)
    whole = [g.uuid for g in inventory.gpus if not g.mig_enabled and g.uuid not in used]
    mig: dict[str, list[str]] = {}
    for gpu in inventory.gpus:
        for device in gpu.mig_devices:
            if device.uuid not in used:
                mig.setdefault(device.profile, []).append(device.uuid)
    return FreeDevices(whole, mig)


def pick(need: GpuNeed, free: FreeDevices) -> list[str] | None:
    """The devices for one container, or None when the node has too few."""
    if need.whole > len(free.whole):
        return None
    chosen = free.whole[: need.whole]
    for profile, count in sorted(need.mig.items()):
        available = free.mig.get(profile, [])
        if count > len(available):
            return None
        chosen += available[:count]
    return chosen
