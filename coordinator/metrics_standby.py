"""A standby's metrics: ``allot_coordinator_leader`` 0, the process's figures, and the
nodes and deployments it follows from the store for a takeover (``coordinator.warm``).
Quotas, pools and leases it loads only when elected, the agents report to the leader,
and it decides nothing, so those families (the containers' running and failed counts
and usage too) and the decision, store and HTTP histograms are the leader's alone.
"""

from __future__ import annotations

from coordinator.metrics import ConnectionFigures, Metrics
from coordinator.metrics_deployments import DeploymentCollector
from coordinator.metrics_fleet import StandbyFleet
from coordinator.metrics_nodes import NodeFigures
from coordinator.warm import Warm


def standby_metrics(warm: Warm, doors: ConnectionFigures) -> Metrics:
    metrics = Metrics(leader=False)
    fleet = StandbyFleet(warm)
    metrics.write(NodeFigures(fleet))
    metrics.follow(DeploymentCollector(fleet, agents_report=False))
    metrics.follow_connections(doors)
    return metrics
