"""Pools on containers: a pool's demand comes from its containers, and its unbound
containers' CPU weights follow the pool's fair share of the cluster's cores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.config import PoolSettings
from tests.coordinator.conftest import (
    API_TOKEN,
    Coordinator,
    config_for,
    frame,
    receive_frame,
    register,
    start,
)


@pytest.fixture
async def fast_pools(tmp_path: Path) -> AsyncIterator[Coordinator]:
    config = config_for(
        tmp_path,
        lease_seconds=60.0,
        heartbeat_seconds=20.0,
        pools=PoolSettings(fair_share_update_period=0.05),
    )
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


async def call(coordinator: Coordinator, method: str, path: str, body: object = None) -> Any:
    response = await coordinator.http.request(
        method, coordinator.url + path, json=body, headers={"Authorization": f"Bearer {API_TOKEN}"}
    )
    assert response.status < 300, await response.text()
    return await response.json()


def unbound(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "count": 2,
        "cpu_bind": False,
        "resources": {"cpu": "1", "memory": "32Mi"},
    }


async def oversell(coordinator: Coordinator, node: str, ratio: str) -> None:
    """Let the node's unbound containers request ``ratio`` times its shared pool."""
    path = f"/v1/nodes/{node}/capacity"
    await call(coordinator, "PATCH", path, {"mode": "delta", "cpu_overcommit": ratio})


async def test_two_equal_pools_split_the_cores_and_their_containers_weights_follow(
    fast_pools: Coordinator,
) -> None:
    ws = await register(fast_pools, "node-a")  # 2 cores
    await oversell(fast_pools, "node-a", "2")  # four containers of one core each
    for team in ("team-a", "team-b"):
        await call(fast_pools, "PUT", f"/v1/pools/{team}", {"weight": 1.0})
        await call(fast_pools, "POST", f"/v1/namespaces/{team}/deployments", unbound("batch"))
    limits: list[tuple[int, int]] = []

    async def refresh() -> None:
        views = (await call(fast_pools, "GET", "/v1/containers"))["containers"]
        limits[:] = [
            (view["record"]["limits"]["cpu_shares"], view["record"]["limits"]["cpu_quota"])
            for view in views
        ]

    for _ in range(100):
        await refresh()
        if limits == [(512, 100_000)] * 4:
            break
        await asyncio.sleep(0.05)
    # each pool's share is one of the two cores, split between its two containers as
    # weights (half a core's each); the quota stays each container's own limit
    assert limits == [(512, 100_000)] * 4
    shown = await call(fast_pools, "GET", "/v1/pools/team-a")
    assert shown["share"]["total"] == pytest.approx(0.5)
    while (frame := await receive_frame(ws))["type"] != "desired" or any(
        c["limits"]["cpu_shares"] != 512 for c in frame["containers"]
    ):
        pass
    record = (await call(fast_pools, "GET", "/v1/containers"))["containers"][0]["record"]
    assert record["history"][-1] == {
        "at": record["history"][-1]["at"],
        "event": "pool share",
        "detail": "cpu_shares 1024 -> 512",
    }
    await ws.close()


