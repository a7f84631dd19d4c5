"""Deployment figures at scrape time, from the books' indexes and their state tally
(``deployments.tally``): O(deployments) a scrape.

allot_deployment_desired{namespace,deployment}          its count
allot_deployment_containers{namespace,deployment,state} placed (holding a node), pending,
                                                        and of the placed: running, failed
allot_scheduler_pending_containers                      pending containers in all

Running and failed come from the agents' reports, which only the leader gets: a standby
(``agents_report=False``) leaves them out rather than show zeros. What the containers
use is ``metrics_usage``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.metrics_fleet import Fleet

SeriesPer = Literal["container", "deployment"]
# The states the tally knows that are reported on their own besides placed and pending.
REPORTED_STATES = ("running", "failed")


class DeploymentCollector(Collector):
    def __init__(self, fleet: Fleet, *, agents_report: bool = True) -> None:
        self._fleet = fleet
        self._agents_report = agents_report

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
            if self._agents_report:
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
