"""Load that follows change, against a real coordinator over real sockets: heartbeat
intervals that stretch as the fleet grows, with every node's lease stretched with them;
desired state sent as deltas to a real agent link; a whole state on every (re)connect and
whenever an agent asks for one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import pytest

from agent.config import AgentConfig
from agent.metrics import AgentMetrics
from agent.session import run_link
from coordinator.keys import DEPLOYMENTS, HUB
from shared.logs import fields_of
from tests.builders import idle_runtime, make_inventory
from tests.coordinator.conftest import (
    JOIN_TOKEN,
    Coordinator,
    config_for,
    frame,
    hello,
    receive_frame,
    register,
    start,
)
from tests.coordinator.test_deployment_api import call, spec
from tests.polling import eventually

CEILING = 20.0  # heartbeats a second, for the whole fleet
BEAT, LEASE = 0.2, 0.6  # the settings: 4 agents reach the ceiling at them
AGENTS = 40
WINDOW = 4.0  # seconds of beating measured, many times LEASE


@contextlib.asynccontextmanager
async def coordinator_at(tmp_path: Path, **settings: Any) -> AsyncIterator[Coordinator]:
    runner, url = await start(config_for(tmp_path, **settings))
    try:
        async with aiohttp.ClientSession() as http:
            yield Coordinator(url=url, app=runner.app, http=http)
    finally:
        await runner.cleanup()


class PlainAgent:
    """A node that heartbeats at the pace the coordinator gives it: the welcome's, then
    each longer one a desired frame carries."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.interval = 0.0
        self.beats: list[float] = []  # when each heartbeat went out

    async def run(self, coordinator: Coordinator, stop: asyncio.Event) -> None:
        ws = await coordinator.connect()
        await ws.send_bytes(hello(self.name))
        welcome = await receive_frame(ws)
        self.interval = welcome["heartbeat_seconds"]
        reading = asyncio.create_task(self._follow(ws))
        try:
            while not stop.is_set():
                await ws.send_bytes(frame("heartbeat", applied_revision=0))
                self.beats.append(time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)
        finally:
            reading.cancel()
            await ws.close()

    async def _follow(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while (received := await ws.receive()).type == aiohttp.WSMsgType.BINARY:
            desired = msgpack.unpackb(received.data, strict_map_key=False)
            if desired["type"] == "desired" and desired.get("heartbeat_seconds"):
                self.interval = desired["heartbeat_seconds"]


async def test_intervals_stretch_with_the_fleet_and_no_node_is_lost(tmp_path: Path) -> None:
    settings = {"heartbeat_seconds": BEAT, "lease_seconds": LEASE}
    async with coordinator_at(tmp_path, max_heartbeats_per_second=CEILING, **settings) as cluster:
        agents = [PlainAgent(f"node-{n:02}") for n in range(AGENTS)]
        stop = asyncio.Event()
        fleet = asyncio.gather(*(agent.run(cluster, stop) for agent in agents))
        await eventually(lambda: all(agent.beats for agent in agents))
        # The last re-pace reached every agent.
        await eventually(lambda: all(agent.interval >= AGENTS / CEILING for agent in agents))
        start_at = time.monotonic()
        await asyncio.sleep(WINDOW)
        beats = sum(1 for agent in agents for at in agent.beats if at >= start_at)
        nodes = (await cluster.get_json("/v1/nodes"))["nodes"]
        stop.set()
        await fleet

    # Unstretched, 40 agents every 0.2 s would send 800 in the window.
    assert beats <= CEILING * WINDOW + AGENTS
    assert sum(1 / agent.interval for agent in agents) <= CEILING
    # Every lease was stretched with its interval: past LEASE without a beat, none lost.
    assert {node["state"] for node in nodes} == {"ready"}
    assert len(nodes) == AGENTS


async def test_a_restarted_coordinator_paces_for_the_fleet_in_its_store(tmp_path: Path) -> None:
    """Its agents were told a stretched lease: their nodes' fresh leases are the pace of
    that fleet, not the base one, and the first agent back is welcomed at it."""
    settings = {"heartbeat_seconds": BEAT, "lease_seconds": LEASE}
    async with coordinator_at(tmp_path, max_heartbeats_per_second=CEILING, **settings) as cluster:
        sockets = await asyncio.gather(*(register(cluster, f"node-{n:02}") for n in range(AGENTS)))
        for ws in sockets:
            await ws.close()

    async with coordinator_at(tmp_path, max_heartbeats_per_second=CEILING, **settings) as cluster:
        await asyncio.sleep(3 * LEASE)  # no agent back yet: the base lease would have ended
        nodes = (await cluster.get_json("/v1/nodes"))["nodes"]
        ws = await cluster.connect()
        await ws.send_bytes(hello("node-00"))
        welcome = await receive_frame(ws)
        await ws.close()
    assert {node["state"] for node in nodes} == {"ready"}
    assert welcome["heartbeat_seconds"] >= AGENTS / CEILING


async def test_deltas_reach_a_real_agent_and_a_reconnect_gets_the_whole_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logging.getLogger("allot").propagate = True
    caplog.set_level(logging.DEBUG, logger="allot.agent")
    async with coordinator_at(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0) as cluster:
        config = AgentConfig(
            server=cluster.url,
            join_token=JOIN_TOKEN,
            node_name="node-a",
            backoff_initial_seconds=0.05,
            backoff_max_seconds=0.2,
        )
        inventory = make_inventory()
        runtime = idle_runtime(inventory, node="node-a")
        link = asyncio.create_task(run_link(config, inventory, runtime, AgentMetrics()))
        try:
            await eventually(lambda: runtime.desired_revision is not None)
            path = "/v1/namespaces/team-a/deployments"
            for name in ("one", "two"):
                status, answer = await call(cluster, "POST", path, spec(name, count=1))
                assert status == 201, answer
            revision, desired = cluster.app[DEPLOYMENTS].desired("node-a")
            await eventually(lambda: runtime.desired_revision == revision)
            received = [
                fields_of(r) for r in caplog.records if r.getMessage() == "desired state received"
            ]
            assert [(r["full"], r["containers"], r["removed"]) for r in received] == [
                (False, 1, 0),
                (False, 1, 0),
            ]

            await cluster.app[HUB].close_all()  # the agent reconnects
            await eventually(lambda: registrations(caplog) == 2)
            assert runtime.desired_revision == revision
        finally:
            link.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await link

    # A plain agent on the same store: its welcome holds the whole state.
    async with coordinator_at(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0) as cluster:
        ws = await cluster.connect()
        await ws.send_bytes(hello("node-a"))
        welcome = await receive_frame(ws)
        assert sorted(c["id"] for c in welcome["containers"]) == sorted(c.id for c in desired)
        await ws.close()


def registrations(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.getMessage() == "registered with coordinator")


async def test_an_agent_that_asks_gets_the_whole_state(tmp_path: Path) -> None:
    async with coordinator_at(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0) as cluster:
        ws = await register(cluster, "node-a")
        status, answer = await call(
            cluster, "POST", "/v1/namespaces/team-a/deployments", spec("web", count=2)
        )
        assert status == 201, answer
        delta = await next_desired(ws)
        assert (delta["full"], len(delta["containers"]), delta["since"]) == (False, 2, 0)

        await ws.send_bytes(frame("heartbeat", applied_revision=0, wants_full=True))
        whole = await next_desired(ws)
        assert (whole["full"], whole["revision"]) == (True, delta["revision"])
        assert sorted(c["id"] for c in whole["containers"]) == sorted(
            c["id"] for c in delta["containers"]
        )
        await ws.close()


async def test_agents_asking_at_once_each_get_their_own_whole_state(tmp_path: Path) -> None:
    async with coordinator_at(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0) as cluster:
        sockets = await asyncio.gather(*(register(cluster, f"node-{n}") for n in range(8)))
        await asyncio.gather(
            *(ws.send_bytes(frame("heartbeat", wants_full=True)) for ws in sockets)
        )
        wholes = await asyncio.gather(*(next_desired(ws) for ws in sockets))
        assert [(w["full"], w["containers"]) for w in wholes] == [(True, [])] * 8
        for ws in sockets:
            await ws.close()


async def next_desired(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    while (received := await receive_frame(ws))["type"] != "desired":
        pass
    return received
