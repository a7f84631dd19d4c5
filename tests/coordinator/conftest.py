"""A real coordinator in the test's event loop: the aiohttp app bound to port 0 on
loopback, its SQLite store in tmp_path. Agents are plain websocket clients that build
their frames with the standard ``msgpack`` package, as any peer could."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import pytest
from aiohttp import web

from coordinator.app import make_app
from coordinator.auth_failures import FailureBook
from coordinator.config import CoordinatorConfig, NamespaceToken
from coordinator.keys import DEPLOYMENTS, REGISTRY, STORE
from coordinator.services.registry import NODE_PREFIX
from coordinator.store import ClusterStore
from shared.codec import to_builtins, to_json
from shared.protocol import SUBPROTOCOL
from tests.builders import make_inventory
from tests.coordinator.store_engines import ENGINES, Engine, etcd_engine, sqlite_engine

JOIN_TOKEN = "join-token-for-tests-0123456789"
API_TOKEN = "api-token-for-tests-0123456789"  # an admin token
NAMESPACE_TOKEN = "namespace-token-for-tests-0123456789"  # for the namespace "team-a" only
NAMESPACE = "team-a"
LEASE_SECONDS = 0.8
HEARTBEAT_SECONDS = 0.2


@dataclass
class Coordinator:
    url: str
    app: web.Application
    http: aiohttp.ClientSession

    async def get(self, path: str, token: str | None = API_TOKEN) -> aiohttp.ClientResponse:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await self.http.get(self.url + path, headers=headers)

    async def call(
        self, method: str, path: str, body: object = None, token: str = API_TOKEN
    ) -> tuple[int, Any]:
        """Status and JSON body of a request with the admin token (or ``token``)."""
        headers = {"Authorization": f"Bearer {token}"}
        response = await self.http.request(method, self.url + path, json=body, headers=headers)
        return response.status, await response.json()

    async def get_json(self, path: str) -> Any:
        response = await self.get(path)
        assert response.status == 200, await response.text()
        return await response.json()

    async def stored(self, prefix: str) -> dict[str, Any]:
        """What the store holds under ``prefix`` right now, each value as plain JSON data:
        for comparing with what the API answers from memory."""
        entries = await self.app[STORE].range(prefix)
        return {entry.key: json.loads(entry.value) for entry in entries}

    async def connect(
        self, *, token: str = JOIN_TOKEN, protocols: tuple[str, ...] = (SUBPROTOCOL,)
    ) -> aiohttp.ClientWebSocketResponse:
        return await self.http.ws_connect(
            self.url + "/v1/agent",
            protocols=protocols,
            headers={"Authorization": f"Bearer {token}"},
        )

    async def stored_nodes(self) -> list[Any]:
        """The node records in the store, by name, as plain data."""
        return list((await self.stored(NODE_PREFIX)).values())

    async def settled(self) -> None:
        """Wait until every agent socket has ended on the coordinator's side too: a
        session closed under its agent (replaced, say) may still be acting on a frame."""
        for _ in range(500):
            metrics = await (await self.get("/metrics", token=None)).text()
            if "\nallot_agent_connections 0.0\n" in metrics:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("agent sockets still open on the coordinator")

    async def assert_nodes_match_store(self) -> None:
        """The node records in memory are exactly those in the store."""
        in_memory = [json.loads(to_json(record)) for record in self.app[REGISTRY].all()]
        assert in_memory == await self.stored_nodes()


def inventory(*, problems: list[str] | None = None) -> dict[str, Any]:
    """The shared two-CPU test host as plain data, the way the wire carries it."""
    wire: dict[str, Any] = to_builtins(make_inventory(problems))
    return wire


def hello(node: str = "node-a", **overrides: Any) -> bytes:
    frame = {
        "type": "hello",
        "node": node,
        "token": JOIN_TOKEN,
        "protocol": 1,
        "inventory": inventory(),
        "agent_version": "test",
    }
    return bytes(msgpack.packb(frame | overrides))


def frame(kind: str, **fields: Any) -> bytes:
    return bytes(msgpack.packb({"type": kind, **fields}))


async def receive_frame(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await ws.receive(timeout=5)
    assert message.type == aiohttp.WSMsgType.BINARY, (message.type, message.data)
    decoded: dict[str, Any] = msgpack.unpackb(message.data, strict_map_key=False)
    return decoded


async def receive_close(ws: aiohttp.ClientWebSocketResponse) -> int | None:
    """Read until the socket closes; returns the close code the coordinator sent."""
    while True:
        message = await ws.receive(timeout=5)
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
            return ws.close_code


async def register(
    coordinator: Coordinator, node: str = "node-a"
) -> aiohttp.ClientWebSocketResponse:
    ws = await coordinator.connect()
    await ws.send_bytes(hello(node))
    welcome = await receive_frame(ws)
    assert welcome["type"] == "welcome", welcome
    return ws


async def newest_desired(
    coordinator: Coordinator, ws: aiohttp.ClientWebSocketResponse, node: str
) -> tuple[int, list[str]]:
    """Read the desired-state frames the coordinator has sent the agent so far; the
    revision and container ids of the newest desired state (the last frame it sends)."""
    while True:
        try:
            message = await ws.receive(timeout=0.2)
        except TimeoutError:
            break
        if message.type != aiohttp.WSMsgType.BINARY:
            break
    revision, desired = coordinator.app[DEPLOYMENTS].desired(node)
    return revision, [container.id for container in desired]


async def report_caught_up(
    coordinator: Coordinator, ws: aiohttp.ClientWebSocketResponse, node: str = "node-a"
) -> None:
    """The agent says it ran the newest desired state it was sent (every container
    running, none other left), and the coordinator lets go of what the node stopped;
    the frames sent meanwhile are read."""
    revision, ids = await newest_desired(coordinator, ws, node)
    running = [{"id": cid, "state": "running"} for cid in ids]
    await ws.send_bytes(frame("status", applied_revision=revision, containers=running))
    for _ in range(500):
        stopping = await coordinator.get_json(f"/v1/containers?state=stopping&node={node}")
        if not stopping["containers"]:
            await newest_desired(coordinator, ws, node)  # the one the release sent
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"node {node}'s stopping containers were not let go")


def config_for(data_dir: Path, **overrides: Any) -> CoordinatorConfig:
    settings: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "data_dir": str(data_dir),
        "join_token": JOIN_TOKEN,
        "api_tokens": [API_TOKEN],
        "namespace_tokens": [NamespaceToken(token=NAMESPACE_TOKEN, namespaces=[NAMESPACE])],
        "lease_seconds": LEASE_SECONDS,
        "heartbeat_seconds": HEARTBEAT_SECONDS,
        "hello_timeout_seconds": 0.5,
        "max_frame_bytes": 64 * 1024,
    }
    return CoordinatorConfig(**(settings | overrides))


async def start(
    config: CoordinatorConfig, *, failures: FailureBook | None = None
) -> tuple[web.AppRunner, str]:
    app = make_app(config, failures=failures)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[Coordinator]:
    runner, url = await start(config_for(tmp_path))
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Coordinator]:
    """A coordinator whose node leases outlast the test (no heartbeats needed)."""
    runner, url = await start(config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0))
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


@pytest.fixture
def allot_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """caplog for the "allot" loggers, even after something configured them."""
    root = logging.getLogger("allot")
    propagate = root.propagate
    root.propagate = True
    caplog.set_level(logging.INFO, logger="allot")
    yield caplog
    root.propagate = propagate


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """Each store engine in turn: the conformance suite runs its tests on both."""
    if request.param == "sqlite":
        return sqlite_engine(tmp_path)
    return etcd_engine(request.getfixturevalue("etcd_cluster"))


@pytest.fixture
async def store(engine: Engine) -> AsyncIterator[ClusterStore]:
    opened = await engine.open()
    yield opened
    await opened.close()
