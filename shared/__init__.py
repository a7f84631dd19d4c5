"""What the coordinator and the agent both import: quantities, resource vectors, the
wire protocol, logging, systemd notify and configuration loading; and what the
coordinator and its clients both import: the HTTP API's types (``api``)."""
