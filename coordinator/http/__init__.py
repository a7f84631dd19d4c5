"""The coordinator's HTTP API: who may ask (``auth``, ``roles``), how bodies are read and
written (``bodies``), and one module of handlers per part of the API. Handlers decode,
call a service, encode; the decisions and the state live outside this package.

- ``auth``: API tokens and the join token; the middleware that checks them;
- ``roles``: the ``Principal`` behind a token and the checks handlers make;
- ``bodies``: ``read_body`` (400 on a body that cannot be read), ``json_response``;
- ``cluster``: health, metrics, the node records;
- ``leases``: capacity requests and releases, resource templates, status and leases;
- ``plans``: the what-if placement;
- ``quotas``, ``pools``: ElasticQuotas and the pool tree;
- ``deployments``: deployments, containers and events;
- ``node_admin``: a node's allocation, capacity, cordon, uncordon and drain.

The OpenAPI document of these routes is ``coordinator.openapi``.
"""
