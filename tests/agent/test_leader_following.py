"""The agent among several coordinators: real standby applications (``coordinator.standby``)
and a scripted leader on loopback; the agent finds the leader and registers there."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import msgpack
import pytest
from aiohttp import web

from agent.config import AgentConfig
from agent.metrics import AgentMetrics
from agent.session import run_link
from coordinator.standby import make_standby_app
from shared.logs import fields_of
from tests.agent.test_session import TOKEN, ScriptedCoordinator, agent_log, lines, welcome
from tests.builders import idle_runtime, make_inventory
from tests.loopback import serving
from tests.polling import eventually

__all__ = ["agent_log"]  # the fixture, used by name


async def stay(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
    await ws.send_bytes(welcome())
    await asyncio.sleep(10)


def scripted_leader() -> tuple[ScriptedCoordinator, web.Application]:
    leader = ScriptedCoordinator(stay)
    app = web.Application()
    app.router.add_get("/v1/agent", leader.handle)
    return leader, app


@contextlib.asynccontextmanager
async def linked(*servers: str, backoff_seconds: float = 0.05) -> AsyncIterator[None]:
    """An agent linked to ``servers``; its reconnect delays are drawn up to
    ``backoff_seconds`` at first, and up to four times that at most."""
    config = AgentConfig(
        server=",".join(servers),
        join_token=TOKEN,
        node_name="n1",
        backoff_initial_seconds=backoff_seconds,
        backoff_max_seconds=4 * backoff_seconds,
    )
    inventory = make_inventory()
    link = asyncio.create_task(run_link(config, inventory, idle_runtime(inventory), AgentMetrics()))
    try:
        yield
    finally:
        link.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await link


async def test_a_standby_sends_the_agent_to_the_leader_it_names(
    agent_log: pytest.LogCaptureFixture,
) -> None:
    leader, leader_app = scripted_leader()
    async with serving(leader_app) as leader_url:

        async def named() -> str:
            return leader_url

        async with serving(make_standby_app(TOKEN, named)) as standby_url, linked(standby_url):
            await eventually(lambda: len(leader.hellos) == 1)
    standby = next(r for r in agent_log.records if r.getMessage() == "coordinator is a standby")
    assert fields_of(standby) == {"url": standby_url, "leader": leader_url}
    assert "cannot register with coordinator" not in lines(agent_log, logging.WARNING)


async def test_the_agent_goes_round_its_list_past_dead_and_leaderless_coordinators() -> None:
    leader, leader_app = scripted_leader()

    async def unknown() -> str:
        return ""

    async with (
        serving(web.Application()) as gone,  # answers the agent socket with 404
        serving(make_standby_app(TOKEN, unknown)) as standby,
        serving(leader_app) as leader_url,
        linked(gone, standby, leader_url),
    ):
        await eventually(lambda: len(leader.hellos) == 1)


async def test_a_standby_refuses_a_wrong_join_token_before_naming_the_leader() -> None:
    async def named() -> str:
        return "http://leader:7600"

    wrong = {"Authorization": "Bearer wrong-token-0123456789"}
    async with (
        serving(make_standby_app(TOKEN, named)) as standby,
        aiohttp.ClientSession() as http,
        http.get(standby + "/v1/agent", headers=wrong) as answer,
    ):
        assert answer.status == 401
        assert "leader" not in await answer.text()


async def test_a_registered_agent_goes_back_when_the_leader_answers_not_when_its_delay_ends() -> (
    None
):
    """The first session ends at once; the coordinator's /readyz then says it does not
    lead until the test says so. With delays drawn up to 250 s (a quarter of the lease),
    the second hello comes as soon as /readyz answers 200."""
    leading = asyncio.Event()
    asked = 0

    async def welcome_then_leave(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome(lease=1000))

    async def readyz(request: web.Request) -> web.Response:
        nonlocal asked
        asked += 1
        if leading.is_set():
            return web.json_response({"status": "ok", "role": "leader"})
        return web.json_response({"status": "standby", "leader": ""}, status=503)

    coordinator = ScriptedCoordinator(welcome_then_leave)
    app = web.Application()
    app.router.add_get("/v1/agent", coordinator.handle)
    app.router.add_get("/readyz", readyz)
    async with serving(app) as url, linked(url, backoff_seconds=1000):
        await eventually(lambda: asked >= 3)  # watching, not sleeping out its delay
        leading.set()
        await eventually(lambda: len(coordinator.hellos) >= 2)


async def test_a_leader_that_refuses_the_agent_is_not_asked_again_at_the_watchs_pace() -> None:
    """/readyz says 200 throughout, but the second hello is refused: the agent then waits
    out its delay (drawn up to thousands of seconds here) instead of going back each
    time the watch sees the leader."""
    asked = 0

    async def welcome_then_refuse(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        if len(coordinator.hellos) == 1:
            await ws.send_bytes(welcome(lease=100_000))
            return
        refusal = {"type": "error", "code": "unauthorized", "message": "not you"}
        await ws.send_bytes(bytes(msgpack.packb(refusal)))

    async def readyz(request: web.Request) -> web.Response:
        nonlocal asked
        asked += 1
        return web.json_response({"status": "ok", "role": "leader"})

    coordinator = ScriptedCoordinator(welcome_then_refuse)
    app = web.Application()
    app.router.add_get("/v1/agent", coordinator.handle)
    app.router.add_get("/readyz", readyz)
    async with serving(app) as url, linked(url, backoff_seconds=10_000):
        await eventually(lambda: len(coordinator.hellos) == 2)
        await asyncio.sleep(0.1)  # the refusal reaches the agent
        seen = asked
        await asyncio.sleep(1.0)
        assert (len(coordinator.hellos), asked) == (2, seen)
