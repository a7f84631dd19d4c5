"""A removal's answer waits for the hosts concerned (coordinator.host_acks), over the real
API and agent sockets: a delete is answered once the node's agent acknowledged the
revision that removed the container; past removal_ack_seconds it is answered all the
same and says so; a node not connected, or whose agent does not acknowledge, holds
nothing; deletes, scales and drains sent together are each answered after their hosts
acknowledged. And a stopping container is let go on a report whose list was taken after
the agent acknowledged its removal, though the node's applied revision stays behind (a
container that keeps failing holds the node's passes back)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.keys import DEPLOYMENTS as SERVICE
from coordinator.keys import HUB
from shared.logs import fields_of
from tests.coordinator.conftest import (
    Coordinator,
    config_for,
    frame,
    hello,
    receive_frame,
    register,
    start,
)
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call, spec
from tests.coordinator.test_pending import assert_memory_is_the_store
from tests.coordinator.test_stopping_api import whole_cores

WAIT_LONG = 60.0  # a bound no test reaches unless the answer path is broken


@contextlib.asynccontextmanager
async def coordinator_with(tmp_path: Path, bound: float) -> AsyncIterator[Coordinator]:
    config = config_for(
        tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0, removal_ack_seconds=bound
    )
    runner, url = await start(config)
    try:
        async with aiohttp.ClientSession() as http:
            yield Coordinator(url=url, app=runner.app, http=http)
    finally:
        await runner.cleanup()


@pytest.fixture
async def waiting(tmp_path: Path) -> AsyncIterator[Coordinator]:
    async with coordinator_with(tmp_path, WAIT_LONG) as cluster:
        yield cluster


async def acknowledging(cluster: Coordinator, node: str) -> aiohttp.ClientWebSocketResponse:
    """An agent's socket whose hello says it acknowledges."""
    ws = await cluster.connect()
    await ws.send_bytes(hello(node, acknowledges=True))
    welcome = await receive_frame(ws)
    assert welcome["type"] == "welcome", welcome
    await acknowledge(ws, welcome["revision"])
    return ws


async def acknowledge(ws: aiohttp.ClientWebSocketResponse, revision: int) -> None:
    await ws.send_bytes(frame("heartbeat", applied_revision=0, acknowledged_revision=revision))


