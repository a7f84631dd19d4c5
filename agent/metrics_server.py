"""``GET /metrics`` of the agent: a small aiohttp server in the agent's own event loop.

    async with metrics_site(("127.0.0.1", 0), metrics) as url:   # the port bound, read back
        ...                                                       # served until the block ends

Each scrape renders the registry on the event loop: a few hundred microseconds for a
node's containers, shorter than one reconcile step's bookkeeping.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from agent.metrics import AgentMetrics

_METRICS: web.AppKey[AgentMetrics] = web.AppKey("metrics", AgentMetrics)


async def _scrape(request: web.Request) -> web.Response:
    body = request.app[_METRICS].render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@contextlib.asynccontextmanager
async def metrics_site(endpoint: tuple[str, int], metrics: AgentMetrics) -> AsyncIterator[str]:
    """Serve ``metrics`` on ``endpoint`` (host "" is every address); yields the URL of
    ``/metrics`` with the port actually bound. ``OSError`` when it cannot be bound."""
    app = web.Application()
    app[_METRICS] = metrics
    app.router.add_get("/metrics", _scrape)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        host, port = endpoint
        site = web.TCPSite(runner, host or None, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        yield f"http://{shown}:{bound_port}/metrics"
    finally:
        await runner.cleanup()