async def test_a_pool_limit_refuses_a_deployment_beyond_it_over_the_whole_subtree(
    fast_pools: Coordinator,
) -> None:
    ws = await register(fast_pools, "node-a")
    await call(fast_pools, "PUT", "/v1/pools/research", {"resource_limits": {"cpu": 2.5}})
    await call(fast_pools, "PUT", "/v1/pools/team-a", {"parent": "research"})
    await call(fast_pools, "POST", "/v1/namespaces/team-a/deployments", unbound("batch"))
    response = await fast_pools.http.post(
        fast_pools.url + "/v1/namespaces/team-a/deployments",
        json=unbound("more") | {"count": 1},
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    refused = await response.json()
    assert response.status == 403, refused
    assert refused["error"]["code"] == "pool_limit_exceeded"
    assert refused["error"]["details"] == {
        "reason": "pool",
        "pool": "research",
        "resource": "cpu",
        "used": 2.0,
        "limit": 2.5,
    }
    await ws.close()


async def test_a_node_whose_containers_changed_without_its_allocation_takes_new_ones(
    fast_pools: Coordinator,
) -> None:
    """A pool share rewrites containers' limits but not the node's allocation record; the
    next placement on that node must not mistake that for another writer."""
    ws = await register(fast_pools, "node-a")
    await oversell(fast_pools, "node-a", "3")
    for team in ("team-a", "team-b"):
        await call(fast_pools, "PUT", f"/v1/pools/{team}", {"weight": 1.0})
        await call(fast_pools, "POST", f"/v1/namespaces/{team}/deployments", unbound("batch"))
    for _ in range(100):
        views = (await call(fast_pools, "GET", "/v1/containers"))["containers"]
        if all(view["record"]["limits"]["cpu_shares"] == 512 for view in views):
            break
        await asyncio.sleep(0.05)
    more = unbound("more") | {"count": 1, "resources": {"cpu": "0.1", "memory": "16Mi"}}
    await call(fast_pools, "POST", "/v1/namespaces/team-a/deployments", more)
    await ws.close()


async def test_a_pools_usage_is_what_its_agents_measure(fast_pools: Coordinator) -> None:
    ws = await register(fast_pools, "node-a")  # 2 cores
    await call(fast_pools, "PUT", "/v1/pools/team-a", {"weight": 1.0})
    placed = await call(fast_pools, "POST", "/v1/namespaces/team-a/deployments", unbound("batch"))
    ids = [view["record"]["id"] for view in placed["containers"]]

    async def usage_share() -> float | None:
        shown = await call(fast_pools, "GET", "/v1/pools/team-a")
        share: float | None = shown["introspection"]["usage_share"]  # None before an update
        return share

    async def settles_at(expected: float) -> None:
        for _ in range(100):
            if await usage_share() == pytest.approx(expected):
                return
            await asyncio.sleep(0.05)
        assert await usage_share() == pytest.approx(expected)

    # Not measured yet: each container counts what it asks for, 1 core each of 2.
    await settles_at(1.0)
    measured = [
        {"id": cid, "state": "running", "cpu_usage": 0.25, "memory_usage": 8 << 20} for cid in ids
    ]
    await ws.send_bytes(frame("status", applied_revision=1, containers=measured))
    await settles_at(0.25)  # 0.5 cores of 2 is the dominant share (memory is far less)
    await ws.close()


async def test_a_container_reported_not_running_charges_its_pool_nothing(
    fast_pools: Coordinator,
) -> None:
    ws = await register(fast_pools, "node-a")  # 2 cores
    await call(fast_pools, "PUT", "/v1/pools/team-a", {"weight": 1.0})
    placed = await call(fast_pools, "POST", "/v1/namespaces/team-a/deployments", unbound("batch"))
    running, down = (view["record"]["id"] for view in placed["containers"])
    reported = [
        {"id": running, "state": "running", "cpu_usage": 0.5, "memory_usage": 8 << 20},
        # exited, failed to be made, not made yet: nothing measured, and nothing used
        {"id": down, "state": "exited", "exit_code": 1},
    ]
    await ws.send_bytes(frame("status", applied_revision=1, containers=reported))
    for state in ("exited", "failed", "missing"):
        reported[1] = {"id": down, "state": state}
        await ws.send_bytes(frame("status", applied_revision=1, containers=reported))
        for _ in range(100):
            shown = await call(fast_pools, "GET", "/v1/pools/team-a")
            if shown["introspection"]["usage_share"] == pytest.approx(0.25):
                break
            await asyncio.sleep(0.05)
        # 0.5 cores of 2: the one running, and nothing for the other (not its 1 core)
        assert shown["introspection"]["usage_share"] == pytest.approx(0.25), state
    await ws.close()


async def test_weights_settle_on_the_fair_shares_after_concurrent_deploys(
    fast_pools: Coordinator,
) -> None:
    """Deploys racing the pool update (every 0.05 s): once they are all in, every
    unbound container's weight is its part of its pool's fair share."""
    ws = await register(fast_pools, "node-a")  # 2 cores
    await oversell(fast_pools, "node-a", "2")
    for team in ("team-a", "team-b"):
        await call(fast_pools, "PUT", f"/v1/pools/{team}", {"weight": 1.0})
    half = {"count": 2, "resources": {"cpu": "0.5", "memory": "16Mi"}}
    bodies = [("team-a", unbound(f"batch-{i}") | half) for i in range(3)]
    bodies.append(("team-b", unbound("batch") | half | {"count": 1}))
    await asyncio.gather(
        *(call(fast_pools, "POST", f"/v1/namespaces/{ns}/deployments", body) for ns, body in bodies)
    )
    # 3.5 cores asked of 2: team-b gets its 0.5, team-a the other 1.5 over six containers
    wanted = {"team-a": 256, "team-b": 512}
    seen: dict[str, list[int]] = {}
    for _ in range(200):
        views = (await call(fast_pools, "GET", "/v1/containers"))["containers"]
        seen = {ns: [] for ns in wanted}
        for view in views:
            seen[view["record"]["namespace"]].append(view["record"]["limits"]["cpu_shares"])
        if seen == {"team-a": [256] * 6, "team-b": [512]}:
            break
        await asyncio.sleep(0.05)
    assert seen == {"team-a": [256] * 6, "team-b": [512]}
    await ws.close()


async def test_namespaces_without_a_configured_pool_get_pools_on_demand_and_weights(
    fast_pools: Coordinator,
) -> None:
    """team-a's pool is configured, team-b's and team-c's are not (each deployment names
    its namespace's pool): deployed at once, the three pools are top-level pools of
    weight 1 and share the 2 cores by thirds, so no container keeps Docker's 1024."""
    ws = await register(fast_pools, "node-a")  # 2 cores
    await oversell(fast_pools, "node-a", "2")
    await call(fast_pools, "PUT", "/v1/pools/team-a", {"weight": 1.0})
    half = {"resources": {"cpu": "0.5", "memory": "16Mi"}}
    teams = ("team-a", "team-b", "team-c")
    await asyncio.gather(
        *(
            call(fast_pools, "POST", f"/v1/namespaces/{team}/deployments", unbound("batch") | half)
            for team in teams
        )
    )
    wanted = {team: [341, 341] for team in teams}  # 2/3 core each pool, 1/3 a container
    seen: dict[str, list[int]] = {}
    for _ in range(200):
        views = (await call(fast_pools, "GET", "/v1/containers"))["containers"]
        seen = {team: [] for team in teams}
        for view in views:
            seen[view["record"]["namespace"]].append(view["record"]["limits"]["cpu_shares"])
        if seen == wanted:
            break
        await asyncio.sleep(0.05)
    assert seen == wanted
    listed = {pool["name"]: pool for pool in (await call(fast_pools, "GET", "/v1/pools"))["pools"]}
    assert {name: listed[name]["config"] for name in teams} == {
        "team-a": {"weight": 1.0},
        "team-b": {},
        "team-c": {},
    }
    assert listed["team-c"]["share"]["total"] == pytest.approx(1 / 3)
    await ws.close()
