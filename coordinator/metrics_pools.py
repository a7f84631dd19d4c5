"""Pool figures at scrape time, from the last fair-share update (every
``fair_share_update_period``): O(pools x resources) a scrape. Amounts are in the
resource's unit (cpu in cores, memory in bytes); volumes in cluster-share seconds (a
volume of 3,600 is the whole cluster for an hour).

allot_pool_fair_share{pool,resource}     its fair share (ratio x the cluster's total)
allot_pool_guarantee{pool,resource}      its strong guarantee, likewise
allot_pool_demand{pool,resource}         what its containers ask for (leaf pools)
allot_pool_usage{pool,resource}          what they use, as their agents last reported
allot_pool_integral_volume{pool}         an integral pool's accumulated volume
allot_pool_integral_capacity{pool}       the most it can accumulate (flow x saturation period)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.services.pool_service import PoolService


class PoolCollector(Collector):
    def __init__(self, pools: PoolService) -> None:
        self._pools = pools

    def collect(self) -> Iterator[GaugeMetricFamily]:
        service = self._pools
        figures = service.figures
        period = float(service.config()["settings"]["pool_capacity_saturation_period"])
        labels = ["pool", "resource"]
        fair = GaugeMetricFamily(
            "allot_pool_fair_share", "A pool's fair share of the cluster.", labels=labels
        )
        guarantee = GaugeMetricFamily(
            "allot_pool_guarantee", "A pool's strong guarantee.", labels=labels
        )
        demand = GaugeMetricFamily(
            "allot_pool_demand", "What a leaf pool's containers ask for.", labels=labels
        )
        usage = GaugeMetricFamily(
            "allot_pool_usage", "What a leaf pool's containers use.", labels=labels
        )
        volume = GaugeMetricFamily(
            "allot_pool_integral_volume",
            "An integral pool's accumulated volume, in cluster-share seconds.",
            labels=["pool"],
        )
        capacity = GaugeMetricFamily(
            "allot_pool_integral_capacity",
            "The volume an integral pool can hold at most (resource flow ratio x"
            " pool_capacity_saturation_period), in cluster-share seconds.",
            labels=["pool"],
        )
        for name in service.names():
            view = service.view(name)
            if view is None:
                continue
            seen: dict[str, Any] = view.introspection
            share = figures.shares.get(name)
            for resource, total in sorted(figures.total.items()):
                if share is not None:
                    fair.add_metric([name, resource], share.total * total)
                strong = float(seen.get("strong_guarantee_share", 0.0))
                guarantee.add_metric([name, resource], strong * total)
            for resource, amount in sorted(figures.demands.get(name, {}).items()):
                demand.add_metric([name, resource], amount)
            for resource, amount in sorted(figures.usages.get(name, {}).items()):
                usage.add_metric([name, resource], amount)
            if "accumulated_resource_ratio_volume" in seen:
                volume.add_metric([name], float(seen["accumulated_resource_ratio_volume"]))
                flow = float(seen["specified_resource_flow_ratio"])
                capacity.add_metric([name], flow * period)
        yield from (fair, guarantee, demand, usage, volume, capacity)