async def next_desired(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    while (received := await receive_frame(ws))["type"] != "desired":
        pass
    return received


async def acknowledge_all(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Acknowledge every desired state as it comes, until the socket closes."""
    with contextlib.suppress(AssertionError, ConnectionError):
        while True:
            await acknowledge(ws, (await next_desired(ws))["revision"])


async def test_a_delete_is_answered_once_its_node_acknowledged(waiting: Coordinator) -> None:
    ws = await acknowledging(waiting, "node-a")
    status, placed = await call(waiting, "POST", DEPLOYMENTS, whole_cores("web", 2))
    assert status == 201, placed
    await acknowledge(ws, (await next_desired(ws))["revision"])

    answer = asyncio.create_task(call(waiting, "DELETE", f"{DEPLOYMENTS}/web"))
    desired = await next_desired(ws)  # the delete is committed and sent
    assert desired["containers"] == []
    acks = waiting.app[HUB].acks
    assert acks.holding({"node-a": desired["revision"]}) == ["node-a"]
    assert not answer.done()
    await acknowledge(ws, desired["revision"])
    status, deleted = await answer
    assert status == 200, deleted
    assert deleted["hosts_acknowledged"] is True
    assert len(deleted["containers"]) == 2
    await ws.close()


async def test_past_the_bound_the_answer_goes_out_and_says_so(
    tmp_path: Path, allot_logs: pytest.LogCaptureFixture
) -> None:
    async with coordinator_with(tmp_path, 0.2) as cluster:
        ws = await acknowledging(cluster, "node-a")
        status, placed = await call(cluster, "POST", DEPLOYMENTS, whole_cores("web", 1))
        assert status == 201, placed
        (container,) = placed["containers"]
        status, deleted = await call(
            cluster, "DELETE", f"/v1/containers/{container['record']['id']}"
        )
        assert status == 200, deleted
        assert deleted["hosts_acknowledged"] is False
        (line,) = [r for r in allot_logs.records if r.getMessage().startswith("answered before")]
        assert line.levelno == logging.WARNING
        assert fields_of(line)["nodes"] == "node-a"
        await ws.close()


async def test_a_node_that_does_not_acknowledge_or_is_gone_holds_nothing(
    waiting: Coordinator,
) -> None:
    older = await register(waiting, "node-a")  # an agent that does not say it acknowledges
    status, placed = await call(waiting, "POST", DEPLOYMENTS, whole_cores("web", 2))
    assert status == 201, placed
    status, scaled = await call(waiting, "POST", f"{DEPLOYMENTS}/web/scale", {"count": 1})
    assert status == 200, scaled
    assert scaled["hosts_acknowledged"] is True
    await older.close()

    ws = await acknowledging(waiting, "node-a")  # now one that does, and leaves mid-wait
    answer = asyncio.create_task(call(waiting, "DELETE", f"{DEPLOYMENTS}/web"))
    await next_desired(ws)
    await ws.close()
    status, deleted = await answer
    assert status == 200, deleted
    assert deleted["hosts_acknowledged"] is True


async def test_removals_at_once_are_each_answered_after_their_hosts_acknowledged(
    waiting: Coordinator,
) -> None:
    sockets = {node: await acknowledging(waiting, node) for node in ("node-a", "node-b")}
    agents = [asyncio.create_task(acknowledge_all(ws)) for ws in sockets.values()]
    for name in ("web", "api", "db"):
        status, answer = await call(waiting, "POST", DEPLOYMENTS, spec(name, count=2))
        assert status == 201, answer
    service = waiting.app[SERVICE]
    ids = sorted(c.id for c in service.containers())
    answers = await asyncio.gather(
        *(call(waiting, "DELETE", f"/v1/containers/{cid}") for cid in ids[:3]),
        call(waiting, "DELETE", f"{DEPLOYMENTS}/api"),
        call(waiting, "POST", f"{DEPLOYMENTS}/db/scale", {"count": 1}),
        call(waiting, "POST", "/v1/nodes/node-b/drain"),
    )
    for status, body in answers:
        assert status in (200, 404), body  # a container the deployment's delete took first
        if status == 200:
            assert body["hosts_acknowledged"] is True, body
    acks = waiting.app[HUB].acks
    assert acks.holding(service.node_revisions(sockets)) == []
    for ws in sockets.values():
        await ws.close()
    await asyncio.gather(*agents)
    await assert_memory_is_the_store(waiting)


async def stopping_ids(cluster: Coordinator) -> list[str]:
    found = await cluster.get_json("/v1/containers?state=stopping&node=node-a")
    return [view["record"]["id"] for view in found["containers"]]


async def until(check: Callable[[], Any], seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not within the time")


async def test_a_stopping_container_goes_on_its_own_report_while_another_keeps_failing(
    waiting: Coordinator,
) -> None:
    ws = await acknowledging(waiting, "node-a")
    for name in ("stuck", "web"):
        status, placed = await call(waiting, "POST", DEPLOYMENTS, whole_cores(name, 1))
        assert status == 201, placed
        await acknowledge(ws, (await next_desired(ws))["revision"])
    service = waiting.app[SERVICE]
    (stuck,) = [c.id for c in service.of_deployment("team-a", "stuck")]
    (web_id,) = [c.id for c in service.of_deployment("team-a", "web")]
    applied = service.node_revisions(["node-a"])["node-a"]  # before the delete

    answer = asyncio.create_task(call(waiting, "DELETE", f"{DEPLOYMENTS}/web"))
    removed = (await next_desired(ws))["revision"]
    failing = {"id": stuck, "state": "created", "error": "start failed: no such binary"}

    # A list taken before the agent acknowledged the delete frees nothing.
    before = frame("status", applied_revision=applied, listed_after=applied, containers=[failing])
    await ws.send_bytes(before)
    await service.quiet()
    await service.settled()
    assert await stopping_ids(waiting) == [web_id]

    await acknowledge(ws, removed)
    assert (await answer)[1]["hosts_acknowledged"] is True
    # The node's passes keep failing (applied stays behind), but the list was taken after
    # the acknowledgement and web's container is not on it: it is gone.
    after = frame("status", applied_revision=applied, listed_after=removed, containers=[failing])
    await ws.send_bytes(after)

    async def let_go() -> bool:
        return await stopping_ids(waiting) == []

    await until(let_go)
    status, placed = await call(waiting, "POST", DEPLOYMENTS, whole_cores("next", 1))
    assert status == 201, placed  # the room web held is free
    await ws.close()
