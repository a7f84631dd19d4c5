"""The one error of the placement engine: a kind naming the rule, and a message saying
what was short and where (placement spec section 13).

    raise PlacementError("insufficient_capacity", "need 10 containers, 7 fit", need=10, available=7)
"""

from __future__ import annotations

from typing import Literal

Kind = Literal[
    "invalid_request",  # a bad quantity, flag, need, limit, strategy or SetNode field
    "insufficient_capacity",  # the nodes' capacities add up to less than the need
    "node_limit",  # AUTO's per-node limit leaves too little room
    "insufficient_nodes",  # EACH / FILL cannot find enough nodes
    "already_filled",  # FILL would add nothing
    "insufficient_resource",  # a node cannot take the asked plans (place, realloc)
    "below_allocation",  # SetNode would go below what is allocated
    "conflict",  # node versions kept changing while committing
]


class PlacementError(Exception):
    """``kind`` names the broken rule; ``details`` carries the numbers and names."""

    def __init__(self, kind: Kind, message: str, **details: object) -> None:
        super().__init__(message)
        self.kind: Kind = kind
        self.message = message
        self.details = details


def invalid_request(field: str, value: object, rule: str, **details: object) -> PlacementError:
    """``invalid_request`` naming the field, the value and the rule (and the node, when
    ``details`` names one)."""
    node = details.get("node")
    where = f"node {node}: " if node is not None else ""
    return PlacementError(
        "invalid_request",
        f"{where}{field} = {value!r}: {rule}",
        field=field,
        value=value,
        rule=rule,
        **details,
    )
