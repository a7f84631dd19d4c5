"""What a token sees of one resource's leases: the leases of the namespaces it may use,
each with its namespace and client id, and the rest only as totals, never by name.

An admin token may use every namespace, so it sees every lease and no others' totals:

    view = leases_seen("db.write", service.leases("db.write"), principal.may_use)
    view.leases   -> [ClientLease(namespace="team-a", client_id="web-7", ...)]
    view.others   -> OtherLeases(clients=2, has=45.0, wants=35.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from coordinator.leases import LeaseState
from coordinator.services.lease_keys import split_holder
from shared.api.leases import ClientLease, OtherLeases, ResourceLeases


def client_lease(state: LeaseState) -> ClientLease:
    """The engine's lease, whose client id is a holder key, with its holder split out."""
    namespace, client_id = split_holder(state.client_id)
    return ClientLease(
        namespace=namespace,
        client_id=client_id,
        has=state.has,
        wants=state.wants,
        subclients=state.subclients,
        priority=state.priority,
        expiry_time=state.expiry_time,
    )


def leases_seen(
    resource_id: str, leases: Iterable[ClientLease], may_see: Callable[[str], bool]
) -> ResourceLeases:
    """The leases of the namespaces ``may_see`` admits, sorted by namespace and client
    id, and the totals of the others. O(n log n)."""
    seen: list[ClientLease] = []
    hidden: list[ClientLease] = []
    for lease in leases:
        (seen if may_see(lease.namespace) else hidden).append(lease)
    seen.sort(key=lambda lease: (lease.namespace, lease.client_id))
    others = OtherLeases(
        clients=len(hidden),
        has=math.fsum(lease.has for lease in hidden),
        wants=math.fsum(lease.wants for lease in hidden),
    )
    return ResourceLeases(resource_id=resource_id, leases=seen, others=others)
