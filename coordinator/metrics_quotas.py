"""Quota figures at scrape time, per quota and resource (cpu in cores, memory in bytes,
gpu-memory in GB, devices in units):

allot_quota_min, allot_quota_max      as written (max only where the quota sets one)
allot_quota_used                      what its namespaces' placed containers ask for
allot_quota_borrowed                  used above min (over-quota; 0 within min)

``used`` is read as ``GET /v1/quotas`` reads it, from what the books keep of each
namespace's request shapes: a scrape costs O(quotas x their shapes), never a walk of the
containers.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.deployments.service import DeploymentService
from coordinator.quotas import overquota_amount, parse_quota
from coordinator.services.quota_service import QuotaService


class QuotaCollector(Collector):
    def __init__(
        self, quotas: QuotaService, deployments: DeploymentService, *, share_base: int
    ) -> None:
        self._quotas = quotas
        self._deployments = deployments
        self._share_base = share_base

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
        for quota in self._quotas.all():
            parsed = parse_quota(quota, share_base=self._share_base)
            used_q = self._quotas.used(quota, self._deployments.quota_requests)
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
        yield from families.values()
