"""The agent's Prometheus metrics, in a registry of its own (with the process, GC and
platform collectors), so several agents in one process, as in the tests, never share one.

    metrics = AgentMetrics()
    metrics.follow_containers(runtime.container_figures)   # read at scrape time
    metrics.follow_pressure(runtime.node_pressure)          # so is the node's CPU pressure
    metrics.docker_call("inspect_container", 0.004)        # safe from any thread
    metrics.reconciled(0.12)
    metrics.drift_corrected()
    metrics.set_connected(True)
    text = metrics.render()

Per-container figures are not kept in label sets that would outlive their container:
they are taken from the runtime when Prometheus scrapes, so a removed container's series
simply ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from shared.protocol import CpuPressure

CONTAINER_LABELS = ("namespace", "deployment", "container")
# A Docker call takes from about a millisecond (an inspect) to a container's whole stop
# timeout (a stop of one deaf to SIGTERM), and the SDK gives up at docker_timeout_seconds.
DOCKER_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# A pass with nothing to do is one listing and an inspect per container (milliseconds);
# one that creates and starts containers takes up to seconds (removals, which wait out
# stop timeouts, run beside the passes).
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


@dataclass(frozen=True)
class ContainerFigures:
    """One container of this node as the runtime sees it at scrape time."""

    namespace: str
    deployment: str
    container: str  # allot's container id
    cpu_limit_cores: float  # the most CPU it may use: its CPUs, or its CFS quota if lower
    restarts: int  # times the agent started it again after it exited
    cpu_usage_cores: float | None = None  # None until two samples were taken
    memory_usage_bytes: int | None = None  # None while it does not run


FiguresSource = Callable[[], Sequence[ContainerFigures]]
PressureSource = Callable[[], CpuPressure | None]


class _ContainerCollector(Collector):
    def __init__(self, source: FiguresSource) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        labels = list(CONTAINER_LABELS)
        cpu = GaugeMetricFamily(
            "allot_agent_container_cpu_usage_cores",
            "CPU a container used between the agent's last two samples, in cores.",
            labels=labels,
        )
        memory = GaugeMetricFamily(
            "allot_agent_container_memory_usage_bytes",
            "Memory a container's cgroup charges, less its inactive file cache.",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            "allot_agent_container_cpu_limit_cores",
            "The most CPU a container may use: the CPUs of its cpuset, or its CFS quota"
            " if that is lower.",
            labels=labels,
        )
        restarts = CounterMetricFamily(
            "allot_agent_container_restarts",
            "Times the agent started a container again after it exited, since the agent started.",
            labels=labels,
        )
        for one in self._source():
            values = [one.namespace, one.deployment, one.container]
            limit.add_metric(values, one.cpu_limit_cores)
            restarts.add_metric(values, one.restarts)
            if one.cpu_usage_cores is not None:
                cpu.add_metric(values, one.cpu_usage_cores)
            if one.memory_usage_bytes is not None:
                memory.add_metric(values, one.memory_usage_bytes)
        yield from (cpu, memory, limit, restarts)


class _PressureCollector(Collector):
    def __init__(self, source: PressureSource) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pressure = GaugeMetricFamily(
            "allot_agent_cpu_pressure_percent",
            "This node's CPU pressure at the last sample, in percent, as the agent reports it:"
            " PSI 'some' avg10 (the share of the last 10 s some task waited for a CPU), or"
            " where the kernel has no PSI the share of its containers' CFS periods throttled"
            " (source). No sample before the first reading, or when neither can be read.",
            labels=["source"],
        )
        reading = self._source()
        if reading is not None:
            pressure.add_metric([reading.source], reading.avg10)
        yield pressure


class AgentMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._docker = Histogram(
            "allot_agent_docker_request_seconds",
            "Time the Docker engine took to answer one call of the SDK, by call (the SDK's"
            " method: containers, inspect_container, create_container, start,"
            " update_container, stop, remove_container).",
            ["call"],
            buckets=DOCKER_BUCKETS,
            registry=self.registry,
        )
        self._reconcile = Histogram(
            "allot_agent_reconcile_seconds",
            "Time one reconcile pass took, from observing Docker to the report.",
            buckets=RECONCILE_BUCKETS,
            registry=self.registry,
        )
        self._drift = Counter(
            "allot_agent_drift_corrections",
            "Containers put back as desired after a change made outside allot.",
            registry=self.registry,
        )
        self._connected = Gauge(
            "allot_agent_connected",
            "1 while the agent holds a registered session with a coordinator, else 0.",
            registry=self.registry,
        )

    def follow_containers(self, source: FiguresSource) -> None:
        """Report the containers ``source`` gives at each scrape."""
        self.registry.register(_ContainerCollector(source))

    def follow_pressure(self, source: PressureSource) -> None:
        """Report the node's CPU pressure ``source`` gives at each scrape."""
        self.registry.register(_PressureCollector(source))

    def docker_call(self, call: str, seconds: float) -> None:
        self._docker.labels(call=call).observe(seconds)

    def reconciled(self, seconds: float) -> None:
        self._reconcile.observe(seconds)

    def drift_corrected(self) -> None:
        self._drift.inc()

    def set_connected(self, connected: bool) -> None:
        self._connected.set(1 if connected else 0)

    def render(self) -> bytes:
        """The exposition text (Prometheus' text format 0.0.4)."""
        return generate_latest(self.registry)
