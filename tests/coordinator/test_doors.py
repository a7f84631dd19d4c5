"""``coordinator.doors`` over real sockets on loopback: the header timeout (first request,
kept-alive next requests, the TLS handshake), the connection cap, and the open-files
limit. The app behind the door is a small one of the test's own."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bench.doors import closed_after
from coordinator.config import CoordinatorConfig
from coordinator.doors import FILE_HEADROOM, KEEPALIVE_SECONDS, Doors, DoorSite
from coordinator.tls_files import make_ca, make_leaf, server_leaf
from shared.config import ConfigError, load
from shared.tls import client_context, server_context

HEADER_TIMEOUT = 0.5
# How long past its bound a close may come on a loaded two-core machine.
SLACK = 5.0
REQUEST = b"GET /hello HTTP/1.1\r\nHost: test\r\n\r\n"
HALF_HEADER = b"GET /hello HTTP/1.1\r\nHost: te"
JOIN_TOKEN = "a-join-token-0123456789abcdef"
API_TOKEN = "an-api-token-0123456789abcdef"


@dataclass
class Door:
    host: str
    port: int
    doors: Doors

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)


def small_app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hi")

    async def echo(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(message.data)
        return ws

    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_get("/echo", echo)
    return app


@contextlib.asynccontextmanager
async def serving(
    *, max_connections: int = 1000, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[Door]:
    doors = Doors(max_connections=max_connections, header_timeout_s=HEADER_TIMEOUT)
    runner = web.AppRunner(
        small_app(), access_log=None, shutdown_timeout=0.5, keepalive_timeout=doors.keepalive_s
    )
    await runner.setup()
    listener = socket.create_server(("127.0.0.1", 0))
    host, port = listener.getsockname()
    await DoorSite(runner, listener, doors, ssl_context=ssl_context).start()
    try:
        yield Door(host, port, doors)
    finally:
        await runner.cleanup()


async def answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes = REQUEST
) -> bytes:
    """Send ``request`` and read its whole answer (the app's answers are 2 bytes)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    return head + await reader.readexactly(2)


async def until(condition: str, check: Callable[[], bool]) -> None:
    """Wait (up to SLACK) for ``check()`` to hold; ``condition`` says what, for the error."""
    deadline = time.monotonic() + SLACK
    while not check():
        assert time.monotonic() < deadline, f"never: {condition}"
        await asyncio.sleep(0.01)


async def test_a_connection_without_complete_headers_is_closed_after_the_timeout() -> None:
    async with serving() as door:
        silent, _ = await door.connect()
        half, writer = await door.connect()
        writer.write(HALF_HEADER)
        for reader in (silent, half):
            waited = await closed_after(reader, within=HEADER_TIMEOUT + SLACK)
            assert waited is not None
        await until("both counted as timed out", lambda: door.doors.header_timeouts == 2)
        await until("both given back", lambda: door.doors.open == 0)


async def test_headers_sent_slowly_but_in_time_are_served() -> None:
    async with serving() as door:
        reader, writer = await door.connect()
        for piece in (REQUEST[:10], REQUEST[10:20], REQUEST[20:]):
            writer.write(piece)
            await asyncio.sleep(HEADER_TIMEOUT / 5)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert door.doors.header_timeouts == 0
        writer.close()


async def test_a_kept_alive_connection_may_idle_but_its_next_headers_have_the_timeout() -> None:
    assert KEEPALIVE_SECONDS > 4 * HEADER_TIMEOUT
    async with serving() as door:
        reader, writer = await door.connect()
        assert (await answer(reader, writer)).startswith(b"HTTP/1.1 200 OK")
        await asyncio.sleep(3 * HEADER_TIMEOUT)  # idle: the keep-alive timeout's business
        assert (await answer(reader, writer)).endswith(b"hi")
        await asyncio.sleep(3 * HEADER_TIMEOUT)
        writer.write(HALF_HEADER)
        started = time.monotonic()
        waited = await closed_after(reader, within=HEADER_TIMEOUT + SLACK)
        assert waited is not None
        # The timeout runs from the request's first byte, not from the last answer.
        assert time.monotonic() - started >= HEADER_TIMEOUT * 0.9
        assert door.doors.header_timeouts == 1


async def test_a_websocket_session_outlives_the_header_timeout() -> None:
    async with serving() as door, aiohttp.ClientSession() as http:
        ws = await http.ws_connect(door.url + "/echo")
        await asyncio.sleep(3 * HEADER_TIMEOUT)
        await ws.send_str("still here")
        assert (await ws.receive_str()) == "still here"
        await ws.close()
        assert door.doors.header_timeouts == 0


async def test_past_max_connections_a_new_connection_is_closed_at_once() -> None:
    async with serving(max_connections=3) as door:
        held = [await door.connect() for _ in range(3)]
        await until("three connections held", lambda: door.doors.open == 3)
        extra, _ = await door.connect()
        assert await closed_after(extra, within=SLACK) is not None
        assert (door.doors.open, door.doors.refused) == (3, 1)
        held.pop()[1].close()
        await until("one given back", lambda: door.doors.open == 2)
        reader, writer = await door.connect()
        assert (await answer(reader, writer)).endswith(b"hi")
        for _, other in [*held, (reader, writer)]:
            other.close()


async def test_clients_are_served_while_half_headers_and_a_full_cap_are_turned_away() -> None:
    """Concurrency over real HTTP: 200 requests at once beside 100 half-header
    connections, with a cap that holds them all; everything given back afterwards."""
    async with serving(max_connections=400) as door:
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        async with aiohttp.ClientSession(connector=connector) as http:

            async def get() -> str:
                async with http.get(door.url + "/hello") as response:
                    return await response.text()

            async def half_header() -> float | None:
                reader, writer = await door.connect()
                writer.write(HALF_HEADER)
                return await closed_after(reader, within=HEADER_TIMEOUT + SLACK)

            results = await asyncio.gather(
                *(get() for _ in range(200)), *(half_header() for _ in range(100))
            )
        assert results[:200] == ["hi"] * 200
        assert all(waited is not None for waited in results[200:])
        await until("every connection given back", lambda: door.doors.open == 0)
        assert door.doors.header_timeouts == 100


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a server certificate for 127.0.0.1, as ``allot-coordinator tls`` makes them."""
    directory = tmp_path_factory.mktemp("pki")
    make_ca(directory)
    make_leaf(directory, server_leaf(["127.0.0.1"]))
    return directory


async def test_with_tls_the_handshake_and_the_headers_each_have_the_timeout(pki: Path) -> None:
    server_side = server_context(str(pki / "server.pem"), str(pki / "server-key.pem"))
    client_side = client_context(str(pki / "ca.pem"))
    async with serving(ssl_context=server_side) as door:
        no_handshake, _ = await door.connect()
        assert await closed_after(no_handshake, within=HEADER_TIMEOUT + SLACK) is not None
        reader, writer = await asyncio.open_connection(door.host, door.port, ssl=client_side)
        assert (await answer(reader, writer)).endswith(b"hi")
        writer.write(HALF_HEADER)
        assert await closed_after(reader, within=HEADER_TIMEOUT + SLACK) is not None
        await until("every connection given back", lambda: door.doors.open == 0)
        assert door.doors.header_timeouts == 1  # the handshake's timeout is not a header's


def fit_in_child(soft: int, hard: int, max_connections: int) -> list[int]:
    """``fit_open_files`` run in a child process under these limits: the cap it returns
    and the soft limit afterwards."""
    code = (
        "import resource, sys\n"
        "from coordinator.doors import fit_open_files\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))\n"
        f"cap = fit_open_files({max_connections})\n"
        "print(cap, resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return [int(word) for word in done.stdout.split()]


def test_the_soft_open_files_limit_is_raised_to_fit_the_cap() -> None:
    assert fit_in_child(1024, 4096, 2000) == [2000, 2000 + FILE_HEADROOM]


def test_a_hard_limit_too_low_lowers_the_cap_with_a_warning() -> None:
    assert fit_in_child(1024, 1024, 10_000) == [1024 - FILE_HEADROOM, 1024]


def test_the_settings_default_to_ten_seconds_and_ten_thousand_connections() -> None:
    config = CoordinatorConfig(join_token=JOIN_TOKEN, api_tokens=[API_TOKEN])
    assert (config.header_timeout_seconds, config.max_connections) == (10.0, 10_000)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("HEADER_TIMEOUT_SECONDS", "0", "Expected `float` > 0"),
        ("MAX_CONNECTIONS", "0", "Expected `int` >= 1"),
        ("MAX_CONNECTIONS", "many", "Expected `int`"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(
    variable: str, value: str, message: str
) -> None:
    environ = {
        "ALLOT_COORDINATOR_JOIN_TOKEN": JOIN_TOKEN,
        "ALLOT_COORDINATOR_API_TOKENS": API_TOKEN,
        f"ALLOT_COORDINATOR_{variable}": value,
    }
    with pytest.raises(ConfigError, match=message) as refused:
        load(CoordinatorConfig, environ=environ, env_prefix="ALLOT_COORDINATOR_")
    assert f"ALLOT_COORDINATOR_{variable}" in str(refused.value)


@pytest.mark.parametrize(
    ("max_connections", "header_timeout_s"), [(0, 1.0), (10, 0.0)], ids=["no-cap", "no-timeout"]
)
def test_doors_refuse_a_cap_or_a_timeout_that_would_serve_nobody(
    max_connections: int, header_timeout_s: float
) -> None:
    with pytest.raises(ValueError, match="max_connections >= 1 and header_timeout_s > 0"):
        Doors(max_connections=max_connections, header_timeout_s=header_timeout_s)
