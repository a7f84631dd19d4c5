"""Quota figures at scrape time, per quota and resource (cpu in cores, memory in bytes,
gpu-memory in GB, devices in units):

allot_quota_min, allot_quota_max      as written (max only where the quota sets one)
allot_quota_used                      what its namespaces' placed containers ask for
allot_quota_borrowed                  used above min (over-quota; 0 within min)

``used`` is counted as ``GET /v1/quotas`` counts it, over the quota's namespaces'
containers, and kept until one of those namespaces' containers changes
(``Books.namespace_version``): a scrape of a steady fleet costs O(quotas x namespaces),
and after a change it costs O(the changed quotas' containers) once.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.deployments.service import DeploymentService
from coordinator.quotas import Quota, overquota_amount, parse_quota, used
from coordinator.services.quota_service import QuotaService

_Counted = tuple[Quota, tuple[int, ...], dict[str, Fraction]]


class QuotaCollector(Collector):
    def __init__(
        self, quotas: QuotaService, deployments: DeploymentService, *, share_base: int
    ) -> None:
        self._quotas = quotas
        self._deployments = deployments
        self._share_base = share_base
        self._counted: dict[str, _Counted] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["quota", "resource"]
        families = {
            name: GaugeMetricFamily(f"allot_quota_{name}", text, labels=labels)
            for name, text in (
                ("min", "A quota's guaranteed amount of a resource."),
                ("max", "A quota's limit on a resource (where it sets one)."),
                ("used", "What the placed containers of a quota's namespaces ask for."),
                ("borrowed", "Used above min: capacity borrowed from other quotas' min."),
            )
        }
        counted: dict[str, _Counted] = {}
        for quota in self._quotas.all():
            parsed = parse_quota(quota, share_base=self._share_base)
            used_q = self._used(quota)
            counted[quota.name] = self._counted[quota.name]
            borrowed = overquota_amount(quota, used_q, share_base=self._share_base)
            for resource, amount in parsed.min.items():
                families["min"].add_metric([quota.name, resource], float(amount))
            for resource, amount in parsed.max.items():
                families["max"].add_metric([quota.name, resource], float(amount))
            for resource, amount in used_q.items():
                families["used"].add_metric([quota.name, resource], float(amount))
            for resource in used_q.keys() | borrowed.keys():
                amount = borrowed.get(resource, Fraction(0))
                families["borrowed"].add_metric([quota.name, resource], float(amount))
        self._counted = counted  # quotas deleted since are forgotten
        yield from families.values()

    def _used(self, quota: Quota) -> dict[str, Fraction]:
        books = self._deployments.books
        versions = tuple(books.namespace_version(ns) for ns in quota.namespaces)
        kept = self._counted.get(quota.name)
        if kept is not None and kept[0] == quota and kept[1] == versions:
            return kept[2]
        containers = self._deployments.quota_containers(quota.namespaces)
        amounts = used(quota, containers, self._quotas.gb_per_gpu, share_base=self._share_base)
        fresh = {resource: Fraction(amount) for resource, amount in amounts.items()}
        self._counted[quota.name] = (quota, versions, fresh)
        return fresh
