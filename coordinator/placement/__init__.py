"""Placement (docs: the placement spec): pure engine, no I/O, no clock.

- ``request``: ``Resources`` -> ``normalize`` -> ``Normalized``; the short ``Request``;
- ``node``: the available view ``Node`` and a container's ``Plan``;
- ``engine``: ``node_capacity``, ``pool_capacities``, ``cpu_plans`` (sections 5, 6);
- ``docker``: ``container_limits``, the Docker settings as ``Limits`` (section 7);
- ``state``: ``NodeState`` with its allocations; ``assign``, ``release``, ``realloc``,
  ``replace``, ``set_node`` (sections 2, 6, 10, 11);
- ``shared_cpu``: what unbound containers are charged on the shared pool, the node's
  ``cpu_overcommit``, the shared cores kept for them (allot's, beyond section 6);
- ``place``: ``place`` and the ``Planner`` behind it (section 9);
- ``strategies``: ``NodeInfo``, ``distribute`` (section 8);
- ``reference``: slow, literal versions for the tests and the benchmark.

    node = Node("n1", {c: 100 for c in range(24)}, memory=128 * GiB)
    node_capacity(node, Request("1.7", 512 * MiB, cpu_bind=True))   -> 12
    place([node], Request("1.7", 512 * MiB, cpu_bind=True), 3, "auto").deploy  -> {"n1": 3}
"""

from coordinator.placement.docker import container_limits
from coordinator.placement.engine import cpu_plans, node_capacity, pool_capacities
from coordinator.placement.errors import PlacementError
from coordinator.placement.node import GiB, Node, Plan
from coordinator.placement.place import Placement, Planner, place
from coordinator.placement.request import (
    MIN_MEMORY,
    MiB,
    Normalized,
    Request,
    Resources,
    normalize,
)
from coordinator.placement.state import (
    Allocation,
    Change,
    Delta,
    NodeState,
    assign,
    load,
    realloc,
    release,
    replace,
    set_node,
)
from coordinator.placement.strategies import NodeInfo, distribute

__all__ = [
    "MIN_MEMORY",
    "Allocation",
    "Change",
    "Delta",
    "GiB",
    "MiB",
    "Node",
    "NodeInfo",
    "NodeState",
    "Normalized",
    "Placement",
    "PlacementError",
    "Plan",
    "Planner",
    "Request",
    "Resources",
    "assign",
    "container_limits",
    "cpu_plans",
    "distribute",
    "load",
    "node_capacity",
    "normalize",
    "place",
    "pool_capacities",
    "realloc",
    "release",
    "replace",
    "set_node",
]
