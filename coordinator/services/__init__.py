"""State and decisions around the engines: node records and their health (``nodes``,
``registry``), the event log (``events``), the lease, quota and pool services, and the
offers of registered nodes (``plan_nodes``). Deployments have a folder of their own
(``coordinator.deployments``)."""
