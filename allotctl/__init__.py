"""``allotctl``: the operator's command line for the coordinator's HTTP API."""
