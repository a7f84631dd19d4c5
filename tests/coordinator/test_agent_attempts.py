"""Restarts and failed tries agents report, over real sockets: each becomes one event of
its kind (``restarted``, ``failed``), and the containers' views say what the agents said,
while several agents report at once and readers ask meanwhile. The event log in memory is
the one in the store afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

from coordinator.services.events import EVENT_PREFIX
from tests.coordinator.conftest import Coordinator, frame, register

NODES = [f"node-{letter}" for letter in "abcd"]
NO_IMAGE = "create failed: No such image: busybox:nope"


def attempt(outcome: str, reason: str, number: int, at: float) -> dict[str, Any]:
    return {"outcome": outcome, "reason": reason, "number": number, "at": at}


async def test_each_attempt_reported_by_many_agents_at_once_is_one_event(
    cluster: Coordinator,
) -> None:
    sockets = {node: await register(cluster, node) for node in NODES}
    body = {
        "name": "web",
        "image": "busybox:nope",
        "count": 1,
        "strategy": "each",  # one on each node
        "resources": {"cpu": "0.1", "memory": "16Mi"},
    }
    status, placed = await cluster.call("POST", "/v1/namespaces/team-a/deployments", body)
    assert status == 201, placed
    on_node = {view["record"]["node"]: view["record"]["id"] for view in placed["containers"]}

    async def agent(node: str) -> None:
        """Two failed tries, then the image is there: it runs, crashes, is started again.
        Each status is sent twice, as after a reconnect: the second is not news."""
        container_id, ws = on_node[node], sockets[node]
        failing = f"{NO_IMAGE} (try 1 in a row; the next 1s after it)"
        reports = [
            {"state": "failed", "error": failing, "attempt": attempt("failed", failing, 1, 10.0)},
            {"state": "failed", "error": failing, "attempt": attempt("failed", failing, 2, 11.0)},
            {"state": "running", "attempt": attempt("failed", failing, 2, 11.0)},
            {
                "state": "running",
                "attempt": attempt("restarted", "started again: exited with code 1", 4, 20.0),
            },
        ]
        for report in reports:
            containers = [{"id": container_id} | report]
            for _ in range(2):
                await ws.send_bytes(frame("status", applied_revision=1, containers=containers))
                await asyncio.sleep(0)

    async def reader() -> None:
        for _ in range(20):
            views = (await cluster.get_json("/v1/containers"))["containers"]
            for view in views:
                assert view["state"] in ("starting", "failed", "running"), view
                if view["state"] == "failed":
                    assert view["reason"].startswith(NO_IMAGE), view
            await asyncio.sleep(0.01)

    await asyncio.gather(*(agent(node) for node in NODES), reader(), reader())
    expected = {(cid, kind, at) for cid in on_node.values() for kind, at in EXPECTED}
    for _ in range(200):
        events = (await cluster.get_json("/v1/events"))["events"]
        seen = [(e["container"], e["kind"], e["at"]) for e in events if e["kind"] in KINDS]
        if len(seen) >= len(expected):
            break
        await asyncio.sleep(0.02)
    assert sorted(seen) == sorted(expected)  # each once, none twice
    for event in events:
        if event["kind"] in KINDS:
            assert (event["namespace"], event["deployment"]) == ("team-a", "web")
            assert event["node"] in NODES
    views = (await cluster.get_json("/v1/containers"))["containers"]
    assert {(view["state"], view["reason"]) for view in views} == {("running", "")}
    # the API answers from memory; the store holds the same events
    stored = await cluster.stored(EVENT_PREFIX)
    assert list(stored.values()) == sorted(events, key=lambda event: event["sequence"])
    for ws in sockets.values():
        await ws.close()


KINDS = ("restarted", "failed")
EXPECTED = [("failed", 10.0), ("failed", 11.0), ("restarted", 20.0)]
