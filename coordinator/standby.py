"""What a standby coordinator serves: it decides nothing and sends everyone to the leader.

GET /healthz    200 {"status": "ok"}: the process is alive
GET /metrics    this standby's own metrics: allot_coordinator_leader 0, the process's,
                and the nodes and deployments it follows from the store (not the
                leader's counters, quotas, pools or leases: README, "Watching it")
GET /readyz     503 {"status": "standby", "role": "standby", "leader": <URL or "">}
/v1/agent       the websocket is accepted, answered with one ``error`` frame of code
                ``not_leader`` whose ``leader`` is the leader's URL, and closed (4002)
anything else   307 to the same path and query at the leader (the client sends the same
                method and body again), or 503 ``not_leader`` while no leader is known,
                with ``details.leader`` empty

Reads are redirected too: a standby's copy of the store may lag the leader's by a few
milliseconds, and one answer for every request keeps clients simple.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from coordinator.agent_identity import AgentAuthorizer
from coordinator.http.auth import AGENT_PATH
from coordinator.http.bodies import json_response
from coordinator.http.cluster import healthz, metrics_response
from coordinator.http.errors import error_response
from coordinator.metrics import Metrics
from shared.protocol import NOT_LEADER, SUBPROTOCOL, Error, encode

CLOSE_NOT_LEADER = 4002
LeaderUrl = Callable[[], Awaitable[str]]


def make_standby_app(
    join_token: str,
    leader_url: LeaderUrl,
    *,
    client_ca: bool = False,
    metrics: Metrics | None = None,
) -> web.Application:
    """The standby's application; ``metrics`` is what its /metrics shows (by default
    only ``allot_coordinator_leader`` 0 and the process's figures)."""
    metrics = Metrics(leader=False) if metrics is None else metrics
    shown = metrics
    app = web.Application()
    authorizer = AgentAuthorizer(join_token=join_token, client_ca=client_ca)

    async def metrics_text(request: web.Request) -> web.Response:
        return await metrics_response(shown)

    async def readyz(request: web.Request) -> web.Response:
        leader = await leader_url()
        return json_response({"status": "standby", "role": "standby", "leader": leader}, 503)

    async def agent_socket(request: web.Request) -> web.StreamResponse:
        problem = authorizer.admission_problem(request)
        if problem is not None:
            return error_response(401, "unauthorized", problem)
        leader = await leader_url()
        ws = web.WebSocketResponse(protocols=(SUBPROTOCOL,))
        await ws.prepare(request)
        message = f"this coordinator is a standby; the leader is {leader or 'not known yet'}"
        await ws.send_bytes(encode(Error(code=NOT_LEADER, message=message, leader=leader)))
        await ws.close(code=CLOSE_NOT_LEADER, message=f"not leader: {leader}".encode()[:120])
        return ws

    async def elsewhere(request: web.Request) -> web.StreamResponse:
        leader = await leader_url()
        if not leader:
            return error_response(
                503,
                NOT_LEADER,
                "this coordinator is a standby and no leader is known yet; try again shortly",
                {"leader": ""},
            )
        raise web.HTTPTemporaryRedirect(leader + request.path_qs)

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_text)
    app.router.add_get(AGENT_PATH, agent_socket)
    app.router.add_route("*", "/{tail:.*}", elsewhere)
    return app
