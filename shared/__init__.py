"""What the coordinator and the agent both import: quantities, resource vectors, the
wire protocol, logging, systemd notify and configuration loading."""
