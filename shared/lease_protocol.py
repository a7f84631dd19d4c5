"""The capacity-lease wire format (JSON over HTTP), shared by the coordinator and clients.

    POST /v1/capacity          CapacityRequest  -> CapacityResponse
    POST /v1/capacity/release  ReleaseRequest   -> {}

One request covers every resource of one client, a client id within a namespace (see
``CapacityRequest``). Times are Unix epoch seconds and durations seconds. Decoding
checks the names (the namespace an RFC 1123 label, the client id 1 to
``MAX_CLIENT_ID_LENGTH`` characters); the coordinator checks the values (finite,
non-negative, ...) with ``request_problems`` before it changes anything.
"""

from __future__ import annotations

import math
from typing import Annotated

import msgspec
from msgspec import Meta

from shared.resource_names import Rfc1123Label

MAX_CLIENT_ID_LENGTH = 256
ClientId = Annotated[str, Meta(min_length=1, max_length=MAX_CLIENT_ID_LENGTH)]


class ResourceRequest(msgspec.Struct, frozen=True, kw_only=True):
    resource_id: str
    wants: float
    has: float = 0.0
    subclients: int = 1
    priority: int = 0


# omit_defaults: a request that names no namespace says nothing about it on the wire.
class CapacityRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What one client asks for, every resource at once. The client is ``client_id`` in
    ``namespace``; left out, the token's only namespace (for an admin token: the
    cluster's own clients, namespace "")."""

    client_id: ClientId
    resources: list[ResourceRequest]
    namespace: Rfc1123Label | None = None


class Gets(msgspec.Struct, frozen=True, kw_only=True):
    capacity: float
    expiry_time: float
    refresh_interval: float


class ResourceResponse(msgspec.Struct, frozen=True, kw_only=True):
    resource_id: str
    gets: Gets
    safe_capacity: float


class CapacityResponse(msgspec.Struct, frozen=True, kw_only=True):
    resources: list[ResourceResponse]


class ReleaseRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Leases one client gives back at once; its namespace as in ``CapacityRequest``."""

    client_id: ClientId
    resource_ids: list[str]
    namespace: Rfc1123Label | None = None


def request_problems(request: CapacityRequest) -> list[str]:
    """Every rule of the capacity request that ``request`` breaks, each naming the field
    and the resource; empty when it may be decided."""
    problems: list[str] = []
    if not request.client_id:
        problems.append("client_id must not be empty")
    seen: set[str] = set()
    for item in request.resources:
        where = f"resource {item.resource_id!r}"
        if not item.resource_id:
            problems.append("resource_id must not be empty")
        elif item.resource_id in seen:
            problems.append(f"{where} appears more than once")
        seen.add(item.resource_id)
        for field in ("wants", "has"):
            value = getattr(item, field)
            if not math.isfinite(value) or value < 0:
                problems.append(f"{where}: {field} must be a finite number >= 0, got {value!r}")
        if item.subclients < 1:
            problems.append(f"{where}: subclients must be >= 1, got {item.subclients}")
    return problems
