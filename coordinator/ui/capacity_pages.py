"""The pages of shared capacity: quotas as bars, the pool tree with its plots, leases.

Every token sees every quota and pool, as the API shows them; a resource's leases it sees
by name only for its namespaces, the others' as totals (``leases_seen``, as the API).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from coordinator.http.lease_forward import LEASE_LINK
from coordinator.http.roles import principal_of
from coordinator.keys import CONFIG, DEPLOYMENTS, LEASES, POOLS, QUOTAS, REGISTRY
from coordinator.pools import ROOT
from coordinator.services.lease_views import leases_seen
from coordinator.services.pool_service import PoolService
from coordinator.ui.figures import VolumePlot, quota_bars, volume_plot
from coordinator.ui.history import VolumeHistory
from coordinator.ui.rendering import render

HISTORY = web.AppKey("volume_history", VolumeHistory)


async def quotas_page(request: web.Request) -> web.StreamResponse:
    requested = request.config_dict[DEPLOYMENTS].quota_requests
    nodes = request.config_dict[REGISTRY].usable()
    summary = request.config_dict[QUOTAS].summary(nodes, requested)
    share_base = request.config_dict[CONFIG].share_base
    quotas = [(view, quota_bars(view, share_base=share_base)) for view in summary.quotas]
    return render(request, "quotas.html", {"summary": summary, "quotas": quotas})


@dataclass(frozen=True)
class PoolRow:
    name: str
    depth: int  # 0 for the root
    kind: str  # the integral guarantee type: none, burst, relaxed
    fair_share_pct: float
    usage_pct: float | None  # None before an update that measured usage
    demand_pct: float
    guarantee_pct: float
    plot: VolumePlot | None  # integral pools only


async def pools_page(request: web.Request) -> web.StreamResponse:
    service = request.config_dict[POOLS]
    history = request.config_dict[HISTORY]
    rows = [_pool_row(service, history, name, depth) for name, depth in _tree_order(service)]
    return render(request, "pools.html", {"pools": rows, "alerts": service.alerts})


def _tree_order(service: PoolService) -> list[tuple[str, int]]:
    """The root, then each pool under its parent, depth first, siblings by name."""
    children: dict[str, list[str]] = {}
    pools = service.config()["pools"]
    for name in service.names():
        parent = pools[name].get("parent") or ROOT
        children.setdefault(parent, []).append(name)
    order: list[tuple[str, int]] = []
    stack = [(ROOT, 0)]
    while stack:
        name, depth = stack.pop()
        order.append((name, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(name, [])))
    return order


def _pool_row(service: PoolService, history: VolumeHistory, name: str, depth: int) -> PoolRow:
    view = service.view(name)
    assert view is not None  # a name the service just listed
    facts: dict[str, Any] = view.introspection
    usage = facts.get("usage_share")
    kind = str(facts.get("integral_guarantee_type", "none"))
    return PoolRow(
        name=name,
        depth=depth,
        kind=kind,
        fair_share_pct=_pct(facts["fair_share"]["total"]),
        usage_pct=None if usage is None else _pct(usage),
        demand_pct=_pct(facts.get("demand_share", 0.0)),
        guarantee_pct=_pct(facts.get("strong_guarantee_share", 0.0)),
        plot=volume_plot(history.series(name)) if kind not in ("none", "") else None,
    )


def _pct(share: float) -> float:
    return round(float(share) * 100, 1)


async def leases_page(request: web.Request) -> web.StreamResponse:
    may_use = principal_of(request).may_use
    link = request.config_dict.get(LEASE_LINK)
    if link is None:
        service = request.config_dict[LEASES]
        held = [(status, service.leases(status.resource_id)) for status in service.statuses()]
    else:  # the lease process serves leases: read from there
        held = [(status, await link.leases(status.resource_id)) for status in await link.statuses()]
    resources = [
        (status, leases_seen(status.resource_id, leases, may_use)) for status, leases in held
    ]
    return render(request, "leases.html", {"resources": resources})
