"""The per-host agent: discovers the hardware and enforces the coordinator's decisions."""
