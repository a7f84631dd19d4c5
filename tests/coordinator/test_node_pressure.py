"""A node's CPU pressure as its agent reports it: held with hysteresis, shown in the node
views and a pool's hosts, its entering and leaving events, and new unbound containers
placed on the calm one of two equal nodes. Agents are plain msgpack websocket peers."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.config import PressureSettings
from tests.coordinator.conftest import (
    Coordinator,
    config_for,
    frame,
    register,
    start,
)
from tests.coordinator.metrics_text import scrape

ENTER, LEAVE = 60.0, 30.0


@pytest.fixture
async def cluster(tmp_path: Path) -> Any:
    config = config_for(
        tmp_path,
        lease_seconds=60.0,
        heartbeat_seconds=20.0,
        pressure=PressureSettings(enter_percent=ENTER, leave_percent=LEAVE),
    )
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


async def report(
    coordinator: Coordinator,
    ws: aiohttp.ClientWebSocketResponse,
    node: str,
    pressure: dict[str, Any] | None,
) -> dict[str, Any]:
    """Send a status with ``pressure`` (None: leave the field out, as an older agent
    does) and return the node's view once the coordinator took it."""
    fields: dict[str, Any] = {"applied_revision": 0}
    if pressure is not None:
        fields["pressure"] = pressure
    await ws.send_bytes(frame("status", **fields))
    for _ in range(500):
        view: dict[str, Any] = await coordinator.get_json(f"/v1/nodes/{node}")
        shown = view["pressure"]
        if (shown and shown["avg10"]) == (pressure and pressure["avg10"]):
            return view
        await asyncio.sleep(0.01)
    raise AssertionError(f"{node}'s pressure {pressure} never shown")


async def pressure_events(coordinator: Coordinator, node: str, count: int) -> list[tuple[str, str]]:
    """The node's pressure and relieved events, once there are ``count`` of them (an
    event is stored just after the reading that made it is shown)."""
    for _ in range(500):
        events = (await coordinator.get_json(f"/v1/events?node={node}"))["events"]
        found = [(e["kind"], e["reason"]) for e in events if e["kind"] in ("pressure", "relieved")]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"{node} never had {count} pressure events")


def psi(avg10: float, avg60: float = 10.0) -> dict[str, Any]:
    return {"source": "psi", "avg10": avg10, "avg60": avg60}


async def test_a_node_enters_and_leaves_pressure_past_its_thresholds(cluster: Coordinator) -> None:
    ws = await register(cluster, "node-a")
    calm = await report(cluster, ws, "node-a", psi(12.5))
    assert calm["pressure"] | {"at": 0, "since": 0} == {
        "under": False,
        "source": "psi",
        "avg10": 12.5,
        "avg60": 10.0,
        "at": 0,
        "since": 0,
    }
    assert (await report(cluster, ws, "node-a", psi(72.0)))["pressure"]["under"] is True
    # Between the thresholds it stays as it was, both ways: no flapping, no events.
    assert (await report(cluster, ws, "node-a", psi(45.0)))["pressure"]["under"] is True
    assert (await report(cluster, ws, "node-a", psi(LEAVE)))["pressure"]["under"] is False
    assert (await report(cluster, ws, "node-a", psi(59.9)))["pressure"]["under"] is False
    throttled = {"source": "throttling", "avg10": ENTER, "avg60": None}
    assert (await report(cluster, ws, "node-a", throttled))["pressure"]["under"] is True
    assert await pressure_events(cluster, "node-a", 3) == [
        ("pressure", "cpu pressure 72% (PSI some avg10) >= 60%"),
        ("relieved", "cpu pressure 30% (PSI some avg10) <= 30%"),
        ("pressure", "cpu pressure 60% (CFS periods throttled) >= 60%"),
    ]
    # An agent that reports no pressure (an older one) leaves the node unknown.
    assert (await report(cluster, ws, "node-a", None))["pressure"] is None
    assert (await pressure_events(cluster, "node-a", 4))[3:] == [
        (
            "relieved",
            "no pressure reading from its agent",
        )
    ]
    listed = (await cluster.get_json("/v1/nodes"))["nodes"]
    assert [node["pressure"] for node in listed] == [None]
    await ws.close()


