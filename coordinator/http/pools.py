"""The pool API (pools spec sections 2, 6 and 8).

    PUT/GET/DELETE /v1/pools/{name}   a pool's config; GET also shows its current share,
                                      introspection (``<root>`` for the root) and the CPU
                                      pressure of the hosts its containers run on
    GET  /v1/pools                    every pool, and the alerts of the last update
    POST /v1/pools/simulate           {"total", "timeline", "config"?, "state"?, "substep"?}
                                      -> every step's shares and volumes; commits nothing

PUT and DELETE need an admin token (403 ``forbidden`` otherwise); every valid token may
read and simulate. A config that breaks a rule is 422 with the rule as the error code and
the pool named; nothing changes. PUT and DELETE are decisions on the deployments'
sequencer (``deployments.pool_writes``), in order with the deployments into those pools.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from coordinator.errors import ApiError, NotFound, Unprocessable
from coordinator.http.bodies import json_response, read_body
from coordinator.http.roles import require_admin
from coordinator.keys import DEPLOYMENTS, POOLS
from coordinator.pools import ROOT, PoolError, simulate
from shared.codec import json_decoder

_decode_object: msgspec.json.Decoder[dict[str, Any]] = json_decoder(dict[str, Any])


class SimulationRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    total: dict[str, float]
    timeline: list[dict[str, Any]]
    config: dict[str, Any] | None = None  # None: the coordinator's own tree
    state: dict[str, Any] | None = None  # None: volumes start at 0
    substep: float | None = None


_decode_simulation: msgspec.json.Decoder[SimulationRequest] = json_decoder(SimulationRequest)


def _refused(error: PoolError) -> ApiError:
    return Unprocessable(error.message, details=dict(error.details), code=error.code)


async def list_pools(request: web.Request) -> web.Response:
    service = request.app[POOLS]
    views = [service.view(name) for name in [ROOT, *service.names()]]
    return json_response({"pools": views, "alerts": service.alerts})


async def get_pool(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    pools, deployments = request.app[POOLS], request.app[DEPLOYMENTS]
    view = pools.view(name)
    if view is None:
        raise NotFound(f"no pool named {name!r}", details={"pool": name})
    held = deployments.pool_nodes(None if name == ROOT else pools.subtree(name))
    hosts = {node: deployments.pressure.of(node) for node in sorted(held)}
    return json_response(msgspec.structs.replace(view, hosts=hosts))


async def put_pool(request: web.Request) -> web.Response:
    require_admin(request, "changing pools")
    name = request.match_info["name"]
    if name == ROOT:
        raise ApiError(f"{ROOT} is implicit: its settings are [pools] in the config file")
    pool: dict[str, Any] = await read_body(request, _decode_object, "pool")
    try:
        view = await request.app[DEPLOYMENTS].put_pool(name, pool)
    except PoolError as error:
        raise _refused(error) from error
    return json_response(view)


async def delete_pool(request: web.Request) -> web.Response:
    require_admin(request, "deleting pools")
    name = request.match_info["name"]
    try:
        deleted = await request.app[DEPLOYMENTS].delete_pool(name)
    except PoolError as error:  # e.g. it still has child pools
        raise _refused(error) from error
    if not deleted:
        raise NotFound(f"no pool named {name!r}", details={"pool": name})
    return json_response({})


async def simulate_pools(request: web.Request) -> web.Response:
    body: SimulationRequest = await read_body(request, _decode_simulation, "simulation request")
    config = body.config if body.config is not None else request.app[POOLS].config()
    try:
        steps = simulate(config, body.total, body.timeline, body.state, substep=body.substep)
    except PoolError as error:
        raise _refused(error) from error
    return json_response({"steps": steps})


def add_pool_routes(app: web.Application) -> None:
    app.router.add_get("/v1/pools", list_pools)
    app.router.add_post("/v1/pools/simulate", simulate_pools)
    app.router.add_get("/v1/pools/{name}", get_pool)
    app.router.add_put("/v1/pools/{name}", put_pool)
    app.router.add_delete("/v1/pools/{name}", delete_pool)
