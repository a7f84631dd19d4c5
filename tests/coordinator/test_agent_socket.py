"""The agent websocket against a real coordinator: registration, refusals with their
reasons, bad frames that harm nobody else, replacement and lease expiry."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import msgpack
import pytest

from coordinator.agent_hub import CLOSE_LEASE_EXPIRED, CLOSE_REPLACED
from coordinator.keys import STORE
from coordinator.services.registry import NODE_PREFIX
from tests.coordinator.conftest import (
    HEARTBEAT_SECONDS,
    LEASE_SECONDS,
    Coordinator,
    config_for,
    frame,
    hello,
    inventory,
    receive_close,
    receive_frame,
    register,
    start,
)


async def node_state(coordinator: Coordinator, name: str) -> str:
    record = await coordinator.get_json(f"/v1/nodes/{name}")
    state: str = record["state"]
    return state


async def wait_for_state(coordinator: Coordinator, name: str, state: str) -> None:
    for _ in range(100):
        if await node_state(coordinator, name) == state:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never became {state}: {await node_state(coordinator, name)}")


async def test_hello_is_welcomed_and_the_node_is_stored(coordinator: Coordinator) -> None:
    ws = await coordinator.connect()
    assert ws.protocol == "allot.v1"
    await ws.send_bytes(hello("node-a"))
    welcome = await receive_frame(ws)
    assert welcome == {
        "type": "welcome",
        "node": "node-a",
        "lease_seconds": LEASE_SECONDS,
        "heartbeat_seconds": HEARTBEAT_SECONDS,
        "revision": 0,
        "containers": [],
        "partial_statuses": True,
    }
    record = await coordinator.get_json("/v1/nodes/node-a")
    assert record["state"] == "ready"
    assert record["inventory"]["online"] == "0-1"
    assert record["agent_version"] == "test"
    stored = await coordinator.app[STORE].get(NODE_PREFIX + "node-a")
    assert stored is not None
    assert b'"state":"ready"' in stored.value
    await ws.close()


@pytest.mark.parametrize(
    "token", [None, "wrong-token-0123456789", "Bearer"], ids=["no-token", "wrong", "empty"]
)
async def test_upgrade_without_the_join_token_is_401(
    coordinator: Coordinator, token: str | None
) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await coordinator.http.ws_connect(
            coordinator.url + "/v1/agent", protocols=("allot.v1",), headers=headers
        )
    assert refused.value.status == 401
    response = await coordinator.get("/v1/agent", token=token)
    assert response.status == 401
    body = await response.json()
    assert body["error"]["code"] == "unauthorized"
    assert "join token" in body["error"]["message"]


async def test_upgrade_without_the_subprotocol_is_400(coordinator: Coordinator) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await coordinator.connect(protocols=("chat",))
    assert refused.value.status == 400


@pytest.mark.parametrize(
    ("first", "code"),
    [
        (frame("heartbeat"), "expected_hello"),
        (hello(protocol=2), "protocol_version"),
        (hello(token="not-the-join-token-0123"), "unauthorized"),
        (hello("Node_A"), "invalid_node_name"),
        (hello(""), "invalid_node_name"),
    ],
    ids=["not-hello", "protocol-2", "token-in-hello", "bad-name", "empty-name"],
)
async def test_a_refused_hello_gets_a_reason_and_a_policy_close(
    coordinator: Coordinator, first: bytes, code: str
) -> None:
    ws = await coordinator.connect()
    await ws.send_bytes(first)
    error = await receive_frame(ws)
    assert error["type"] == "error"
    assert error["code"] == code
    assert error["message"]
    assert await receive_close(ws) == aiohttp.WSCloseCode.POLICY_VIOLATION
    assert (await coordinator.get_json("/v1/nodes"))["nodes"] == []


async def test_no_hello_in_time_closes_the_socket(coordinator: Coordinator) -> None:
    ws = await coordinator.connect()
    error = await receive_frame(ws)
    assert (error["type"], error["code"]) == ("error", "no_hello")
    assert await receive_close(ws) == aiohttp.WSCloseCode.POLICY_VIOLATION


async def test_an_unknown_frame_type_is_answered_and_the_session_goes_on(
    coordinator: Coordinator,
) -> None:
    ws = await register(coordinator)
    await ws.send_bytes(frame("telemetry", cpu_temperature=71))
    error = await receive_frame(ws)
    assert error["code"] == "unknown_type"
    assert "telemetry" in error["message"]
    await ws.send_bytes(frame("heartbeat", applied_revision=0))
    await asyncio.sleep(LEASE_SECONDS * 0.6)
    await ws.send_bytes(frame("heartbeat", applied_revision=0))
    await asyncio.sleep(LEASE_SECONDS * 0.6)
    assert not ws.closed
    assert await node_state(coordinator, "node-a") == "ready"
    await ws.close()


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (frame("heartbeat", applied_revision="seven"), "invalid_frame"),
        (frame("status", containers=[]), "invalid_frame"),
        (bytes(msgpack.packb([1, 2, 3])), "invalid_frame"),
        (b"\xc1\x00", "not_msgpack"),
    ],
    ids=["wrong-field-type", "missing-field", "not-a-map", "not-msgpack"],
)
async def test_a_malformed_frame_closes_only_that_session(
    coordinator: Coordinator, data: bytes, code: str
) -> None:
    bystander = await register(coordinator, "node-b")
    ws = await register(coordinator, "node-a")
    await ws.send_bytes(data)
    error = await receive_frame(ws)
    assert (error["type"], error["code"]) == ("error", code)
    assert await receive_close(ws) == aiohttp.WSCloseCode.INVALID_TEXT
    await bystander.send_bytes(frame("heartbeat"))
    assert not bystander.closed
    assert await node_state(coordinator, "node-b") == "ready"
    await bystander.close()


async def test_a_text_frame_is_refused(coordinator: Coordinator) -> None:
    ws = await register(coordinator)
    await ws.send_str('{"type": "heartbeat"}')
    error = await receive_frame(ws)
    assert error["code"] == "text_frame"
    assert await receive_close(ws) == aiohttp.WSCloseCode.UNSUPPORTED_DATA


async def test_an_oversized_frame_closes_only_that_session(coordinator: Coordinator) -> None:
    bystander = await register(coordinator, "node-b")
    ws = await register(coordinator, "node-a")
    await ws.send_bytes(frame("status", applied_revision=0, problems=["x" * 100_000]))
    assert await receive_close(ws) == aiohttp.WSCloseCode.MESSAGE_TOO_BIG
    await bystander.send_bytes(frame("heartbeat"))
    assert await node_state(coordinator, "node-b") == "ready"
    metrics = await (await coordinator.get("/metrics", token=None)).text()
    assert 'allot_agent_protocol_errors_total{code="socket_error"} 1.0' in metrics
    await bystander.close()


async def test_a_newer_session_replaces_the_older(coordinator: Coordinator) -> None:
    older = await register(coordinator)
    newer = await register(coordinator)
    assert await receive_close(older) == CLOSE_REPLACED
    await newer.send_bytes(frame("heartbeat"))
    assert not newer.closed
    assert await node_state(coordinator, "node-a") == "ready"
    await newer.close()


async def test_a_silent_node_is_lost_and_its_socket_closed(coordinator: Coordinator) -> None:
    ws = await register(coordinator)
    assert await receive_close(ws) == CLOSE_LEASE_EXPIRED
    record = await coordinator.get_json("/v1/nodes/node-a")
    assert record["state"] == "lost"
    assert record["reason"] == f"no heartbeat for {LEASE_SECONDS:g}s"
    again = await register(coordinator)
    assert await node_state(coordinator, "node-a") == "ready"
    await again.close()


async def test_heartbeats_keep_a_node_ready_past_its_lease(coordinator: Coordinator) -> None:
    ws = await register(coordinator)
    for _ in range(int(3 * LEASE_SECONDS / HEARTBEAT_SECONDS)):
        await ws.send_bytes(frame("heartbeat"))
        await asyncio.sleep(HEARTBEAT_SECONDS)
    assert await node_state(coordinator, "node-a") == "ready"
    await ws.close()


async def test_status_problems_degrade_the_node_and_clearing_them_restores_it(
    coordinator: Coordinator,
) -> None:
    ws = await register(coordinator)
    await ws.send_bytes(frame("status", applied_revision=0, problems=["docker: engine down"]))
    await wait_for_state(coordinator, "node-a", "degraded")
    record = await coordinator.get_json("/v1/nodes/node-a")
    assert record["reason"] == "docker: engine down"
    await ws.send_bytes(frame("status", applied_revision=0, problems=[]))
    await wait_for_state(coordinator, "node-a", "ready")
    await ws.close()


async def test_a_hello_with_inventory_problems_registers_a_degraded_node(
    coordinator: Coordinator,
) -> None:
    ws = await coordinator.connect()
    problem = "NVML: insufficient permissions to query GPUs (NVMLError_NoPermission)"
    await ws.send_bytes(hello("node-a", inventory=inventory(problems=[problem])))
    assert (await receive_frame(ws))["type"] == "welcome"
    record = await coordinator.get_json("/v1/nodes/node-a")
    assert (record["state"], record["reason"]) == ("degraded", problem)
    await ws.close()


async def test_nodes_survive_a_coordinator_restart_and_are_lost_if_they_stay_away(
    tmp_path: Path,
) -> None:
    config = config_for(tmp_path)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        first = Coordinator(url=url, app=runner.app, http=http)
        ws = await register(first)
        await ws.close()
        await runner.cleanup()
        runner, url = await start(config)
        second = Coordinator(url=url, app=runner.app, http=http)
        assert await node_state(second, "node-a") == "ready"  # a fresh lease to come back
        await wait_for_state(second, "node-a", "lost")
    await runner.cleanup()


async def test_metrics_count_nodes_frames_and_connections(coordinator: Coordinator) -> None:
    ws = await register(coordinator)
    await ws.send_bytes(frame("heartbeat"))
    await ws.send_bytes(frame("heartbeat"))
    await asyncio.sleep(0.1)
    text = await (await coordinator.get("/metrics", token=None)).text()
    assert 'allot_nodes{state="ready"} 1.0' in text
    assert "allot_agent_connections 1.0" in text
    assert 'allot_agent_frames_total{type="hello"} 1.0' in text
    assert 'allot_agent_frames_total{type="heartbeat"} 2.0' in text
    await ws.close()


async def test_drift_an_agent_reports_becomes_one_event(coordinator: Coordinator) -> None:
    ws = await register(coordinator)
    drifted = {"id": "c-1", "state": "running", "drift": ["cpu_shares 2 -> 717"]}
    for _ in range(3):  # the same report again is not news
        await ws.send_bytes(frame("status", applied_revision=1, containers=[drifted]))
    await ws.send_bytes(frame("status", applied_revision=1, containers=[], problems=["sync"]))
    await wait_for_state(coordinator, "node-a", "degraded")
    events = (await coordinator.get_json("/v1/events?kind=drift"))["events"]
    assert [(e["node"], e["container"], e["reason"]) for e in events] == [
        ("node-a", "c-1", "corrected: cpu_shares 2 -> 717")
    ]
    await ws.close()


async def test_each_correction_is_one_event_though_its_change_repeats(tmp_path: Path) -> None:
    """The same change put back again, in one session or after the agent restarted, is a
    new correction (a new time); a report sent again, on reconnecting or to a restarted
    coordinator, is not. The event's time is the agent's time of the correction."""

    def drifted(at: float) -> dict[str, object]:
        return {"id": "c-1", "state": "running", "drift": ["cpu_shares 2 -> 717"], "drift_at": at}

    async def times(coordinator: Coordinator) -> list[float]:
        events = (await coordinator.get_json("/v1/events?kind=drift"))["events"]
        assert {e["reason"] for e in events} <= {"corrected: cpu_shares 2 -> 717"}
        return [e["at"] for e in events]

    async def report(coordinator: Coordinator, at: float, expected: list[float]) -> None:
        """Send one status as a reconnecting agent would and check the events after it."""
        ws = await register(coordinator)
        await ws.send_bytes(frame("status", applied_revision=1, containers=[drifted(at)]))
        # Frames are handled in order: once this one's problem shows, the first is done.
        sent.append(at)
        problem = f"status {len(sent)}"
        again = frame("status", applied_revision=1, containers=[drifted(at)], problems=[problem])
        await ws.send_bytes(again)
        for _ in range(100):
            if (await coordinator.get_json("/v1/nodes/node-a"))["reason"] == problem:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError(f"the status {problem!r} was never handled")
        await ws.close()
        assert await times(coordinator) == expected

    sent: list[float] = []
    config = config_for(tmp_path)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        first = Coordinator(url=url, app=runner.app, http=http)
        await report(first, 1000.0, expected=[1000.0])
        await report(first, 1000.0, expected=[1000.0])  # sent again
        await report(first, 1010.0, expected=[1000.0, 1010.0])  # put back again
        await runner.cleanup()
        runner, url = await start(config)
        second = Coordinator(url=url, app=runner.app, http=http)
        await report(second, 1010.0, expected=[1000.0, 1010.0])  # sent to a new coordinator
        await report(second, 1020.0, expected=[1000.0, 1010.0, 1020.0])
    await runner.cleanup()
