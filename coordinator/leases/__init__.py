"""Capacity leases (docs: the lease spec): pure engine, no I/O, no clock.

- ``algorithms``: the equilibrium shares of each kind, as pure functions;
- ``reference``: slow exact versions of the two sharing kinds, for tests and bench;
- ``band_index``: one priority band's claims with prefix sums, for O(sqrt n) decisions;
- ``table``: one resource's live leases and the request-time decision;
- ``templates``: resource templates, their validation and matching.

``Kind``, ``Algorithm`` and ``ResourceTemplate`` are the API's (``shared.api.leases``),
exported here too as what the engine takes.
"""

from coordinator.leases.algorithms import (
    allocate,
    fair_share,
    no_algorithm,
    proportional_share,
    static_share,
)
from coordinator.leases.table import Lease, LeaseState, LeaseTable
from coordinator.leases.templates import (
    TemplateError,
    apply_template,
    match_template,
    table_for,
    validate_templates,
)
from shared.api.leases import Algorithm, Kind, ResourceTemplate

__all__ = [
    "Algorithm",
    "Kind",
    "Lease",
    "LeaseState",
    "LeaseTable",
    "ResourceTemplate",
    "TemplateError",
    "allocate",
    "apply_template",
    "fair_share",
    "match_template",
    "no_algorithm",
    "proportional_share",
    "static_share",
    "table_for",
    "validate_templates",
]
