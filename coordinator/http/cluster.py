"""The HTTP API: health, nodes and metrics. Handlers only read state and shape JSON."""

from __future__ import annotations

from typing import TypeVar

import msgspec
from aiohttp import web

from coordinator.errors import ApiError, NotFound
from coordinator.keys import LEASES, METRICS, REGISTRY
from shared.codec import to_json

T = TypeVar("T")


def json_response(body: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=to_json(body), content_type="application/json")


async def read_body(request: web.Request, decoder: msgspec.json.Decoder[T], what: str) -> T:
    """The request's JSON body decoded by ``decoder``; 400 ``invalid_request`` saying what
    is wrong where (``what``: "plan request", ...) when it cannot be."""
    try:
        return decoder.decode(await request.read())
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise ApiError(f"invalid {what}: {error}", code="invalid_request") from error


async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


async def list_nodes(request: web.Request) -> web.Response:
    return json_response({"nodes": request.app[REGISTRY].all()})


async def get_node(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    record = request.app[REGISTRY].get(name)
    if record is None:
        raise NotFound(f"no node named {name!r}", details={"node": name})
    return json_response(record)


async def metrics(request: web.Request) -> web.Response:
    text = request.app[METRICS].render(request.app[REGISTRY].all(), request.app[LEASES].statuses())
    return web.Response(body=text, content_type="text/plain", charset="utf-8")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/nodes", list_nodes)
    app.router.add_get("/v1/nodes/{name}", get_node)
