"""The coordinator's HTTP API as typed structs, defined once: the coordinator encodes its
answers with them and reads some of them as request bodies; clients (``client.answers``)
decode the same JSON with the same types. Nothing here imports the coordinator.

- ``nodes``: registered nodes (``/v1/nodes``);
- ``node_admin``: a node's allocation, and what cordon and drain answer;
- ``leases``: resource templates, and a resource's status and leases (``/v1/resources``);
- ``plans``: what-if placements (``POST /v1/plans``);
- ``quotas``: quotas with their status (``/v1/quotas``);
- ``deployments``: what a deployment request says, the stored deployment, and its views;
- ``containers``: the stored container and its view (``/v1/containers``);
- ``events``: the decisions made, with their reasons (``/v1/events``).

The OpenAPI document's schemas are generated from these structs. The answers a handler
builds as a plain dict (``{"nodes": [...]}``) have hand-written schemas there
(``coordinator/openapi/schemas.py``); the struct of the same shape here (``NodeList``) is
how a client reads them.
"""
