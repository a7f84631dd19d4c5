"""A deployment keeps its count (issue 17, item 1): drain, a deleted container and a lost
node leave pending stand-ins with the reason; the scheduler places them when room
appears; only scaling and deleting the deployment lower the count. Over real HTTP, with
memory checked against the store, also when the requests come at once and across a
restart; and a dry run answers what a deploy would do and changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from coordinator.keys import DEPLOYMENTS as SERVICE
from tests.coordinator.conftest import (
    NAMESPACE,
    Coordinator,
    config_for,
    register,
    report_caught_up,
    start,
)
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call, next_desired, spec

WEB = f"{DEPLOYMENTS}/web"
NO_NODE = "needs 0.5 CPU + 64Mi on one node; no node takes containers: 1 cordoned (node-a)"


async def containers_of(cluster: Coordinator, path: str = WEB) -> list[dict[str, Any]]:
    """The deployment's containers, placed and pending (not those stopping)."""
    status, view = await call(cluster, "GET", path)
    assert status == 200, view
    found: list[dict[str, Any]] = view["containers"]
    return [view for view in found if view["state"] != "stopping"]


async def stopping_of(cluster: Coordinator, path: str = WEB) -> list[dict[str, Any]]:
    status, view = await call(cluster, "GET", path)
    assert status == 200, view
    return [view for view in view["containers"] if view["state"] == "stopping"]


async def placed_within(cluster: Coordinator, count: int, seconds: float = 5.0) -> None:
    """Wait until the deployment has ``count`` containers on nodes (a scheduler pass)."""
    for _ in range(int(seconds / 0.02)):
        views = await containers_of(cluster)
        if sum(1 for view in views if view["record"]["node"]) == count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not placed within {seconds}s: {views}")


async def assert_memory_is_the_store(cluster: Coordinator) -> None:
    """Placed and pending containers as the API shows them are what the store holds, and
    every deployment counts what it was scaled to."""
    service = cluster.app[SERVICE]
    await service.quiet()  # a pass an uncordon started may still be committing
    stored = await cluster.stored("/containers/")
    assert {record.id for record in service.containers()} == {v["id"] for v in stored.values()}
    pending = await cluster.stored("/pending/")
    assert {record.id for record in service.all_pending()} == {v["id"] for v in pending.values()}
    for deployment in service.deployments():
        key = (deployment.namespace, deployment.spec.name)
        held = len(service.of_deployment(*key)) + len(service.pending_of(*key))
        assert held == deployment.spec.count, key
    service.check_indexes()


async def test_a_drain_with_nowhere_to_go_leaves_pending_stand_ins_placed_on_uncordon(
    cluster: Coordinator,
) -> None:
    """Was: "2 container(s) moved: ... -> nowhere", exit 0, and COUNT 2 with 0 running
    for good, also after an uncordon."""
    ws = await register(cluster, "node-a")
    assert (await call(cluster, "POST", DEPLOYMENTS, spec()))[0] == 201
    await next_desired(ws)
    status, drained = await call(cluster, "POST", "/v1/nodes/node-a/drain")
    assert status == 200, drained
    assert (len(drained["stand_ins"]), drained["placed"]) == (2, {})
    assert sorted(drained["pending"]) == sorted(drained["stand_ins"].values())
    assert set(drained["pending"].values()) == {NO_NODE}
    views = await containers_of(cluster)
    assert [(v["state"], v["record"]["node"], v["reason"]) for v in views] == [
        ("pending", "", NO_NODE)
    ] * 2
    one = views[0]["record"]["id"]
    status, shown = await call(cluster, "GET", f"/v1/containers/{one}")
    assert (status, shown["state"], shown["reason"]) == (200, "pending", NO_NODE)
    listed = (await call(cluster, "GET", "/v1/containers?state=pending"))[1]["containers"]
    assert len(listed) == 2
    assert (await next_desired(ws))["containers"] == []
    stopping = await stopping_of(cluster)
    assert sorted(v["record"]["id"] for v in stopping) == sorted(drained["stand_ins"])
    await assert_memory_is_the_store(cluster)
    await report_caught_up(cluster, ws)  # the drained ones are gone from the host
    assert await stopping_of(cluster) == []

    assert (await call(cluster, "POST", "/v1/nodes/node-a/uncordon"))[0] == 200
    await placed_within(cluster, 2)
    views = await containers_of(cluster)
    assert sorted(v["record"]["id"] for v in views) == sorted(drained["pending"])
    assert {v["record"]["node"] for v in views} == {"node-a"}
    assert sorted(c["id"] for c in (await next_desired(ws))["containers"]) == sorted(
        drained["pending"]
    )
    await assert_memory_is_the_store(cluster)
    await ws.close()


