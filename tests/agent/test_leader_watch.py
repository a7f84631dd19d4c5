"""Watching coordinators' /readyz for one that leads: real standby applications and small
leaders on loopback, nothing mocked."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from agent.leader_watch import leader_answering
from coordinator.standby import make_standby_app
from tests.loopback import serving

TOKEN = "leader-watch-token-0123456789"


def leader_app(ready: asyncio.Event) -> web.Application:
    """/readyz: 503 until ``ready`` is set (a leader whose store is back), 200 after."""

    async def readyz(request: web.Request) -> web.Response:
        if ready.is_set():
            return web.json_response({"status": "ok", "role": "leader"})
        return web.json_response({"status": "standby", "leader": ""}, status=503)

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    return app


async def test_a_standby_names_a_leader_not_in_the_list_and_it_is_asked_too() -> None:
    ready = asyncio.Event()
    ready.set()
    async with serving(leader_app(ready)) as leader:

        async def named() -> str:
            return leader

        async with (
            serving(make_standby_app(TOKEN, named)) as standby,
            aiohttp.ClientSession() as http,
        ):
            found = await leader_answering(http, [standby], within=30)

    assert found == leader


async def test_the_leader_is_found_when_it_answers_again() -> None:
    ready = asyncio.Event()

    async def no_leader() -> str:
        return ""

    async with (
        serving(leader_app(ready)) as leader,
        serving(make_standby_app(TOKEN, no_leader)) as standby,
        aiohttp.ClientSession() as http,
    ):
        watching = asyncio.create_task(leader_answering(http, [standby, leader], within=30))
        await asyncio.sleep(0.6)  # a few rounds with no leader
        assert not watching.done()
        ready.set()
        found = await watching

    assert found == leader


async def test_nobody_leading_or_answering_ends_the_watch_empty_handed() -> None:
    async def no_leader() -> str:
        return ""

    async with (
        serving(make_standby_app(TOKEN, no_leader)) as standby,
        serving(web.Application()) as not_a_coordinator,  # 404 to everything
        aiohttp.ClientSession() as http,
    ):
        closed = "http://127.0.0.1:1"  # nothing listens on port 1
        found = await leader_answering(http, [standby, not_a_coordinator, closed], within=0.5)

    assert found is None
