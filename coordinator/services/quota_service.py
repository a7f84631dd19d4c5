"""Elastic quotas in the coordinator: the committed quotas, and how they are shown.

A quota is written by a decision like any other (``deployments.quotas``): checked there
against every quota as the decisions before it left them, committed with the labels it
moves, and only then applied here (``apply``). Store keys: ``/quotas/<name>`` (names are
unique across both kinds).

``used`` counts the containers that hold an allocation; the caller gives what they ask
for (``Requested``: the request shapes of some namespaces' containers, each with how many
containers ask for it, as the books keep them up to date), so a view costs O(shapes),
not O(containers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

import msgspec

from coordinator.config import QuotaSettings
from coordinator.quotas import (
    Quota,
    encode_amounts,
    overquota_amount,
    total_min,
    used_by_shapes,
)
from coordinator.store import Store
from shared.api.nodes import NodeHealth, NodeRecord
from shared.api.quotas import QuotaStatus, QuotaSummary, QuotaView
from shared.codec import json_decoder
from shared.inventory import Gpu

QUOTA_PREFIX = "/quotas/"
Requested = Callable[[Iterable[str]], Sequence[tuple[Mapping[str, object], int]]]
GiB = 2**30

_decode_quota: msgspec.json.Decoder[Quota] = json_decoder(Quota)


class QuotaService:
    def __init__(
        self, quotas: Iterable[Quota], *, share_base: int, settings: QuotaSettings
    ) -> None:
        self._quotas = {quota.name: quota for quota in quotas}
        self._share_base = share_base
        self._settings = settings

    @classmethod
    async def load(cls, store: Store, *, share_base: int, settings: QuotaSettings) -> QuotaService:
        quotas = [_decode_quota.decode(entry.value) for entry in await store.range(QUOTA_PREFIX)]
        return cls(quotas, share_base=share_base, settings=settings)

    def get(self, kind: str, name: str) -> Quota | None:
        quota = self._quotas.get(name)
        return quota if quota is not None and quota.kind == kind else None

    def all(self) -> list[Quota]:
        return [self._quotas[name] for name in sorted(self._quotas)]

    def apply(self, changes: Mapping[str, Quota | None]) -> None:
        """Take in committed quota writes: name -> the quota, or None once deleted."""
        for name, quota in changes.items():
            if quota is None:
                self._quotas.pop(name, None)
            else:
                self._quotas[name] = quota

    def used(self, quota: Quota, requested: Requested) -> dict[str, Fraction]:
        """used_Q of ``quota``: O(its namespaces' request shapes)."""
        shapes = requested(quota.namespaces)
        return used_by_shapes(quota, shapes, self.gb_per_gpu, share_base=self._share_base)

    def view(self, quota: Quota, requested: Requested) -> QuotaView:
        used_q = self.used(quota, requested)
        over = overquota_amount(quota, used_q, share_base=self._share_base)
        return QuotaView(
            name=quota.name,
            kind=quota.kind,
            namespaces=list(quota.namespaces),
            min=dict(quota.min),
            max=None if quota.max is None else dict(quota.max),
            status=QuotaStatus(
                used=encode_amounts(used_q),
                over_quota=encode_amounts(over),
            ),
        )

    def summary(self, nodes: Sequence[NodeRecord], requested: Requested) -> QuotaSummary:
        quotas = self.all()
        minimum = total_min(quotas, share_base=self._share_base)
        capacity = self.cluster_capacity(nodes)
        warnings = [
            f"the quotas guarantee {_show(resource, amount)} of {resource} in all, but the"
            f" ready nodes offer {_show(resource, capacity.get(resource, Fraction(0)))}"
            for resource, amount in minimum.items()
            if resource in capacity and amount > capacity[resource]
        ]
        return QuotaSummary(
            quotas=[self.view(quota, requested) for quota in quotas],
            total_min=encode_amounts(minimum),
            capacity=encode_amounts(capacity),
            warnings=warnings,
        )

    def cluster_capacity(self, nodes: Sequence[NodeRecord]) -> dict[str, Fraction]:
        """What the ready nodes offer of the resources a node can measure: cpu (cores),
        memory (bytes), whole GPUs, MIG devices per profile, GPU memory (GB) charged
        the way containers are (whole GPUs per ``gpu_memory_source``, MIG by profile),
        and the extended resources their agents are configured to offer."""
        total: dict[str, Fraction] = {}

        def add(resource: str, amount: int) -> None:
            total[resource] = total.get(resource, Fraction(0)) + amount

        for node in nodes:
            if node.state != NodeHealth.READY:
                continue
            inventory = node.inventory
            add("cpu", len(inventory.offered()))
            add("memory", inventory.memory)
            for gpu in inventory.gpus:
                if not gpu.mig_enabled:
                    add("nvidia.com/gpu", 1)
                    add("gpu-memory", self._whole_gpu_gb(gpu))
                for device in gpu.mig_devices:
                    add(f"nvidia.com/mig-{device.profile}", 1)
                    add("gpu-memory", _profile_gb(device.profile))
            for resource, units in inventory.extended.items():
                add(resource, units)
        return total

    def _whole_gpu_gb(self, gpu: Gpu) -> int:
        if self._settings.gpu_memory_source == "inventory":
            return round(gpu.memory / GiB)
        return self.gb_per_gpu

    @property
    def cooldown_s(self) -> float:
        """How long a preemption protects the preemptor's quota from its victims' (8.3)."""
        return self._settings.preemption_cooldown_s

    @property
    def gb_per_gpu(self) -> int:
        """GB charged per whole GPU request (the quota settings)."""
        return self._settings.nvidia_gpu_resource_memory_gb


def _profile_gb(profile: str) -> int:
    """The M of a MIG profile "<N>g.<M>gb" (also "1c.2g.20gb", "1g.10gb+me")."""
    size = profile.split("+")[0].rsplit(".", 1)[-1]
    return int(size.removesuffix("gb")) if size.endswith("gb") else 0


def _show(resource: str, amount: Fraction) -> str:
    value = encode_amounts({resource: amount})[resource]
    if resource == "memory" and isinstance(value, int):
        return f"{value / GiB:.1f} GiB"
    return str(value)
