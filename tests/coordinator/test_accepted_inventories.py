"""Every inventory the coordinator takes from an agent is one the placement engine can
use: a node's data can never make a placement over the whole cluster fail."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from coordinator.placement import NodeState, PlacementError, Request, place
from coordinator.services.plan_nodes import node_from_inventory
from shared.inventory import Inventory
from tests.inventories import inventories


@settings(max_examples=100, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(inventories())
def test_the_placement_engine_takes_every_inventory_the_coordinator_takes(
    inventory: Inventory,
) -> None:
    node = node_from_inventory("n1", inventory, share_base=100)
    state = NodeState(
        "n1",
        dict(node.cores),
        numa=node.numa,
        memory=node.memory,
        numa_memory=node.numa_memory,
        share_base=100,
    )
    for cpu_bind in (False, True):
        assert _placement_error(state, cpu_bind) in ("", "insufficient_capacity")


def _placement_error(state: NodeState, cpu_bind: bool) -> str:
    """The kind of error placing one container on the node gives, or ""."""
    try:
        place([state.view()], Request("0.5", "64Mi", cpu_bind), 1, "auto")
    except PlacementError as error:
        return error.kind
    return ""
