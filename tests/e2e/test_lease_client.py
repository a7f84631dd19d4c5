"""The lease client library against a real coordinator process: the grant, the fall-back
to safe capacity while the coordinator is away, and the recovery; clients of one id in
two namespaces."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.leases import LeaseClient, LeaseError
from client.rate_limiter import RateLimiter
from tests.e2e.processes import API_TOKEN, Service, api
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


TEAM_A_TOKEN = "e2e-team-a-token-0123456789abcdef"
NAMESPACE_TOKENS = f"""
[[namespace_tokens]]
token = "{TEAM_A_TOKEN}"
namespaces = ["team-a"]
"""


def web_7(server: str, token: str, namespace: str | None = None) -> LeaseClient:
    """A client "web-7" that waits long enough for answers on a loaded machine, so that a
    refusal reaches its caller."""
    return LeaseClient(
        server,
        token=token,
        client_id="web-7",
        namespace=namespace,
        min_refresh_interval=0.2,
        answer_wait=5.0,
    )


def lease_holders(server: str) -> dict[tuple[str, str], float]:
    """(namespace, client id) -> has, of db.write, as the admin sees them."""
    leases = api(server, "/v1/resources/db.write/leases")["leases"]
    return {(lease["namespace"], lease["client_id"]): lease["has"] for lease in leases}


async def test_one_client_id_in_two_namespaces_holds_two_leases(
    tmp_path: Path, services: list[Service]
) -> None:
    coordinator = Service.coordinator(tmp_path, toml=TEMPLATES + NAMESPACE_TOKENS).start()
    services.append(coordinator)
    server = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    team_a = web_7(server, TEAM_A_TOKEN)  # its only namespace
    team_b = web_7(server, API_TOKEN, namespace="team-b")  # an admin, for team-b
    try:
        a_writes = await team_a.resource("db.write", 70)
        b_writes = await team_b.resource("db.write", 70)
        await eventually(lambda: (a_writes.capacity, b_writes.capacity) == (50, 50))
        assert lease_holders(server) == {("team-a", "web-7"): 50, ("team-b", "web-7"): 50}

        intruder = web_7(server, TEAM_A_TOKEN, namespace="team-b")
        with pytest.raises(LeaseError) as refused:
            await intruder.resource("db.write", 100)
        await intruder.close()
        assert (refused.value.status, refused.value.code) == (403, "forbidden")

        await team_a.close()
        assert lease_holders(server) == {("team-b", "web-7"): 50}
    finally:
        await team_a.close()
        await team_b.close()
