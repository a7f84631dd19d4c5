"""Deployments: what users ask for (``DeploymentSpec``), what the coordinator keeps
(``records``), and how a node's allocations are stored (``node_records``)."""
