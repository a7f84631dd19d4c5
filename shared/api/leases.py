"""Capacity leases as the API shows them: resource templates (``/v1/resources/{glob}``,
and the coordinator's ``[[resources]]`` config), a resource's status and its leases.

The coordinator validates and matches templates (``coordinator.leases.templates``) and
builds the views (``coordinator.services.lease_service``, ``coordinator.services.lease_views``).
"""

from __future__ import annotations

import enum

import msgspec


class Kind(enum.StrEnum):
    NO_ALGORITHM = "NO_ALGORITHM"
    STATIC = "STATIC"
    PROPORTIONAL_SHARE = "PROPORTIONAL_SHARE"
    FAIR_SHARE = "FAIR_SHARE"


class Algorithm(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: Kind
    lease_length: float  # seconds a grant lasts
    refresh_interval: float  # seconds until the client should come back
    learning_mode_duration: float | None = None  # seconds; None: the lease length


class ResourceTemplate(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    identifier_glob: str
    capacity: float
    algorithm: Algorithm
    safe_capacity: float | None = None  # None: computed per lease; -1: unlimited
    description: str = ""

    @property
    def learning_window(self) -> float:
        """Seconds of learning mode after a start without persisted leases."""
        duration = self.algorithm.learning_mode_duration
        return self.algorithm.lease_length if duration is None else duration


class ResourceStatus(msgspec.Struct, frozen=True, kw_only=True):
    resource_id: str
    template: str  # the identifier_glob that configures it
    kind: str
    capacity: float
    safe_capacity: float | None
    lease_length: float
    refresh_interval: float
    sum_has: float
    sum_wants: float
    clients: int
    learning: bool


class ResourceList(msgspec.Struct, frozen=True):
    """``GET /v1/resources``, which the coordinator builds as a plain dict."""

    templates: list[ResourceTemplate]
    resources: list[ResourceStatus]


class ClientLease(msgspec.Struct, frozen=True, kw_only=True):
    """One live lease with its holder: a client id within a namespace ("" for the
    cluster's own clients)."""

    namespace: str
    client_id: str
    has: float
    wants: float
    subclients: int
    priority: int
    expiry_time: float


class OtherLeases(msgspec.Struct, frozen=True, kw_only=True):
    """The leases a token may not see by name, as totals."""

    clients: int
    has: float
    wants: float


class ResourceLeases(msgspec.Struct, frozen=True, kw_only=True):
    resource_id: str
    leases: list[ClientLease]
    others: OtherLeases