async def test_scaling_down_takes_pending_containers_first_and_they_cannot_be_deleted(
    cluster: Coordinator,
) -> None:
    """Was: ``scale web 1`` on the drained deployment was a no-op."""
    ws = await register(cluster, "node-a")
    await call(cluster, "POST", DEPLOYMENTS, spec(count=3))
    await call(cluster, "POST", "/v1/nodes/node-a/drain")
    pending = [v["record"]["id"] for v in await containers_of(cluster)]
    status, answer = await call(cluster, "DELETE", f"/v1/containers/{pending[0]}")
    assert (status, answer["error"]["code"]) == (409, "container_pending")
    status, scaled = await call(cluster, "POST", f"{WEB}/scale", {"count": 1})
    assert status == 200, scaled
    left = await containers_of(cluster)
    assert [v["state"] for v in left] == ["pending"]
    await assert_memory_is_the_store(cluster)
    await call(cluster, "POST", "/v1/nodes/node-a/uncordon")
    await placed_within(cluster, 1)
    await ws.close()


async def test_pending_containers_survive_a_restart_and_are_placed_after_it(
    tmp_path: Path,
) -> None:
    config = config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        ws = await register(cluster, "node-a")
        await call(cluster, "POST", DEPLOYMENTS, spec())
        drained = (await call(cluster, "POST", "/v1/nodes/node-a/drain"))[1]
        await ws.close()
    await runner.cleanup()
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        views = await containers_of(cluster)
        assert sorted(v["record"]["id"] for v in views) == sorted(drained["pending"])
        assert {v["state"] for v in views} == {"pending"}
        stopping = await stopping_of(cluster)  # still held: no agent said they are gone
        assert sorted(v["record"]["id"] for v in stopping) == sorted(drained["stand_ins"])
        ws = await register(cluster, "node-a")
        await report_caught_up(cluster, ws)
        await call(cluster, "POST", "/v1/nodes/node-a/uncordon")
        await placed_within(cluster, 2)
        await assert_memory_is_the_store(cluster)
        await ws.close()
    await runner.cleanup()


async def test_drains_deletes_uncordons_and_deploys_at_once_keep_every_count(
    cluster: Coordinator,
) -> None:
    """Sent together over HTTP: every deployment still counts what it was given, and
    memory (placed, pending, indexes) equals the store."""
    sockets = [await register(cluster, node) for node in ("node-a", "node-b")]
    for name in ("web", "api", "db"):
        assert (await call(cluster, "POST", DEPLOYMENTS, spec(name, count=1)))[0] == 201
    ids = [
        v["record"]["id"]
        for n in ("web", "api")
        for v in await containers_of(cluster, f"{DEPLOYMENTS}/{n}")
    ]
    requests = [
        call(cluster, "POST", "/v1/nodes/node-a/drain"),
        call(cluster, "POST", "/v1/nodes/node-b/drain"),
        *(call(cluster, "DELETE", f"/v1/containers/{cid}") for cid in ids),
        call(cluster, "POST", DEPLOYMENTS, spec("late", count=1)),
        call(cluster, "POST", "/v1/nodes/node-a/uncordon"),
        call(cluster, "POST", f"{DEPLOYMENTS}/db/scale", {"count": 3}),
    ]
    answers = await asyncio.gather(*requests)
    assert {status for status, _ in answers} <= {200, 201, 404, 409}, answers
    await assert_memory_is_the_store(cluster)
    await call(cluster, "POST", "/v1/nodes/node-a/uncordon")
    await call(cluster, "POST", "/v1/nodes/node-b/uncordon")
    for node, ws in zip(("node-a", "node-b"), sockets, strict=True):
        await report_caught_up(cluster, ws, node)
    await cluster.app[SERVICE].schedule()
    assert cluster.app[SERVICE].all_pending() == []
    await assert_memory_is_the_store(cluster)
    for ws in sockets:
        await ws.close()


