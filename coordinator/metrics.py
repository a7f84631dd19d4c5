"""Prometheus metrics of one coordinator, in a registry of its own (not the global one),
so several apps in one process, as in the tests, never share counters."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from shared.api.leases import ResourceStatus
from shared.api.nodes import NodeHealth, NodeRecord


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

        resource = ["resource"]
        self.lease_capacity = Gauge(
            "allot_lease_capacity",
            "Capacity of a leased resource.",
            resource,
            registry=self.registry,
        )
        self.lease_sum_has = Gauge(
            "allot_lease_has", "Capacity leased out (sum of has).", resource, registry=self.registry
        )
        self.lease_sum_wants = Gauge(
            "allot_lease_wants", "Capacity wanted (sum of wants).", resource, registry=self.registry
        )
        self.lease_clients = Gauge(
            "allot_lease_clients", "Clients holding a lease.", resource, registry=self.registry
        )

    def render(self, nodes: Iterable[NodeRecord], resources: Iterable[ResourceStatus]) -> bytes:
        """The exposition text, with node and lease figures taken at scrape time."""
        counts = Tally(record.state for record in nodes)
        for state in NodeHealth:
            self.nodes.labels(state=state.value).set(counts[state])
        for gauge in (self.lease_capacity, self.lease_sum_has, self.lease_sum_wants):
            gauge.clear()
        self.lease_clients.clear()  # resources that are gone must not linger
        for status in resources:
            self.lease_capacity.labels(resource=status.resource_id).set(status.capacity)
            self.lease_sum_has.labels(resource=status.resource_id).set(status.sum_has)
            self.lease_sum_wants.labels(resource=status.resource_id).set(status.sum_wants)
            self.lease_clients.labels(resource=status.resource_id).set(status.clients)
        return generate_latest(self.registry)