async def test_a_pressure_out_of_range_closes_only_that_agent(cluster: Coordinator) -> None:
    bad, good = await register(cluster, "node-a"), await register(cluster, "node-b")
    await report(cluster, good, "node-b", psi(80.0))
    await bad.send_bytes(frame("status", applied_revision=0, pressure=psi(101.0)))
    closing = await bad.receive(timeout=5)
    assert closing.type == aiohttp.WSMsgType.BINARY  # the error frame, then the close
    assert (await bad.receive(timeout=5)).type == aiohttp.WSMsgType.CLOSE
    assert bad.close_code == 1007
    assert (await cluster.get_json("/v1/nodes/node-a"))["pressure"] is None
    assert (await cluster.get_json("/v1/nodes/node-b"))["pressure"]["under"] is True
    await good.close()


def unbound(name: str, count: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "count": count,
        "cpu_bind": False,
        "resources": {"cpu": "0.5", "memory": "32Mi"},
    }


@pytest.mark.parametrize("hot", ["node-a", "node-b"])
async def test_a_new_unbound_container_goes_to_the_calm_of_two_equal_nodes(
    cluster: Coordinator, hot: str
) -> None:
    sockets = {node: await register(cluster, node) for node in ("node-a", "node-b")}
    for node, ws in sockets.items():
        await report(cluster, ws, node, psi(90.0 if node == hot else 5.0))
    status, body = await cluster.call("POST", "/v1/namespaces/team-a/deployments", unbound("web"))
    assert status == 201, body
    containers = (await cluster.get_json("/v1/containers"))["containers"]
    (calm,) = {"node-a", "node-b"} - {hot}
    assert [view["record"]["node"] for view in containers] == [calm]
    # Bound containers are placed by their cores as before, pressure or not: AUTO takes
    # the node with more room, the one without "web", which is the one under pressure.
    bound = unbound("db") | {"cpu_bind": True, "resources": {"cpu": "1", "memory": "32Mi"}}
    status, body = await cluster.call("POST", "/v1/namespaces/team-a/deployments", bound)
    assert status == 201, body
    nodes = {
        v["record"]["deployment"]: v["record"]["node"]
        for v in (await cluster.get_json("/v1/containers"))["containers"]
    }
    assert nodes["db"] == hot
    for ws in sockets.values():
        await ws.close()


