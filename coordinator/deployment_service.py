"""Deployments in the coordinator: admit, place, commit all at once, push to the agents.

    outcome = await service.deploy("team-a", spec)     # or DeployRefused with the numbers
    await service.delete_container(container_id)
    revision, containers = service.desired("node-a")     # what the node's agent must run

The service is built in layers, one module each under ``coordinator/deployments/``, each
using the ones below it:

- ``ledger``: the in-memory state, and how one decision is relabelled, committed in one
  store transaction and pushed to the touched nodes' agents;
- ``pool_link``: pools on containers (demand, limits at admission, CPU quota from the
  pool's fair share);
- ``placing``: admission and placement of new containers, with preemption;
- ``lifecycle``: realloc, delete, and release after a node is lost;
- ``swaps``: replacing a container in its allocation, ended by its agent's report;
- ``node_admin``: SetNode, cordon, drain, and capacity that follows the hardware.
"""

from __future__ import annotations

from coordinator.deployments.lifecycle import Lifecycle
from coordinator.deployments.node_admin import NodeAdmin
from coordinator.deployments.swaps import Swapping


class DeploymentService(Lifecycle, NodeAdmin, Swapping):
    """Every layer of the deployment service in one object: what the API, the agent hub
    and the coordinator's loops hold."""
