"""The agent's link against scripted coordinators: real aiohttp servers on loopback that
behave well or badly in one precise way each, talking plain ``msgpack``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgpack
import pytest
from aiohttp import WSMsgType, web

from agent.config import AgentConfig
from agent.metrics import AgentMetrics
from agent.runtime.reconciler import Runtime
from agent.session import run_link
from shared.logs import fields_of
from tests.builders import idle_runtime, make_inventory
from tests.loopback import serving
from tests.polling import eventually

TOKEN = "agent-session-token-0123456789"
Script = Callable[[web.WebSocketResponse, dict[str, Any]], Awaitable[None]]


def welcome(lease: float = 5.0, heartbeat: float = 0.05) -> bytes:
    frame = {
        "type": "welcome",
        "node": "n1",
        "lease_seconds": lease,
        "heartbeat_seconds": heartbeat,
    }
    return bytes(msgpack.packb(frame))


class ScriptedCoordinator:
    """Accepts agent sockets and runs ``script`` on each, after reading its hello."""

    def __init__(self, script: Script, *, autoping: bool = True) -> None:
        self.script = script
        self.autoping = autoping
        self.hellos: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("allot.v1",), autoping=self.autoping)
        await ws.prepare(request)
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        hello = await self.next_frame(ws)
        self.hellos.append(hello)
        await self.script(ws, hello)
        await ws.close()
        return ws

    async def next_frame(self, ws: web.WebSocketResponse) -> dict[str, Any]:
        while True:
            message = await ws.receive(timeout=5)
            if message.type == WSMsgType.BINARY:
                frame: dict[str, Any] = msgpack.unpackb(message.data, strict_map_key=False)
                self.received.append(frame)
                return frame
            if message.type not in (WSMsgType.PING, WSMsgType.PONG):
                raise ConnectionError(f"agent socket ended: {message.type}")


@contextlib.asynccontextmanager
async def running(
    coordinator: ScriptedCoordinator,
    runtime: Runtime | None = None,
    metrics: AgentMetrics | None = None,
) -> AsyncIterator[asyncio.Task[None]]:
    """The scripted coordinator on port 0 and an agent linked to it, both stopped after."""
    app = web.Application()
    app.router.add_get("/v1/agent", coordinator.handle)
    async with serving(app) as url:
        config = AgentConfig(
            server=url,
            join_token=TOKEN,
            node_name="n1",
            backoff_initial_seconds=0.05,
            backoff_max_seconds=0.2,
        )
        inventory = make_inventory()
        runtime = runtime or idle_runtime(inventory)
        link = asyncio.create_task(run_link(config, inventory, runtime, metrics or AgentMetrics()))
        try:
            yield link
        finally:
            link.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await link


@pytest.fixture
def agent_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    logging.getLogger("allot").propagate = True
    caplog.set_level(logging.DEBUG, logger="allot")
    return caplog


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


async def test_hello_carries_node_token_protocol_and_inventory() -> None:
    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome())
        await asyncio.sleep(10)

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator):
        await eventually(lambda: len(coordinator.hellos) == 1)
    hello = coordinator.hellos[0]
    assert (hello["type"], hello["node"], hello["token"], hello["protocol"]) == (
        "hello",
        "n1",
        TOKEN,
        1,
    )
    assert hello["inventory"]["online"] == "0-1"


async def test_heartbeats_follow_the_welcome_interval() -> None:
    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome(heartbeat=0.05))
        for _ in range(6):
            await coordinator.next_frame(ws)

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator):
        await eventually(lambda: len(coordinator.received) >= 7)
    # hello, the runtime's report once, then nothing but heartbeats while nothing changes
    types = [f["type"] for f in coordinator.received[:7]]
    assert types[0] == "hello"
    assert sorted(types[1:]) == ["heartbeat"] * 5 + ["status"]


async def test_desired_states_reach_the_runtime() -> None:
    container = {"id": "c1", "image": "busybox", "limits": {"cpuset_cpus": "1"}}
    desired = {"type": "desired", "revision": 7, "full": False, "containers": [container]}
    runtime = idle_runtime(make_inventory())

    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome())
        await ws.send_bytes(bytes(msgpack.packb(desired)))
        while (await coordinator.next_frame(ws))["type"] != "status":
            pass
        await asyncio.sleep(10)

    def acknowledged() -> set[int]:
        beats = (f for f in coordinator.received if f["type"] == "heartbeat")
        return {beat["acknowledged_revision"] for beat in beats}

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator, runtime):
        await eventually(lambda: runtime.desired_revision == 7)
        await eventually(lambda: any(f["type"] == "status" for f in coordinator.received))
        # Nothing was under way: revision 7 is acknowledged at once, not at the next beat.
        await eventually(lambda: 7 in acknowledged())
    status = next(f for f in coordinator.received if f["type"] == "status")
    assert status == {
        "type": "status",
        "applied_revision": 0,
        "containers": [],
        "problems": [],
        "listed_after": 0,
        "pressure": None,  # an idle runtime has read none yet
        "partial": False,  # a session's first status is whole
        "gone": [],
    }
    assert runtime.desired_revision == 7
    assert coordinator.hellos[0]["acknowledges"] is True


async def test_a_desired_state_is_acknowledged_at_once_not_at_the_next_heartbeat() -> None:
    desired = {"type": "desired", "revision": 4, "full": True, "containers": []}
    runtime = idle_runtime(make_inventory())

    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome(lease=60.0, heartbeat=30.0))  # no beat due for 30 s
        await coordinator.next_frame(ws)  # the first heartbeat, sent on connecting
        await ws.send_bytes(bytes(msgpack.packb(desired)))
        while True:
            await coordinator.next_frame(ws)

    def acknowledged() -> list[int]:
        beats = (f for f in coordinator.received if f["type"] == "heartbeat")
        return [beat["acknowledged_revision"] for beat in beats]

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator, runtime):
        await eventually(lambda: 4 in acknowledged())
    assert runtime.acknowledged_revision == 4


async def test_connected_is_1_while_registered_and_0_once_the_socket_closes() -> None:
    metrics = AgentMetrics()
    release = asyncio.Event()

    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        if len(coordinator.hellos) == 1:  # later tries are closed before any welcome
            await ws.send_bytes(welcome())
            await release.wait()

    def connected() -> float | None:
        return metrics.registry.get_sample_value("allot_agent_connected")

    coordinator = ScriptedCoordinator(serve)
    assert connected() == 0
    async with running(coordinator, metrics=metrics):
        await eventually(lambda: connected() == 1)
        release.set()  # the coordinator closes the socket
        await eventually(lambda: connected() == 0)


async def test_a_refusal_is_logged_once_as_an_error_and_retried(
    agent_log: pytest.LogCaptureFixture,
) -> None:
    async def refuse(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        error = {"type": "error", "code": "protocol_version", "message": "speak protocol 9"}
        await ws.send_bytes(msgpack.packb(error))

    coordinator = ScriptedCoordinator(refuse)
    async with running(coordinator):
        await eventually(lambda: len(coordinator.hellos) >= 4)
    errors = lines(agent_log, logging.ERROR)
    assert errors == ["cannot register with coordinator"]
    refused = next(r for r in agent_log.records if r.levelno == logging.ERROR)
    assert fields_of(refused)["reason"] == "refused: speak protocol 9 (protocol_version)"
    assert lines(agent_log, logging.DEBUG).count("still cannot register") >= 2


async def test_an_unknown_frame_is_answered_and_the_session_goes_on() -> None:
    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome())
        await ws.send_bytes(msgpack.packb({"type": "reboot", "when": "now"}))
        while (await coordinator.next_frame(ws))["type"] != "error":
            pass
        await coordinator.next_frame(ws)  # and it keeps sending heartbeats
        await asyncio.sleep(10)

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator):
        await eventually(lambda: any(f["type"] == "error" for f in coordinator.received))
        await asyncio.sleep(0.2)
    errors = [f for f in coordinator.received if f["type"] == "error"]
    assert errors[0]["code"] == "unknown_type"
    assert "reboot" in errors[0]["message"]
    assert len(coordinator.hellos) == 1  # same session throughout


async def test_a_malformed_frame_is_answered_and_the_agent_reconnects() -> None:
    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome())
        await ws.send_bytes(b"\xc1 not msgpack")
        with contextlib.suppress(ConnectionError):  # read on until the agent closes
            while True:
                await coordinator.next_frame(ws)

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator):
        await eventually(lambda: len(coordinator.hellos) >= 2)
    errors = [f for f in coordinator.received if f["type"] == "error"]
    assert errors[0]["code"] == "not_msgpack"


async def test_a_coordinator_that_goes_silent_is_left_after_one_lease(
    agent_log: pytest.LogCaptureFixture,
) -> None:
    async def go_silent(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome(lease=0.3, heartbeat=0.05))
        await asyncio.sleep(10)  # reads nothing, so pings go unanswered

    coordinator = ScriptedCoordinator(go_silent, autoping=False)
    async with running(coordinator):
        await eventually(lambda: len(coordinator.hellos) >= 2)
    assert "disconnected from coordinator" in lines(agent_log, logging.WARNING)
    ended = next(r for r in agent_log.records if r.getMessage() == "disconnected from coordinator")
    assert fields_of(ended)["reason"] == "nothing heard from the coordinator for 0.3s"


async def test_a_welcome_resets_the_backoff() -> None:
    async def welcome_then_close(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome())

    coordinator = ScriptedCoordinator(welcome_then_close)
    async with running(coordinator):
        # With the backoff reset by every welcome each retry waits at most 0.05 s; without
        # it the waits would grow to the 0.2 s cap and 20 sessions would take over 3 s.
        await eventually(lambda: len(coordinator.hellos) >= 20, within=2.5)


def test_a_welcome_is_taken_even_below_the_revision_held() -> None:
    """A coordinator whose store was reset welcomes at revision 0: its word stands."""
    runtime = idle_runtime(make_inventory())
    runtime.set_desired(9, [], full=True)
    runtime.set_desired(3, [], full=True)  # a stale push in a session: ignored
    assert runtime.desired_revision == 9
    runtime.set_desired(0, [], full=True, welcome=True)
    assert runtime.desired_revision == 0


def desired_frame(revision: int, *ids: str, **fields: Any) -> bytes:
    containers = [{"id": cid, "image": "allot/busybox:test"} for cid in ids]
    frame = {"type": "desired", "revision": revision, "containers": containers} | fields
    return bytes(msgpack.packb(frame))


async def test_a_delta_on_another_revision_is_not_applied_and_the_whole_state_is_asked_for(
    agent_log: pytest.LogCaptureFixture,
) -> None:
    runtime = idle_runtime(make_inventory())
    asked = asyncio.Event()

    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome(lease=60.0, heartbeat=30.0))
        await ws.send_bytes(desired_frame(2, "c1", full=False, since=0))  # applies
        await ws.send_bytes(desired_frame(7, "c3", full=False, since=5))  # 3 to 5 missed
        while not (await coordinator.next_frame(ws)).get("wants_full"):
            pass
        asked.set()
        await ws.send_bytes(desired_frame(7, "c1", "c3", full=True))
        await ws.send_bytes(desired_frame(8, full=False, since=7, removed=["c1"]))
        while True:
            await coordinator.next_frame(ws)

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator, runtime):
        await eventually(asked.is_set)
        await eventually(lambda: runtime.desired_revision == 8)
    refused = [r for r in agent_log.records if r.getMessage().startswith("desired delta not")]
    assert [fields_of(r) for r in refused] == [{"revision": 7, "since": 5, "held": 2}]
    assert runtime.report().applied_revision == 0  # the loop never ran: only taken in


async def test_a_longer_pace_slows_the_heartbeats_and_lengthens_the_silence_allowed() -> None:
    stretched = asyncio.Event()

    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        await ws.send_bytes(welcome(lease=0.5, heartbeat=0.05))
        await coordinator.next_frame(ws)  # the first heartbeat
        pace = {"heartbeat_seconds": 30.0, "lease_seconds": 90.0}
        await ws.send_bytes(desired_frame(0, full=False, since=0, **pace))
        stretched.set()
        while True:
            await coordinator.next_frame(ws)

    coordinator = ScriptedCoordinator(serve, autoping=False)  # no pong: only the lease counts
    async with running(coordinator):
        await eventually(stretched.is_set)
        await asyncio.sleep(0.2)
        beats_then = beats(coordinator)
        await asyncio.sleep(1.0)  # two welcome leases, twenty welcome intervals
        assert beats(coordinator) <= beats_then + 1
    assert len(coordinator.hellos) == 1  # the session outlived the welcome's lease


def beats(coordinator: ScriptedCoordinator) -> int:
    return sum(1 for f in coordinator.received if f["type"] == "heartbeat")


@pytest.mark.parametrize("partial", [True, False], ids=["partial-taken", "older-coordinator"])
async def test_after_a_whole_first_status_only_what_changed_goes_if_the_welcome_says_so(
    partial: bool,
) -> None:
    container = {"id": "c1", "image": "busybox", "limits": {"cpuset_cpus": "1"}}
    desired = {"type": "desired", "revision": 2, "full": False, "containers": [container]}
    runtime = idle_runtime(make_inventory())

    async def serve(ws: web.WebSocketResponse, hello: dict[str, Any]) -> None:
        said = msgpack.unpackb(welcome()) | ({"partial_statuses": True} if partial else {})
        await ws.send_bytes(bytes(msgpack.packb(said)))
        while (await coordinator.next_frame(ws))["type"] != "status":
            pass
        await ws.send_bytes(bytes(msgpack.packb(desired)))
        while True:
            await coordinator.next_frame(ws)

    def statuses() -> list[dict[str, Any]]:
        return [f for f in coordinator.received if f["type"] == "status"]

    coordinator = ScriptedCoordinator(serve)
    async with running(coordinator, runtime):
        await eventually(lambda: runtime.desired_revision == 2)
        await runtime._publish()  # the report now holds c1, not made yet
        await eventually(lambda: len(statuses()) == 2)
    first, second = statuses()
    assert (first["partial"], first["containers"], first["gone"]) == (False, [], [])
    assert second["partial"] is partial
    assert [(c["id"], c["state"]) for c in second["containers"]] == [("c1", "missing")]