async def test_a_pool_shows_the_pressure_of_the_hosts_its_containers_run_on(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    await register(cluster, "node-b")  # holds none of the pool's containers
    await cluster.call("PUT", "/v1/pools/research", {})
    await cluster.call("PUT", "/v1/pools/team-a", {"parent": "research"})
    status, body = await cluster.call("POST", "/v1/namespaces/team-a/deployments", unbound("job"))
    assert status == 201, body
    shown = await report(cluster, ws, "node-a", psi(75.0))
    for pool in ("team-a", "research", "<root>"):
        view = await cluster.get_json(f"/v1/pools/{pool}")
        assert view["hosts"] == {"node-a": shown["pressure"]}, pool
    status, _ = await cluster.call("PUT", "/v1/pools/other", {})
    assert status == 200
    assert (await cluster.get_json("/v1/pools/other"))["hosts"] == {}
    await ws.close()


async def test_readers_see_each_nodes_pressure_whole_while_agents_report(
    cluster: Coordinator,
) -> None:
    nodes = [f"node-{k}" for k in range(4)]
    sockets = [await register(cluster, node) for node in nodes]
    rounds = 20

    async def agent(ws: aiohttp.ClientWebSocketResponse, k: int) -> None:
        for r in range(rounds):
            await ws.send_bytes(
                frame(
                    "status",
                    applied_revision=0,
                    pressure=psi(90.0 if r % 2 == 0 else 5.0, float(k)),
                )
            )
            await asyncio.sleep(0)

    async def reader() -> list[dict[str, Any]]:
        seen = []
        for _ in range(10):
            seen += (await cluster.get_json("/v1/nodes"))["nodes"]
        return seen

    _, seen = await asyncio.gather(
        asyncio.gather(*(agent(ws, k) for k, ws in enumerate(sockets))),
        asyncio.gather(*(reader() for _ in range(4))),
    )
    for views in seen:
        for view in views:
            pressure = view["pressure"]
            if pressure is not None:  # each reading whole: its own figures and state
                assert pressure["avg60"] == float(view["name"].split("-")[1])
                assert pressure["under"] == (pressure["avg10"] == 90.0)
    for k, (node, ws) in enumerate(zip(nodes, sockets, strict=True)):
        await report(cluster, ws, node, psi(5.0, float(k)))  # the last, once all are taken
        kinds = [kind for kind, _ in await pressure_events(cluster, node, rounds)]
        assert kinds == ["pressure", "relieved"] * (rounds // 2)
        await ws.close()


async def test_a_plan_of_the_registered_nodes_says_where_the_deploy_goes(
    cluster: Coordinator,
) -> None:
    """``POST /v1/plans`` answers what the deploy does with one node of three under
    pressure: the same nodes, first while the calm ones have room, then past it. Plans of
    inline nodes know no pressure (they describe no real node)."""
    nodes = ("node-a", "node-b", "node-c")
    sockets = {node: await register(cluster, node) for node in nodes}
    for node, ws in sockets.items():
        await report(cluster, ws, node, psi(90.0 if node == "node-a" else 5.0))
    placed: dict[str, int] = dict.fromkeys(nodes, 0)
    # Each node offers 2 CPUs at cpu_overcommit 1: four containers of half a core. The
    # calm nodes have room for 8: 3 go to them, then 6 fill them and spill 1 to node-a.
    for name, count in (("web", 3), ("batch", 6)):
        plan_body = {"request": {"cpu": "0.5", "memory": "32Mi"}, "count": count}
        status, plan = await cluster.call("POST", "/v1/plans", plan_body)
        assert status == 200, plan
        planned = {n["name"]: n["deploy"] for n in plan["nodes"] if n["deploy"]}
        status, body = await cluster.call(
            "POST", "/v1/namespaces/team-a/deployments", unbound(name, count)
        )
        assert status == 201, body
        views = (await cluster.get_json("/v1/containers"))["containers"]
        now = Counter(v["record"]["node"] for v in views if v["record"]["deployment"] == name)
        assert planned == dict(now), name
        placed = {node: placed[node] + now[node] for node in nodes}
    assert placed == {"node-a": 1, "node-b": 4, "node-c": 4}
    inline = {
        "request": {"cpu": "0.5", "memory": "32Mi"},
        "count": 2,
        "nodes": [
            {"name": "node-a", "cores": 2, "memory": "1Gi"},
            {"name": "node-b", "cores": 2, "memory": "1Gi"},
        ],
    }
    status, plan = await cluster.call("POST", "/v1/plans", inline)
    assert status == 200, plan
    assert {n["name"]: n["deploy"] for n in plan["nodes"]} == {"node-a": 1, "node-b": 1}
    for ws in sockets.values():
        await ws.close()


async def test_metrics_show_each_nodes_reading_and_whether_it_is_under_pressure(
    cluster: Coordinator,
) -> None:
    """/metrics: the reading (avg10, by its source) and the held state, hysteresis
    included; a node whose agent reports no reading has neither series."""
    sockets = {node: await register(cluster, node) for node in ("node-a", "node-b", "node-c")}
    await report(cluster, sockets["node-a"], "node-a", psi(72.0))
    await report(cluster, sockets["node-b"], "node-b", psi(12.5))
    seen = await scrape(cluster.http, cluster.url)
    percent, flag = "allot_node_cpu_pressure_percent", "allot_node_cpu_pressured"
    assert seen.value(percent, node="node-a", source="psi") == 72.0
    assert seen.value(flag, node="node-a") == 1
    assert seen.value(percent, node="node-b", source="psi") == 12.5
    assert seen.value(flag, node="node-b") == 0
    assert all(dict(labels)["node"] != "node-c" for labels in seen.with_name(percent))
    assert {dict(labels)["node"] for labels in seen.with_name(flag)} == {"node-a", "node-b"}
    # Between the thresholds node-a stays under; then it leaves, and node-b's reading
    # comes from throttling (its own source label).
    await report(cluster, sockets["node-a"], "node-a", psi(45.0))
    seen = await scrape(cluster.http, cluster.url)
    assert (seen.value(percent, node="node-a", source="psi"), seen.value(flag, node="node-a")) == (
        45.0,
        1,
    )
    await report(cluster, sockets["node-a"], "node-a", psi(LEAVE))
    throttled = {"source": "throttling", "avg10": 80.0, "avg60": None}
    await report(cluster, sockets["node-b"], "node-b", throttled)
    seen = await scrape(cluster.http, cluster.url)
    assert seen.value(flag, node="node-a") == 0
    assert seen.with_name(percent) == {
        frozenset({("node", "node-a"), ("source", "psi")}): LEAVE,
        frozenset({("node", "node-b"), ("source", "throttling")}): 80.0,
    }
    assert seen.value(flag, node="node-b") == 1
    for ws in sockets.values():
        await ws.close()
