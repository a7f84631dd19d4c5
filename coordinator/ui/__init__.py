"""The live dashboard at ``/ui/``: server-rendered pages of the coordinator's state.

    /ui/                               every node with its state; every deployment with its
                                       desired, placed, pending and running counts
    /ui/nodes/{name}                   the node's core map, GPUs and containers
    /ui/deployments/{namespace}/{name} its containers, pending reasons and events
    /ui/quotas                         min / used / max bars, with what is borrowed
    /ui/pools                          the pool tree: fair share against usage, and each
                                       integral pool's volume over time
    /ui/leases                         every lease resource and its leases
    /ui/login, /ui/logout              the session (``coordinator.ui.access``)

HTML from Jinja2 templates with inline SVG, no build step and nothing from elsewhere: a
page's only script refreshes its content every few seconds (``coordinator.ui.rendering``).
The pages read the same in-memory state the API answers from, and check the same tokens.
A standby serves none of it: it redirects ``/ui/`` like every path to the leader.
"""

from __future__ import annotations

import time

from aiohttp import web

from coordinator.config import CoordinatorConfig
from coordinator.http.auth import api_principals
from coordinator.ui.access import HOME, login_routes, signed_in
from coordinator.ui.capacity_pages import leases_page, pools_page, quotas_page
from coordinator.ui.cluster_pages import deployment_page, overview
from coordinator.ui.node_page import node_page
from coordinator.ui.sampling import sample_volumes
from coordinator.ui.sessions import Sessions


def add_dashboard(app: web.Application, config: CoordinatorConfig) -> None:
    """Mount the dashboard on ``app`` at ``/ui/`` (and send ``/ui`` there)."""
    principals = api_principals(config)
    sessions = Sessions(clock=time.monotonic)
    dashboard = web.Application(middlewares=[signed_in(principals, sessions)])
    dashboard.router.add_routes(login_routes(principals, sessions))
    dashboard.router.add_get("/", overview)
    dashboard.router.add_get("/nodes/{name}", node_page)
    dashboard.router.add_get("/deployments/{namespace}/{name}", deployment_page)
    dashboard.router.add_get("/quotas", quotas_page)
    dashboard.router.add_get("/pools", pools_page)
    dashboard.router.add_get("/leases", leases_page)
    app.router.add_get(HOME.rstrip("/"), _to_home)  # before the mount, which matches it too
    app.add_subapp(HOME, dashboard)
    app.cleanup_ctx.append(sample_volumes)


async def _to_home(request: web.Request) -> web.StreamResponse:
    raise web.HTTPPermanentRedirect(HOME)
