"""``allotctl``: the operator's command line for the coordinator's HTTP API.

It imports no module of the coordinator: it talks to it through ``client.api`` and reads
its answers, as the structs of ``shared.api``, with ``client.answers``.

- ``main``: the commands, each a request and a view of its answer;
- ``config_file``, ``config_commands``, ``connection``: the contexts of the config file,
  ``allotctl config``, and which server, token and CA a command uses;
- ``deployments``, ``nodes``, ``writes``, ``bodies``: the arguments of those commands and
  the requests they make (``writes``: quota, pool and resource set/delete);
- ``apply``, ``same_amounts``: ``apply -f``, which writes only what differs;
- ``views``, ``deployment_views``, ``node_views``: the answers as a person reads them;
- ``plot``: the graphs of a pool simulation (``allot[plot]``).
"""
