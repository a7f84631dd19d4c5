"""Prometheus metrics of one coordinator, in a registry of its own (not the global one),
so several apps in one process, as in the tests, never share counters."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from coordinator.nodes import NodeRecord, NodeState


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.nodes = Gauge("allot_nodes", "Nodes by state.", ["state"], registry=self.registry)
        self.agent_connections = Gauge(
            "allot_agent_connections", "Open agent websockets.", registry=self.registry
        )
        self.agent_frames = Counter(
            "allot_agent_frames", "Frames received from agents.", ["type"], registry=self.registry
        )
        self.protocol_errors = Counter(
            "allot_agent_protocol_errors",
            "Agent frames refused, by error code.",
            ["code"],
            registry=self.registry,
        )

    def render(self, nodes: Iterable[NodeRecord]) -> bytes:
        """The exposition text, with node counts taken from the records at scrape time."""
        counts = Tally(record.state for record in nodes)
        for state in NodeState:
            self.nodes.labels(state=state.value).set(counts[state])
        return generate_latest(self.registry)
