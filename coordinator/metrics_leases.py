"""Capacity lease figures at scrape time, per resource: O(resources) a scrape.

allot_lease_capacity{resource}   its capacity
allot_lease_has{resource}        leased out (the sum of has)
allot_lease_wants{resource}      asked for (the sum of wants)
allot_lease_clients{resource}    clients holding a lease
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.services.lease_service import LeaseService


class LeaseCollector(Collector):
    def __init__(self, leases: LeaseService) -> None:
        self._leases = leases

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["resource"]
        capacity = GaugeMetricFamily(
            "allot_lease_capacity", "Capacity of a leased resource.", labels=labels
        )
        has = GaugeMetricFamily(
            "allot_lease_has", "Capacity leased out (sum of has).", labels=labels
        )
        wants = GaugeMetricFamily(
            "allot_lease_wants", "Capacity wanted (sum of wants).", labels=labels
        )
        clients = GaugeMetricFamily(
            "allot_lease_clients", "Clients holding a lease.", labels=labels
        )
        for status in self._leases.statuses():
            resource = [status.resource_id]
            capacity.add_metric(resource, status.capacity)
            has.add_metric(resource, status.sum_has)
            wants.add_metric(resource, status.sum_wants)
            clients.add_metric(resource, status.clients)
        yield from (capacity, has, wants, clients)
