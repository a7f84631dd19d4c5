"""What running containers use, as their agents last reported it, written straight as
exposition text: one series per container (the default) or summed per deployment
(``metrics_container_series = "deployment"``).

allot_container_cpu_usage_cores{namespace,deployment,container,node}
allot_container_memory_usage_bytes{namespace,deployment,container,node}

Per container these are most of a large fleet's series, and prometheus_client's
families cost about 25 us a sample to build and print (bench/metrics_scrape.py: 400,000
samples of 200,000 containers took 9-12 s a scrape on this loaded machine, the event loop
held meanwhile); a line of text each costs a few microseconds. Per deployment they come
from the books' tally, O(deployments).
"""

from __future__ import annotations

from collections.abc import Iterator

from coordinator.deployments.books import Books
from coordinator.metrics_deployments import SeriesPer
from coordinator.metrics_fleet import Fleet

CPU = "allot_container_cpu_usage_cores"
MEMORY = "allot_container_memory_usage_bytes"
_HEADERS = {
    CPU: "Cores running containers use, averaged over their agent's last report.",
    MEMORY: "Memory running containers use, as their cgroup counted it at their agent's"
    " last report.",
}


class ContainerUsage:
    def __init__(self, fleet: Fleet, *, series_per: SeriesPer = "container") -> None:
        self._fleet = fleet
        self._series_per = series_per

    def exposition(self) -> Iterator[str]:
        """The two families in the Prometheus text format, a line at a time."""
        books = self._fleet.books
        cpu: list[str] = []
        memory: list[str] = []
        if self._series_per == "deployment":
            _per_deployment(books, cpu, memory)
        else:
            _per_container(books, cpu, memory)
        for name, lines in ((CPU, cpu), (MEMORY, memory)):
            yield f"# HELP {name} {_HEADERS[name]}\n# TYPE {name} gauge\n"
            yield from lines


def _per_container(books: Books, cpu: list[str], memory: list[str]) -> None:
    """One series per reported running container: O(those containers)."""
    containers = books.containers
    for container_id, seen in books.observed.items():
        if seen.state != "running":
            continue
        record = containers[container_id]
        labels = (
            f'{{namespace="{_escaped(record.namespace)}",'
            f'deployment="{_escaped(record.deployment)}",'
            f'container="{_escaped(container_id)}",node="{_escaped(record.node)}"}} '
        )
        if seen.cpu_usage is not None:
            cpu.append(f"{CPU}{labels}{float(seen.cpu_usage)!r}\n")
        if seen.memory_usage is not None:
            memory.append(f"{MEMORY}{labels}{float(seen.memory_usage)!r}\n")


def _per_deployment(books: Books, cpu: list[str], memory: list[str]) -> None:
    """One series per deployment, from the books' tally: O(deployments)."""
    for namespace, deployment in books.tally.deployments():
        cores, used_bytes = books.tally.usage((namespace, deployment))
        labels = f'{{namespace="{_escaped(namespace)}",deployment="{_escaped(deployment)}"}} '
        cpu.append(f"{CPU}{labels}{max(cores, 0.0)!r}\n")  # a float sum may end at -1e-17
        memory.append(f"{MEMORY}{labels}{float(used_bytes)!r}\n")


def _escaped(value: str) -> str:
    """A label value as the text format writes it (names rarely need it: checked first)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value
