"""A scripted lease coordinator for client tests: the two capacity endpoints of spec §2
on a real loopback socket, answering as the test sets it, and recording every request
as the plain JSON it received (so the tests check the wire, not the client's structs)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from coordinator.http.errors import error_response
from tests import loopback

TOKEN = "lease-test-token-0123456789"


@dataclass(frozen=True)
class Received:
    path: str
    body: dict[str, Any]
    at: float  # loop time of arrival


class LeaseServer:
    def __init__(self) -> None:
        self.url = ""
        self.grants: dict[str, float] = {}  # resource id -> grant; otherwise what it wants
        self.refresh_intervals: dict[str, float] = {}  # resource id -> interval
        self.refresh_interval = 10.0  # for the others
        self.lease_length = 30.0
        self.safe_capacity = 0.0
        self.unknown: set[str] = set()  # resource ids matching no template: 400
        self.status = 200  # anything else is answered with that status and an error body
        self.hang = False  # answer nothing until the server stops
        self.received: list[Received] = []
        self._stopping = asyncio.Event()

    def capacity_requests(self) -> list[Received]:
        return [r for r in self.received if r.path == "/v1/capacity"]

    def releases(self) -> list[Received]:
        return [r for r in self.received if r.path == "/v1/capacity/release"]

    async def capacity(self, request: web.Request) -> web.StreamResponse:
        body = await self._receive(request)
        if failure := await self._scripted_failure(request):
            return failure
        ids = [r["resource_id"] for r in body["resources"]]
        if unknown := [i for i in ids if i in self.unknown]:
            message = f"resource {unknown[0]!r} matches no resource template"
            return error_response(400, "unknown_resource", message, {"resource": unknown[0]})
        return web.json_response({"resources": [self._grant(r) for r in body["resources"]]})

    async def release(self, request: web.Request) -> web.StreamResponse:
        await self._receive(request)
        return await self._scripted_failure(request) or web.json_response({})

    async def _receive(self, request: web.Request) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(await request.read())
        at = asyncio.get_running_loop().time()
        self.received.append(Received(request.path, body, at))
        return body

    async def _scripted_failure(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return error_response(401, "unauthorized", "missing or invalid API token")
        if self.hang:
            await self._stopping.wait()
            return error_response(503, "stopping", "the test is over")
        if self.status != 200:
            return error_response(self.status, "scripted", f"scripted {self.status}")
        return None

    def _grant(self, wanted: dict[str, Any]) -> dict[str, Any]:
        resource_id = wanted["resource_id"]
        return {
            "resource_id": resource_id,
            "gets": {
                "capacity": self.grants.get(resource_id, wanted["wants"]),
                "expiry_time": time.time() + self.lease_length,
                "refresh_interval": self.refresh_intervals.get(resource_id, self.refresh_interval),
            },
            "safe_capacity": self.safe_capacity,
        }


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[LeaseServer]:
    """A ``LeaseServer`` on 127.0.0.1 and a free port, stopped afterwards."""
    server = LeaseServer()
    app = web.Application()
    app.router.add_post("/v1/capacity", server.capacity)
    app.router.add_post("/v1/capacity/release", server.release)
    async with loopback.serving(app) as server.url:
        try:
            yield server
        finally:
            server._stopping.set()


def unused_url() -> str:
    """The URL of a loopback port nothing listens on: connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
