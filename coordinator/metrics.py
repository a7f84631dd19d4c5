"""Prometheus metrics of one coordinator, in a registry of its own (not the global one),
so several apps in one process, as in the tests, never share counters.

    metrics = Metrics(leader=True)
    metrics.follow(QuotaCollector(...))         # figures taken at each scrape
    metrics.write(NodeFigures(fleet))           # ... written as text: a series per node
    metrics.decision_seconds.labels(kind="commit").observe(0.004)
    metrics.render()                            # the exposition text
    await metrics.render_in_slices()            # the same, the loop handed back every 20 ms

What the code counts as it goes (counters, histograms) lives here; the figures of objects
are computed from the books' indexes when scraped (``metrics_*`` modules): custom
collectors, or text written by hand for the families with a series per node or per
container (``metrics_text``). The families are listed in the README's "Watching it" section.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from coordinator.loop_turns import let_waiting_run

# Seconds: from a fraction of a millisecond (a small decision) to a minute (a scheduler
# pass over a large backlog, an etcd commit while it elects a leader).
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Writes and compares in one store transaction: one (a lease) to a batch of large
# deployments (``sequencer.MOST_OPERATIONS_PER_BATCH`` is 9,000).
OPERATIONS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# A scrape holds the event loop this long at most before handing it back (lines of text
# are written in between: a line costs a few microseconds, the clock is read every
# LINES_PER_LOOK of them).
SLICE_SECONDS = 0.02
LINES_PER_LOOK = 256


class Written(Protocol):
    """Families written as exposition text by hand, where there are too many samples
    for prometheus_client's families to build at each scrape (``metrics_text``)."""

    def exposition(self) -> Iterable[str]: ...


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
    def __init__(self, *, leader: bool = True) -> None:
        self.registry = registry = CollectorRegistry()
        self._written: list[Written] = []
        ProcessCollector(registry=registry)
        GCCollector(registry=registry)
        Gauge(
            "allot_build_info",
            "The allot version this process runs (1).",
            ["version"],
            registry=registry,
        ).labels(version=importlib.metadata.version("allot")).set(1)
        Gauge(
            "allot_coordinator_leader",
            "1 on the leader, 0 on a standby (which reports only what it follows).",
            registry=registry,
        ).set(1 if leader else 0)
        self.agent_connections = Gauge(
            "allot_agent_connections", "Open agent websockets.", registry=registry
        )
        self.agent_frames = Counter(
            "allot_agent_frames", "Frames received from agents.", ["type"], registry=registry
        )
        self.protocol_errors = Counter(
            "allot_agent_protocol_errors",
            "Agent frames refused, by error code.",
            ["code"],
            registry=registry,
        )
        self.auth_failures = Counter(
            "allot_auth_failures",
            "Failed authentications, by kind: api_token (the API), join_token (the agent"
            " socket's upgrade or hello), client_certificate (an agent's upgrade without"
            " one, where a client CA is set).",
            ["kind"],
            registry=registry,
        )
        self.scheduler_pass_seconds = Histogram(
            "allot_scheduler_pass_seconds",
            "Scheduler passes over the pending containers, from asking to committed.",
            buckets=SECONDS,
            registry=registry,
        )
        self.decision_seconds = Histogram(
            "allot_decision_seconds",
            "Batches of decisions, by step: decide (the deciders on their thread), commit"
            " (the store transaction and the books), publish (handing the touched nodes"
            " to the agents' senders).",
            ["kind"],
            buckets=SECONDS,
            registry=registry,
        )
        self.store_commit_seconds = Histogram(
            "allot_store_commit_seconds",
            "Store transactions, from sending to the answer (fsync or etcd quorum).",
            buckets=SECONDS,
            registry=registry,
        )
        self.store_commit_operations = Histogram(
            "allot_store_commit_operations",
            "Writes, deletes and compares per store transaction.",
            buckets=OPERATIONS,
            registry=registry,
        )
        self.http_request_seconds = Histogram(
            "allot_http_request_duration_seconds",
            "API requests by route template, method and status code (the agents'"
            " websocket, which lasts as long as its agent is connected, is left out).",
            ["route", "method", "code"],
            buckets=SECONDS,
            registry=registry,
        )
        self.lease_requests = Counter(
            "allot_lease_requests",
            "Capacity asked for per resource, by outcome: granted (all it wanted), cut"
            " (less), or the error code of a refused request.",
            ["resource", "outcome"],
            registry=registry,
        )

    # The sequencer's hooks (``deployments.timings.Timings``).
    def decided(self, seconds: float) -> None:
        self.decision_seconds.labels(kind="decide").observe(seconds)

    def committed(self, seconds: float) -> None:
        self.decision_seconds.labels(kind="commit").observe(seconds)

    def published(self, seconds: float) -> None:
        self.decision_seconds.labels(kind="publish").observe(seconds)

    def scheduled(self, seconds: float) -> None:
        self.scheduler_pass_seconds.observe(seconds)

    def follow(self, collector: Collector) -> None:
        """Expose the figures ``collector`` takes at each scrape."""
        self.registry.register(collector)

    def write(self, families: Written) -> None:
        """Append the text of ``families`` to each scrape."""
        self._written.append(families)

    def follow_connections(self, figures: ConnectionFigures) -> None:
        """Expose the process's connection figures (``coordinator.doors``) too."""
        self.follow(_ConnectionCollector(figures))

    def render(self) -> bytes:
        """The exposition text, in one go: O(series) on the caller's thread."""
        return generate_latest(self.registry) + "".join(self._written_lines()).encode()

    async def render_in_slices(self, slice_seconds: float = SLICE_SECONDS) -> bytes:
        """The same text as ``render``, but written a slice of at most about
        ``slice_seconds`` at a time, the event loop handed back between slices: at
        200,000 per-container series a scrape takes about a second of CPU, which would
        otherwise stall every agent session and API request for as long. The families
        written by hand (``Written``) read the books as they were at their first line;
        prometheus_client's (O(deployments), not O(series)) are taken in one go."""
        chunks = [generate_latest(self.registry)]
        await let_waiting_run()  # a slice of its own: O(deployments) of families
        lines: list[str] = []
        until = time.perf_counter() + slice_seconds
        for line in self._written_lines():
            lines.append(line)
            if len(lines) % LINES_PER_LOOK == 0 and time.perf_counter() >= until:
                chunks.append("".join(lines).encode())
                lines.clear()
                await let_waiting_run()
                until = time.perf_counter() + slice_seconds
        chunks.append("".join(lines).encode())
        await let_waiting_run()  # the copy of every chunk into one body, a slice of its own
        return b"".join(chunks)

    def _written_lines(self) -> Iterator[str]:
        for families in self._written:
            yield from families.exposition()
