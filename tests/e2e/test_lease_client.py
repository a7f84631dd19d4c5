"""The lease client library against a real coordinator process that goes away and
comes back: the grant, the fall-back to safe capacity, and the recovery."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.lease_client import LeaseClient
from shared.rate_limiter import RateLimiter
from tests.e2e.processes import API_TOKEN, Service
from tests.polling import eventually

pytestmark = pytest.mark.e2e

TEMPLATES = """
[[resources]]
identifier_glob = "db.write"
capacity = 100
safe_capacity = 5
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 2
refresh_interval = 1
learning_mode_duration = 0
"""


@pytest.fixture
def lease_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    logger = logging.getLogger("allot")
    propagate = logger.propagate
    logger.propagate = True
    caplog.set_level(logging.INFO, logger="allot")
    yield caplog
    logger.propagate = propagate


async def test_the_client_uses_safe_capacity_while_the_coordinator_is_away(
    tmp_path: Path, lease_log: pytest.LogCaptureFixture
) -> None:
    first = Service.coordinator(tmp_path, toml=TEMPLATES).start()
    try:
        server = first.wait_for(r"coordinator listening url=(\S+)").group(1)
        async with LeaseClient(
            server, token=API_TOKEN, min_refresh_interval=0.2, backoff_base=0.05, backoff_cap=0.2
        ) as client:
            writes = await client.resource("db.write", 50)
            await eventually(lambda: writes.capacity == 50)
            assert writes.safe_capacity == 5

            first.kill9()
            await eventually(lambda: writes.capacity == 5, within=6)  # lease_length 2 s
            assert "lease expired without a refresh; using safe capacity" in lease_log.text

            port = server.rsplit(":", 1)[1]
            second = Service.coordinator(tmp_path, port=int(port), toml=TEMPLATES).start()
            try:
                second.wait_for("coordinator listening")
                await eventually(lambda: writes.capacity == 50, within=6)
                limiter = RateLimiter(writes)
                for _ in range(10):
                    await limiter.acquire()
            finally:
                second.stop()
    finally:
        if first.process is not None and first.process.poll() is None:
            first.kill9()
