"""Abuse, against a real coordinator process over real sockets (issue 25): 3,000
connections that send half a request header and 2,000 websocket upgrades without a
token, while an authenticated client works. The client is served all along: every one
of its requests is answered, and while the abuse lasts it gets answers at a rate within
``SLOWDOWN_BOUND`` of its own rate alone just before; every idle socket is closed by
the server once the header timeout has passed (counted here, from the client side); the
log stays small. And a small ``max_connections`` turns the connection past it away at
once.

The client's latency under the abuse is a figure of ``bench/doors.py``, not asserted
here: it is the machine's speed as much as the coordinator's.

The header timeout is lowered to keep the test short; its default (10 s) is checked in
tests/coordinator/test_doors.py.
"""

from __future__ import annotations

import asyncio
import re
import resource
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.doors import answered_within, closed_after, working_client
from tests.e2e.processes import API_TOKEN, Service

pytestmark = pytest.mark.e2e

HEADER_TIMEOUT = 2.0
HALF_HEADERS = 3000
UPGRADES = 2000
WAVE, WAVE_GAP = 100, 0.04
# How long past its bound a close may come on a loaded two-core machine.
SLACK = 10.0
ALONE_SECONDS = 1.0  # the client's rate alone is measured over this, just before the abuse
# How many times fewer answers a second the client may get while abused than alone: a
# coordinator that stopped serving it until the abusers are gone gives it about none in
# the 4 s or more the abuse lasts (12-14 s here), where it gets about 75 a second alone;
# one that serves it gave 3.1 to 5.5 times fewer over three runs at load average 7.5-8.
SLOWDOWN_BOUND = 20
HALF_HEADER = b"GET /v1/nodes HTTP/1.1\r\nHost: e2e\r\nAuthoriz"
UPGRADE = (
    b"GET /v1/agent HTTP/1.1\r\nHost: e2e\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: allot.v1\r\n\r\n"
)


@pytest.fixture
def open_files() -> Iterator[None]:
    """This process holds 5,000 sockets at once: the soft open-files limit raised to the
    hard one, and put back afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HALF_HEADERS + UPGRADES + 500:
        pytest.fail(f"the open-files hard limit ({hard}) is below what the test holds")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def start(tmp_path: Path, services: list[Service], *flags: str) -> tuple[Service, str]:
    coordinator = Service.coordinator(
        tmp_path, args=(f"--header-timeout-seconds={HEADER_TIMEOUT}", *flags)
    ).start()
    services.append(coordinator)
    return coordinator, coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)


async def hold(host: str, port: int, request: bytes) -> float | None:
    """One connection that sends ``request`` and nothing more: how long after it was
    opened the server closed it (None: it did not)."""
    opened = time.monotonic()  # the server's clock for it starts later, when it accepts
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request)
    try:
        before = time.monotonic() - opened
        waited = await closed_after(reader, within=HEADER_TIMEOUT + SLACK - before)
    finally:
        writer.close()
    return None if waited is None else before + waited


async def abuse(host: str, port: int) -> tuple[list[float | None], list[float | None]]:
    """The half-header connections, then the upgrades, opened in waves of ``WAVE`` every
    ``WAVE_GAP`` seconds (2 s for all 5,000): a flood that this process can send without
    taking the cores of the two machines' worth of work it shares them with."""
    requests = [HALF_HEADER] * HALF_HEADERS + [UPGRADE] * UPGRADES
    held = []
    for start in range(0, len(requests), WAVE):
        held += [asyncio.create_task(hold(host, port, r)) for r in requests[start : start + WAVE]]
        await asyncio.sleep(WAVE_GAP)
    results = await asyncio.gather(*held)
    return results[:HALF_HEADERS], results[HALF_HEADERS:]


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found, f"{name} not in /metrics:\n{text}"
    return float(found.group(1))


async def test_idle_and_unauthenticated_sockets_are_closed_while_a_client_works(
    tmp_path: Path, services: list[Service], open_files: None
) -> None:
    coordinator, url = start(tmp_path, services)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    log_before = len(coordinator.text().splitlines())
    async with working_client(url, API_TOKEN) as timed:  # answered 200, every request
        alone = time.monotonic()
        await asyncio.sleep(ALONE_SECONDS)
        abused = time.monotonic()
        half_headers, upgrades = await abuse(host, int(port))
        ended = time.monotonic()  # every abusive socket closed (or given up on)

    assert None not in half_headers, f"{half_headers.count(None)} half-header sockets open"
    # Closed for the header timeout, not before it.
    assert min(t for t in half_headers if t is not None) >= HEADER_TIMEOUT * 0.9
    assert None not in upgrades, f"{upgrades.count(None)} refused upgrades still open"
    rate_alone = len(answered_within(timed, alone, abused)) / (abused - alone)
    rate_abused = len(answered_within(timed, abused, ended)) / (ended - abused)
    assert rate_abused * SLOWDOWN_BOUND >= rate_alone, (
        f"the client got {rate_abused:.1f} answers a second while abused,"
        f" {rate_alone:.1f} alone ({len(timed)} requests in all)"
    )

    assert metric(url, 'allot_auth_failures_total{kind="join_token"}') == UPGRADES
    assert metric(url, "allot_connections_header_timeouts_total") == HALF_HEADERS
    # One source, within a minute: one line for its failures, one for the timeouts.
    logged = coordinator.text().splitlines()[log_before:]
    assert [line for line in logged if "authentication failed" in line] == [
        next(line for line in logged if "authentication failed" in line)
    ]
    assert len(logged) <= 5, "\n".join(logged)


async def test_past_max_connections_a_connection_is_turned_away_at_once(
    tmp_path: Path, services: list[Service]
) -> None:
    coordinator, url = start(tmp_path, services, "--max-connections=20")
    host, port = url.removeprefix("http://").rsplit(":", 1)
    held = [await asyncio.open_connection(host, int(port)) for _ in range(20)]
    coordinator.wait_for(r"max_connections=20")  # the start-up line says the cap in force
    extra, _ = await asyncio.open_connection(host, int(port))
    assert await extra.read() == b""  # closed at once: well before the header timeout
    coordinator.wait_for(r"connections refused: max_connections are open refused=1")
    for _, writer in held:
        writer.close()
    # Once they are given back, others are served again (urllib's own connection).
    deadline = time.monotonic() + SLACK
    while healthz_or_none(url) is None:
        assert time.monotonic() < deadline, "never served again"
        await asyncio.sleep(0.1)
    assert metric(url, "allot_connections_refused_total") >= 1


def healthz_or_none(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return None
