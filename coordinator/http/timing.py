"""The API's request durations by route template (``/v1/deployments/{namespace}/{name}``,
never the raw path, so the series stay few), method and status code, in
``allot_http_request_duration_seconds``.

Outermost of the middlewares, so the code is the one the client gets, the JSON errors'
included. A request no route matches counts as route ``unmatched``; the agents' websocket,
which lasts as long as its agent stays connected, is left out.
"""

from __future__ import annotations

import time

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import Histogram

from coordinator.http.auth import AGENT_PATH
from coordinator.http.errors import Handler

# Any other method a client sends counts as "other": a label of its own each would let
# one client make series without end.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def request_timing(seconds: Histogram) -> Middleware:
    @web.middleware
    async def timed(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == AGENT_PATH:
            return await handler(request)
        started = time.perf_counter()
        code = 500
        try:
            response = await handler(request)
            code = response.status
            return response
        except web.HTTPException as answered:
            code = answered.status
            raise
        finally:
            resource = request.match_info.route.resource
            route = "unmatched" if resource is None else resource.canonical
            method = request.method if request.method in METHODS else "other"
            seconds.labels(route=route, method=method, code=str(code)).observe(
                time.perf_counter() - started
            )

    return timed
