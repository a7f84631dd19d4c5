"""A lost node's containers: kept for the grace period, then released in one commit with
the ones whose restart policy asks for it placed again elsewhere; the node, when it
returns, is told to hold nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.coordinator.conftest import (
    API_TOKEN,
    Coordinator,
    config_for,
    frame,
    hello,
    receive_frame,
    register,
    start,
)

GRACE_SECONDS = 0.5
DEPLOYMENTS = "/v1/namespaces/team-a/deployments"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Coordinator]:
    config = config_for(
        tmp_path, lease_seconds=0.6, heartbeat_seconds=0.2, lost_node_grace_seconds=GRACE_SECONDS
    )
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


async def beating(ws: aiohttp.ClientWebSocketResponse) -> None:
    with contextlib.suppress(ConnectionError):
        while not ws.closed:
            await ws.send_bytes(frame("heartbeat"))
            await asyncio.sleep(0.1)


async def post(coordinator: Coordinator, path: str, body: object) -> Any:
    response = await coordinator.http.post(
        coordinator.url + path, json=body, headers={"Authorization": f"Bearer {API_TOKEN}"}
    )
    assert response.status == 201, await response.text()
    return await response.json()


def one(name: str, policy: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "count": 1,
        "cpu_bind": True,
        "resources": {"cpu": "1", "memory": "64Mi"},
        "restart_policy": policy,
    }


async def test_a_lost_nodes_containers_leave_stand_ins_placed_elsewhere_after_the_grace(
    cluster: Coordinator,
) -> None:
    node_a = await register(cluster, "node-a")
    keep_a = asyncio.create_task(beating(node_a))
    placed = {
        name: (await post(cluster, DEPLOYMENTS, one(name, policy)))["containers"][0]["record"]
        for name, policy in (("keep", "always"), ("once", "no"))
    }
    assert {record["node"] for record in placed.values()} == {"node-a"}
    node_b = await register(cluster, "node-b")
    keep_b = asyncio.create_task(beating(node_b))
    keep_a.cancel()  # node-a falls silent: lost after its lease, released after the grace

    async def containers() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = [
            view["record"] for view in (await cluster.get_json("/v1/containers"))["containers"]
        ]
        return found

    lost_at = asyncio.get_running_loop().time()
    for _ in range(200):
        current = await containers()
        if current and all(record["node"] == "node-b" for record in current):
            break
        await asyncio.sleep(0.05)
    assert asyncio.get_running_loop().time() - lost_at >= GRACE_SECONDS
    # Each keeps its deployment's count, whatever its restart policy: a stand-in.
    assert sorted(record["deployment"] for record in current) == ["keep", "once"]
    assert not {record["id"] for record in current} & {r["id"] for r in placed.values()}
    for again in current:
        old = placed[again["deployment"]]["id"]
        cause = f"in place of {old} (node node-a lost for more than {GRACE_SECONDS:g}s)"
        assert again["history"][0]["detail"] == f"on node-b, {cause}"
    # node-a comes back: told to hold nothing
    returning = await cluster.connect()
    await returning.send_bytes(hello("node-a"))
    welcome = await receive_frame(returning)
    assert welcome["containers"] == []
    # and node-b was told to run the replacement
    while (pushed := await receive_frame(node_b))["type"] != "desired":
        pass
    assert sorted(c["id"] for c in pushed["containers"]) == sorted(r["id"] for r in current)
    keep_b.cancel()
    for ws in (node_a, node_b, returning):
        await ws.close()