async def test_a_dry_run_says_what_a_deploy_would_do_and_changes_nothing(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    events = (await call(cluster, "GET", "/v1/events"))[1]["events"]
    status, preview = await call(cluster, "POST", f"{DEPLOYMENTS}?dry_run=true", spec())
    assert status == 200, preview
    assert (preview["dry_run"], preview["preempted"]) == (True, [])
    assert [v["record"]["node"] for v in preview["containers"]] == ["node-a", "node-a"]
    assert (await call(cluster, "GET", WEB))[0] == 404
    assert (await call(cluster, "GET", "/v1/events"))[1]["events"] == events
    assert await cluster.stored("/containers/") == {}
    # One that would be refused answers the refusal, and leaves no event either.
    huge = spec("huge", count=9)
    status, refused = await call(cluster, "POST", f"{DEPLOYMENTS}?dry_run=true", huge)
    assert (status, refused["error"]["details"]["reason"]) == (409, "capacity")
    assert (await call(cluster, "GET", "/v1/events"))[1]["events"] == events
    status, bad = await call(cluster, "POST", f"{DEPLOYMENTS}?dry_run=maybe", spec())
    assert (status, bad["error"]["code"]) == (400, "invalid_request")
    # The real one places what the preview said it would.
    status, placed = await call(cluster, "POST", DEPLOYMENTS, spec())
    assert status == 201
    assert [v["record"]["node"] for v in placed["containers"]] == ["node-a", "node-a"]
    await ws.close()


async def test_a_node_that_joins_and_a_quota_raised_start_a_pass(cluster: Coordinator) -> None:
    """Pending containers are placed within one scheduler pass of room appearing: here
    a node registering, then a quota's max raised."""
    node_a = await register(cluster, "node-a")
    await call(cluster, "POST", DEPLOYMENTS, spec(count=2))
    await call(cluster, "POST", "/v1/nodes/node-a/drain")
    node_b = await register(cluster, "node-b")
    await placed_within(cluster, 2)
    assert {v["record"]["node"] for v in await containers_of(cluster)} == {"node-b"}

    quota = {"namespace": NAMESPACE, "min": {"cpu": "0"}, "max": {"cpu": "0.5"}}
    assert (await call(cluster, "PUT", f"/v1/elasticquotas/{NAMESPACE}", quota))[0] == 200
    await call(cluster, "POST", "/v1/nodes/node-a/uncordon")
    await call(cluster, "POST", "/v1/nodes/node-b/drain")
    views = await containers_of(cluster)
    assert sum(1 for v in views if v["record"]["node"]) == 1  # the quota's max: 0.5 CPU
    (waiting,) = [v for v in views if not v["record"]["node"]]
    assert "max" in waiting["reason"]
    quota["max"] = {"cpu": "1"}
    assert (await call(cluster, "PUT", f"/v1/elasticquotas/{NAMESPACE}", quota))[0] == 200
    await placed_within(cluster, 2)
    await assert_memory_is_the_store(cluster)
    for ws in (node_a, node_b):
        await ws.close()
