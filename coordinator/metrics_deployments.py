"""Deployment and container figures at scrape time, from the books' indexes and their
state tally (``deployments.tally``): O(deployments) a scrape, plus one series per
reported container when usage is shown per container.

allot_deployment_desired{namespace,deployment}          its count
allot_deployment_containers{namespace,deployment,state} placed (holding a node), pending,
                                                        and of the placed: running, failed
allot_scheduler_pending_containers                      pending containers in all
allot_container_cpu_usage_cores{namespace,deployment,container,node}
allot_container_memory_usage_bytes{...}                 what running containers use, as
                                                        their agents last reported; per
                                                        deployment ({namespace,deployment})
                                                        with metrics_container_series =
                                                        "deployment"
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.deployments.books import Books
from coordinator.metrics_fleet import Fleet

SeriesPer = Literal["container", "deployment"]
# The states the tally knows that are reported on their own besides placed and pending.
REPORTED_STATES = ("running", "failed")


class DeploymentCollector(Collector):
    def __init__(self, fleet: Fleet, *, series_per: SeriesPer = "container") -> None:
        self._fleet = fleet
        self._series_per = series_per

    def collect(self) -> Iterator[GaugeMetricFamily]:
        books = self._fleet.books
        desired = GaugeMetricFamily(
            "allot_deployment_desired",
            "The number of containers a deployment asks for.",
            labels=["namespace", "deployment"],
        )
        containers = GaugeMetricFamily(
            "allot_deployment_containers",
            "A deployment's containers by state: placed (holding a node: starting,"
            " running, succeeded or failed), pending (not placed), running, failed.",
            labels=["namespace", "deployment", "state"],
        )
        for key, record in books.deployments.items():
            namespace, name = key
            desired.add_metric([namespace, name], record.spec.count)
            placed, pending = books.counts(key)
            containers.add_metric([namespace, name, "placed"], placed)
            containers.add_metric([namespace, name, "pending"], pending)
            states = books.tally.states(key)
            for state in REPORTED_STATES:
                containers.add_metric([namespace, name, state], states.get(state, 0))
        yield desired
        yield containers
        yield GaugeMetricFamily(
            "allot_scheduler_pending_containers",
            "Containers counted by their deployments and not placed.",
            value=len(books.pending),
        )
        if self._series_per == "deployment":
            yield from _usage_per_deployment(books)
        else:
            yield from _usage_per_container(books)


def _usage_families(labels: list[str]) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    cpu = GaugeMetricFamily(
        "allot_container_cpu_usage_cores",
        "Cores running containers use, averaged over their agent's last report.",
        labels=labels,
    )
    memory = GaugeMetricFamily(
        "allot_container_memory_usage_bytes",
        "Memory running containers use, as their cgroup counted it at their agent's last report.",
        labels=labels,
    )
    return cpu, memory


def _usage_per_container(books: Books) -> Iterator[GaugeMetricFamily]:
    """One series per reported running container: O(those containers)."""
    cpu, memory = _usage_families(["namespace", "deployment", "container", "node"])
    for container_id, seen in books.observed.items():
        if seen.state != "running":
            continue
        record = books.containers[container_id]
        labels = [record.namespace, record.deployment, container_id, record.node]
        if seen.cpu_usage is not None:
            cpu.add_metric(labels, seen.cpu_usage)
        if seen.memory_usage is not None:
            memory.add_metric(labels, seen.memory_usage)
    yield cpu
    yield memory


def _usage_per_deployment(books: Books) -> Iterator[GaugeMetricFamily]:
    """One series per deployment, from the tally: O(deployments)."""
    cpu, memory = _usage_families(["namespace", "deployment"])
    for key in books.tally.deployments():
        cores, used_bytes = books.tally.usage(key)
        cpu.add_metric(list(key), max(cores, 0.0))  # a sum of floats may end at -1e-17
        memory.add_metric(list(key), used_bytes)
    yield cpu
    yield memory
