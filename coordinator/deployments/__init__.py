"""Deployments: what users ask for and what is stored (``records``), how a node's
allocations are stored (``node_records``), GPU devices (``gpus``), what a container holds
in units -- devices and extended resources -- and which nodes have room (``units``),
translations for the quota engine, the agents and the event log (``translate``), and
what a decision gives back (``outcome``). The service that decides is
``coordinator.deployments.service``."""
