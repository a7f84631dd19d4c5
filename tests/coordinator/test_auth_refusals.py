"""Failed authentications against a real coordinator: each 401 closes its connection,
each failure is counted by kind on /metrics, a source is logged at most once a minute,
and a source that keeps failing is answered later and later."""

from __future__ import annotations

import asyncio
import re
import time

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from coordinator.auth_failures import FailureBook
from coordinator.http.auth import AuthRefusals
from shared.logs import fields_of
from tests.coordinator.conftest import (
    Coordinator,
    hello,
    receive_close,
    receive_frame,
    register,
)

WRONG = "not-the-right-token-0123456789"
UPGRADE = (
    "GET /v1/agent HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Protocol: allot.v1\r\n{token}\r\n"
)


async def failures(coordinator: Coordinator) -> dict[str, float]:
    """allot_auth_failures_total by kind, as /metrics says."""
    text = await (await coordinator.get("/metrics", token=None)).text()
    found = re.findall(r'^allot_auth_failures_total\{kind="(\w+)"\} (\S+)$', text, re.M)
    return {kind: float(value) for kind, value in found}


async def raw_answer(coordinator: Coordinator, request: str) -> tuple[bytes, bool]:
    """The head of the answer to ``request`` on a connection of its own, and whether the
    server then closed that connection (within 5 s)."""
    host, port = coordinator.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request.encode())
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE)
        assert length is not None, head
        await reader.readexactly(int(length.group(1)))
        try:
            async with asyncio.timeout(5):
                closed = await reader.read(1) == b""
        except TimeoutError:
            closed = False
        return head, closed
    finally:
        writer.close()


@pytest.mark.parametrize(
    "token", ["", f"Authorization: Bearer {WRONG}\r\n"], ids=["no-token", "wrong-token"]
)
async def test_a_refused_upgrade_closes_its_socket(coordinator: Coordinator, token: str) -> None:
    head, closed = await raw_answer(coordinator, UPGRADE.format(token=token))
    assert head.startswith(b"HTTP/1.1 401")
    assert b"Connection: close" in head
    assert closed
    assert await failures(coordinator) == {"join_token": 1.0}


async def test_a_wrong_api_token_closes_its_connection_and_is_counted(
    coordinator: Coordinator,
) -> None:
    request = f"GET /v1/nodes HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {WRONG}\r\n\r\n"
    head, closed = await raw_answer(coordinator, request)
    assert head.startswith(b"HTTP/1.1 401")
    assert closed
    assert (await coordinator.get("/v1/nodes", token=None)).status == 401
    assert await failures(coordinator) == {"api_token": 2.0}


async def test_a_wrong_join_token_in_the_hello_is_counted(coordinator: Coordinator) -> None:
    ws = await coordinator.connect()
    await ws.send_bytes(hello(token=WRONG))
    assert (await receive_frame(ws))["code"] == "unauthorized"
    await receive_close(ws)
    assert await failures(coordinator) == {"join_token": 1.0}


async def test_good_tokens_are_not_counted(coordinator: Coordinator) -> None:
    await register(coordinator)
    assert (await coordinator.get("/v1/nodes")).status == 200
    assert await failures(coordinator) == {}


async def test_a_source_that_keeps_failing_is_slowed_and_logged_once(
    coordinator: Coordinator, allot_logs: pytest.LogCaptureFixture
) -> None:
    """Ten wrong join tokens in a row from one address: the first five are answered at
    once, the next five after 0.1, 0.2, 0.4, 0.8 and 1.6 s (a little less: failures
    weigh less as they age), and the log has one line for all ten."""
    book = FailureBook()
    held = sum(book.failed("x", now=0.0).delay_s for _ in range(10))
    assert held == pytest.approx(3.1)
    started = time.monotonic()
    for _ in range(10):
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await coordinator.connect(token=WRONG)
    assert time.monotonic() - started >= 0.9 * held
    lines = [r.getMessage() for r in allot_logs.records if r.name == "allot.coordinator.auth"]
    assert lines == ["authentication failed"]
    assert await failures(coordinator) == {"join_token": 10.0}
    # A right token from that address is not held back.
    await register(coordinator)


async def test_many_wrong_tokens_at_once_are_each_counted_and_logged_once(
    coordinator: Coordinator, allot_logs: pytest.LogCaptureFixture
) -> None:
    async def wrong() -> int:
        return (await coordinator.get("/v1/nodes", token=WRONG)).status

    assert await asyncio.gather(*(wrong() for _ in range(40))) == [401] * 40
    assert await failures(coordinator) == {"api_token": 40.0}
    lines = [r for r in allot_logs.records if r.name == "allot.coordinator.auth"]
    assert len(lines) == 1


async def test_the_rest_of_a_minute_is_logged_when_it_is_over(
    allot_logs: pytest.LogCaptureFixture,
) -> None:
    """With a period of 0.2 s: one line at once for the first failure, and one for the
    two after it once the period is over, with no failure to trigger it."""
    registry = CollectorRegistry()
    counter = Counter("failures", "test", ["kind"], registry=registry)
    refusals = AuthRefusals(counter, FailureBook(log_every_s=0.2))
    for _ in range(3):
        await refusals.refused("api_token", "10.0.0.7")

    def lines() -> list[object]:
        records = allot_logs.records
        return [fields_of(r)["failures"] for r in records if r.name == "allot.coordinator.auth"]

    deadline = time.monotonic() + 5.0
    while len(lines()) < 2:
        assert time.monotonic() < deadline, f"no second line: {lines()}"
        await asyncio.sleep(0.02)
    assert lines() == [1, 2]
    assert registry.get_sample_value("failures_total", {"kind": "api_token"}) == 3
