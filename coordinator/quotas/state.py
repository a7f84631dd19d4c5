"""One parsed view of the whole state, read by admission and preemption.

Invariant: ``used[q]`` is ``usage_of`` over ``members[q]`` -- the same computation as
``used()`` -- and ``members[q]`` holds every counted container of q's namespaces (those
of all its namespaces, in input order), requests parsed.

    state = snapshot(quotas, containers, gb_per_gpu=16, share_base=100, exclude="ns/p")
    state.quota_of("team-a").name, state.used["a"], state.members["a"]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.quotas.model import Container, ParsedQuota, Quota
from coordinator.quotas.resources import Amounts
from coordinator.quotas.usage import Entry, entry, parse_all, usage_of


@dataclass(frozen=True)
class Snapshot:
    """Quotas by name (input order), the governing quota of each namespace, and each
    quota's counted containers and used."""

    quotas: dict[str, ParsedQuota]
    governing: dict[str, str]
    members: dict[str, list[Entry]]
    used: dict[str, Amounts]

    def quota_of(self, namespace: str) -> ParsedQuota | None:
        """The quota governing ``namespace``, or None when it is unmanaged."""
        name = self.governing.get(namespace)
        return None if name is None else self.quotas[name]


def snapshot(
    quotas: Sequence[Quota],
    containers: Sequence[Container],
    *,
    gb_per_gpu: int,
    share_base: int,
    exclude: str | None = None,
) -> Snapshot:
    """Parse ``quotas`` (a valid set; with an invalid one, the first quota naming a
    namespace governs it) and the counted containers of governed namespaces, leaving out
    the container keyed ``exclude`` (the one being admitted or placed). Raises
    ``QuotaError`` for an invalid quota or request. O(q * r + n * r)."""
    parsed = parse_all(quotas, share_base)
    governing: dict[str, str] = {}
    for quota in parsed:
        for namespace in quota.namespaces:
            governing.setdefault(namespace, quota.name)
    members: dict[str, list[Entry]] = {q.name: [] for q in parsed}
    for container in containers:
        owner = governing.get(container.namespace)
        if owner is None or not container.running or container.key == exclude:
            continue
        members[owner].append(entry(container, gb_per_gpu=gb_per_gpu, share_base=share_base))
    used = {q.name: usage_of(q, members[q.name]) for q in parsed}
    return Snapshot({q.name: q for q in parsed}, governing, members, used)
