"""Prometheus metrics of one coordinator, in a registry of its own (not the global one),
so several apps in one process, as in the tests, never share counters."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from shared.api.leases import ResourceStatus
from shared.api.nodes import NodeHealth, NodeRecord


class ConnectionFigures(Protocol):
    """What ``coordinator.doors.Doors`` counts, for the process as a whole."""

    open: int
    max_connections: int
    refused: int
    header_timeouts: int
    accept_errors: int


class _ConnectionCollector(Collector):
    """The connection figures as they are at scrape time: the ``Doors`` outlive the
    application (a standby's, then a leader's) and count for the whole process."""

    def __init__(self, figures: ConnectionFigures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        figures = self._figures
        yield GaugeMetricFamily(
            "allot_connections", "Client connections held now.", value=figures.open
        )
        yield GaugeMetricFamily(
            "allot_connections_max",
            "Connections held at most (max_connections, as fitted to the open-files limit).",
            value=figures.max_connections,
        )
        yield CounterMetricFamily(
            "allot_connections_refused",
            "Connections closed at once because max_connections were held.",
            value=figures.refused,
        )
        yield CounterMetricFamily(
            "allot_connections_header_timeouts",
            "Connections closed for not sending complete request headers in time.",
            value=figures.header_timeouts,
        )
        yield CounterMetricFamily(
            "allot_connections_accept_errors",
            "Failed accepts of new connections (out of files, most likely).",
            value=figures.accept_errors,
        )


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
        self.auth_failures = Counter(
            "allot_auth_failures",
            "Failed authentications, by kind: api_token (the API), join_token (the agent"
            " socket's upgrade or hello), client_certificate (an agent's upgrade without"
            " one, where a client CA is set).",
            ["kind"],
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

    def follow_connections(self, figures: ConnectionFigures) -> None:
        """Expose the process's connection figures (``coordinator.doors``) too."""
        self.registry.register(_ConnectionCollector(figures))

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
