"""What running containers use, as their agents last reported it: one series per
container (the default) or summed per deployment
(``metrics_container_series = "deployment"``), written as text (``metrics_text``).

allot_container_cpu_usage_cores{namespace,deployment,container,node}
allot_container_memory_usage_bytes{namespace,deployment,container,node}

Per container: O(reported containers) a scrape, most of a large fleet's series. Per
deployment: from the books' tally, O(deployments).
"""

from __future__ import annotations

from collections.abc import Iterator

from coordinator.metrics_deployments import SeriesPer
from coordinator.metrics_fleet import Fleet
from coordinator.metrics_text import TextGauge

PER_CONTAINER = ("namespace", "deployment", "container", "node")
PER_DEPLOYMENT = ("namespace", "deployment")


class ContainerUsage:
    def __init__(self, fleet: Fleet, *, series_per: SeriesPer = "container") -> None:
        self._fleet = fleet
        self._series_per = series_per

    def exposition(self) -> Iterator[str]:
        """The two families in the Prometheus text format, a line at a time."""
        books = self._fleet.books
        per_container = self._series_per == "container"
        labels = PER_CONTAINER if per_container else PER_DEPLOYMENT
        cpu = TextGauge(
            "allot_container_cpu_usage_cores",
            "Cores running containers use, averaged over their agent's last report.",
            labels,
        )
        memory = TextGauge(
            "allot_container_memory_usage_bytes",
            "Memory running containers use, as their cgroup counted it at their agent's"
            " last report.",
            labels,
        )
        if per_container:
            for container_id, seen in books.observed.items():
                if seen.state != "running":
                    continue
                record = books.containers[container_id]
                values = (record.namespace, record.deployment, container_id, record.node)
                if seen.cpu_usage is not None:
                    cpu.add(values, seen.cpu_usage)
                if seen.memory_usage is not None:
                    memory.add(values, seen.memory_usage)
        else:
            for key in books.tally.deployments():
                cores, used_bytes = books.tally.usage(key)
                cpu.add(key, max(cores, 0.0))  # a sum of floats may end at -1e-17
                memory.add(key, used_bytes)
        yield from cpu.lines()
        yield from memory.lines()
