"""Health, nodes and metrics over HTTP. Handlers only read state and shape JSON.

GET /healthz            {"status": "ok"} (no token)
GET /readyz             {"status": "ok", "role": "leader"} (no token; see coordinator.standby),
                        or 503 {"status": "degraded", "role": "leader", "reason": ...} while
                        the SQLite store's writes fail (a full disk), until one succeeds
GET /metrics            Prometheus text (no token)
GET /v1/nodes           every node's record, whether it is cordoned, its CPU pressure
GET /v1/nodes/{name}    one node's record, whether it is cordoned, its CPU pressure
"""

from __future__ import annotations

from aiohttp import web

from coordinator.errors import NotFound
from coordinator.http.bodies import json_response
from coordinator.keys import DEPLOYMENTS, METRICS, REGISTRY, STORE
from coordinator.metrics import Metrics
from coordinator.store.sqlite import SqliteStore
from shared.api.nodes import NodeView


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    store = request.app[STORE].inner
    problem = store.write_health.problem if isinstance(store, SqliteStore) else ""
    if problem:
        return json_response({"status": "degraded", "role": "leader", "reason": problem}, 503)
    return json_response({"status": "ok", "role": "leader"})


async def list_nodes(request: web.Request) -> web.Response:
    deployments = request.app[DEPLOYMENTS]
    cordoned, pressure = deployments.cordoned(), deployments.pressure
    views = [
        NodeView.of(r, cordoned=r.name in cordoned, pressure=pressure.of(r.name))
        for r in request.app[REGISTRY].all()
    ]
    return json_response({"nodes": views})


async def get_node(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    record = request.app[REGISTRY].get(name)
    if record is None:
        raise NotFound(f"no node named {name!r}", details={"node": name})
    deployments = request.app[DEPLOYMENTS]
    cordoned = name in deployments.cordoned()
    return json_response(
        NodeView.of(record, cordoned=cordoned, pressure=deployments.pressure.of(name))
    )


async def metrics_response(metrics: Metrics) -> web.Response:
    """The exposition of ``metrics``: the leader's, or a standby's, written in slices
    that leave the event loop to the agents and the API in between."""
    body = await metrics.render_in_slices()
    return web.Response(body=body, content_type="text/plain", charset="utf-8")


async def metrics(request: web.Request) -> web.Response:
    return await metrics_response(request.app[METRICS])


def add_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/nodes", list_nodes)
    app.router.add_get("/v1/nodes/{name}", get_node)
