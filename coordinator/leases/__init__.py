"""Capacity leases (docs: the lease spec): pure engine, no I/O, no clock.

- ``algorithms``: the equilibrium shares of each kind, as pure functions;
- ``reference``: slow exact versions of the two sharing kinds, for tests and bench;
- ``band_index``: one priority band's claims with prefix sums, for O(sqrt n) decisions;
- ``table``: one resource's live leases and the request-time decision;
- ``templates``: resource templates, their validation and matching.
"""

from coordinator.leases.algorithms import (
    Kind,
    allocate,
    fair_share,
    no_algorithm,
    proportional_share,
    static_share,
)
from coordinator.leases.table import Lease, LeaseState, LeaseTable
from coordinator.leases.templates import (
    Algorithm,
    ResourceTemplate,
    TemplateError,
    apply_template,
    match_template,
    table_for,
    validate_templates,
)

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
