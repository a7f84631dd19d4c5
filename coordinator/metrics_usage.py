"""What running containers use, as their agents last reported it: one series per
container (the default) or summed per deployment
(``metrics_container_series = "deployment"``), written as text (``metrics_text``).

allot_container_cpu_usage_cores{namespace,deployment,container,node}
allot_container_memory_usage_bytes{namespace,deployment,container,node}

Per container: O(reported containers) a scrape, most of a large fleet's series. Per
deployment: from the books' tally, O(deployments).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from coordinator.deployments.books import Books
from coordinator.metrics_deployments import SeriesPer
from coordinator.metrics_fleet import Fleet
from coordinator.metrics_text import TextGauge
from shared.api.containers import ContainerRecord
from shared.protocol import ContainerStatus

PER_CONTAINER = ("namespace", "deployment", "container", "node")
PER_DEPLOYMENT = ("namespace", "deployment")


class ContainerUsage:
    def __init__(self, fleet: Fleet, *, series_per: SeriesPer = "container") -> None:
        self._fleet = fleet
        self._series_per = series_per

    def exposition(self) -> Iterator[str]:
        """The two families in the Prometheus text format, a line at a time, over the
        reports (or the deployments) as they were at the first line; a container gone
        since is left out."""
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
            # Only the ids are copied (cheap, and no objects for the collector to track):
            # each line reads the report and the record as they are when it is written.
            ids = list(books.observed)
            yield cpu.header()
            for cid, record, seen in _running(books, ids):
                if seen.cpu_usage is not None:
                    values = (record.namespace, record.deployment, cid, record.node)
                    yield cpu.line(values, seen.cpu_usage)
            yield memory.header()
            for cid, record, seen in _running(books, ids):
                if seen.memory_usage is not None:
                    values = (record.namespace, record.deployment, cid, record.node)
                    yield memory.line(values, seen.memory_usage)
        else:
            usage = [(key, books.tally.usage(key)) for key in books.tally.deployments()]
            yield cpu.header()
            for key, (cores, _) in usage:
                yield cpu.line(key, max(cores, 0.0))  # a sum of floats may end at -1e-17
            yield memory.header()
            for key, (_, used_bytes) in usage:
                yield memory.line(key, used_bytes)


def _running(
    books: Books, ids: Iterable[str]
) -> Iterator[tuple[str, ContainerRecord, ContainerStatus]]:
    """The containers of ``ids`` still live and reported running, with their records."""
    for cid in ids:
        seen = books.observed.get(cid)
        if seen is None or seen.state != "running":
            continue
        record = books.containers.get(cid)
        if record is not None:
            yield cid, record, seen
