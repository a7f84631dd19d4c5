"""allotctl's API client and the lease client among several coordinators: real standby
applications (``coordinator.standby``) in front of a leader on loopback. A standby's 307
is followed with the same method, body and token; a coordinator that does not answer,
or a standby that knows no leader yet, sends the client on to the next one listed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from client.api import ApiClient, ApiClientError
from client.leases import LeaseClient
from coordinator.standby import make_standby_app
from tests.client.lease_server import TOKEN, LeaseServer, serving, unused_url
from tests.loopback import serving as serving_app
from tests.polling import eventually


def names(leader: str) -> Callable[[], asyncio.Future[str]]:
    async def leader_url() -> str:
        return leader

    return leader_url  # type: ignore[return-value]


async def echo(request: web.Request) -> web.Response:
    """The leader: what it received, if the token came along."""
    if request.headers.get("Authorization") != f"Bearer {TOKEN}":
        return web.json_response({"error": {"code": "unauthorized", "message": "no"}}, status=401)
    body = (await request.read()).decode()
    return web.json_response({"method": request.method, "path": request.path_qs, "body": body})


@pytest.fixture
async def leader() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    async with serving_app(app) as url:
        yield url


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
async def test_the_api_client_follows_a_standby_to_the_leader(leader: str, method: str) -> None:
    async with serving_app(make_standby_app("join", names(leader))) as standby:
        client = ApiClient(standby, TOKEN)
        send = {
            "GET": lambda: client.get("/v1/nodes?x=1"),
            "POST": lambda: client.post("/v1/nodes?x=1", {"a": 1}),
            "PUT": lambda: client.put("/v1/nodes?x=1", {"a": 1}),
            "PATCH": lambda: client.patch("/v1/nodes?x=1", {"a": 1}),
            "DELETE": lambda: client.delete("/v1/nodes?x=1"),
        }[method]
        answer = json.loads(await asyncio.to_thread(send))
    assert answer["method"] == method
    assert answer["path"] == "/v1/nodes?x=1"
    assert answer["body"] == ("" if method in ("GET", "DELETE") else '{"a": 1}')
    assert client.server == leader  # later requests go straight there


async def test_the_api_client_goes_round_its_list(leader: str) -> None:
    async with serving_app(make_standby_app("join", names(""))) as lost:
        client = ApiClient(f"{unused_url()},{lost},{leader}", TOKEN)
        answer = json.loads(await asyncio.to_thread(client.post, "/v1/x", {}))
    assert answer["method"] == "POST"
    assert client.server == leader


async def test_the_api_client_says_why_when_no_coordinator_leads() -> None:
    async with serving_app(make_standby_app("join", names(""))) as lost:
        client = ApiClient(f"{unused_url()},{lost}", TOKEN)
        with pytest.raises(ApiClientError) as caught:
            await asyncio.to_thread(client.get, "/v1/nodes")
    assert "no leader is known yet" in str(caught.value)
    assert "(503 not_leader)" in str(caught.value)


async def test_the_lease_client_follows_a_standby_and_then_talks_to_the_leader() -> None:
    async with serving() as server:
        assert isinstance(server, LeaseServer)
        async with serving_app(make_standby_app("join", names(server.url))) as standby:
            servers = f"{unused_url()},{standby}"
            client = LeaseClient(servers, token=TOKEN, answer_wait=5.0, backoff_base=0.05)
            async with client:
                handle = await client.resource("db", wants=7)  # the first one finds nobody
                await eventually(lambda: handle.capacity == 7)
                await handle.ask(9)
                assert handle.capacity == 9
    assert [r.body["resources"][0]["wants"] for r in server.capacity_requests()] == [7, 9]
