"""The lease domain's keys and values in the store.

    /leases/templates                              the ordered template list (JSON)
    /leases/initialized                            present once lease state has ever
                                                   been persisted
    /leases/held/<resource>/<namespace>/<client>   one live lease (``lease_keys``)

No other domain reads or writes a key under ``/leases/``, and lease decisions read
nothing else: the lease domain is sequenced on its own (``lease_sequencer``).
"""

from __future__ import annotations

import msgspec

from coordinator.leases import LeaseState, ResourceTemplate
from shared.codec import json_decoder

LEASES_PREFIX = "/leases/"
TEMPLATES_KEY = "/leases/templates"
INITIALIZED_KEY = "/leases/initialized"


class StoredLease(msgspec.Struct, frozen=True, kw_only=True):
    has: float
    wants: float
    subclients: int
    priority: int
    expiry_time: float


def lease_record(lease: LeaseState) -> StoredLease:
    """What the store keeps of ``lease`` (its holder is in the key)."""
    return StoredLease(
        has=lease.has,
        wants=lease.wants,
        subclients=lease.subclients,
        priority=lease.priority,
        expiry_time=lease.expiry_time,
    )


decode_templates: msgspec.json.Decoder[list[ResourceTemplate]] = json_decoder(
    list[ResourceTemplate]
)
decode_lease: msgspec.json.Decoder[StoredLease] = json_decoder(StoredLease)
