"""``allotctl``: the operator's command line for the coordinator's HTTP API.

It imports no module of the coordinator: it talks to it through ``client.api`` and reads
its answers, as the structs of ``shared.api``, with ``client.answers``.

- ``main``: the commands, each a request and a view of its answer;
- ``deployments``, ``nodes``: the arguments of those commands and the requests they make;
- ``views``, ``deployment_views``, ``node_views``: the answers as a person reads them;
- ``plot``: the graphs of a pool simulation (``allot[plot]``).
"""
