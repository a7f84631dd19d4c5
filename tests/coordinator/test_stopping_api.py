"""Stopping containers over the real API and agent sockets (issue 26): a deleted container
keeps its cores until its agent reports it gone; what waits for them is pending and says
so, and is placed once the report comes; a report sent before the agent saw the delete
frees nothing; deletes, deploys and reports sent together leave memory equal to the store
and to a fresh load of it."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import msgspec

from coordinator.deployments.books import Books
from coordinator.deployments.stored_books import read_books
from coordinator.keys import DEPLOYMENTS as SERVICE
from coordinator.keys import STORE
from tests.coordinator.conftest import Coordinator, frame, register, report_caught_up
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call, spec
from tests.coordinator.test_pending import assert_memory_is_the_store, placed_within

WEB = f"{DEPLOYMENTS}/web"


def whole_cores(name: str, count: int) -> dict[str, Any]:
    """Containers of one bound core each: the two-CPU test node holds two."""
    return spec(name, count=count) | {"resources": {"cpu": "1", "memory": "64Mi"}}


async def views(cluster: Coordinator, path: str = WEB) -> dict[str, dict[str, Any]]:
    status, answer = await call(cluster, "GET", path)
    assert status == 200, answer
    return {view["record"]["id"]: view for view in answer["containers"]}


async def report(ws: aiohttp.ClientWebSocketResponse, revision: int, running: list[str]) -> None:
    containers = [{"id": cid, "state": "running"} for cid in running]
    await ws.send_bytes(frame("status", applied_revision=revision, containers=containers))


async def report_now(cluster: Coordinator, ws: aiohttp.ClientWebSocketResponse, node: str) -> None:
    """The agent reports the node's desired state as the coordinator holds it now."""
    revision, desired = cluster.app[SERVICE].desired(node)
    await report(ws, revision, [container.id for container in desired])


async def test_a_deleted_containers_core_waits_for_its_agent_and_a_late_report_frees_nothing(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    status, placed = await call(cluster, "POST", DEPLOYMENTS, whole_cores("web", 2))
    assert status == 201, placed
    first, second = sorted(view["record"]["id"] for view in placed["containers"])
    service = cluster.app[SERVICE]
    before, _ = service.desired("node-a")  # what the agent last applied: both desired

    status, deleted = await call(cluster, "DELETE", f"/v1/containers/{first}")
    assert status == 200, deleted
    stand_in = deleted["stand_in"]
    shown = await views(cluster)
    assert shown[first]["state"] == "stopping"
    assert shown[first]["reason"] == (
        "deleted on request; held on node-a until its agent reports it removed"
    )
    assert shown[stand_in]["state"] == "pending"
    assert shown[stand_in]["reason"].startswith(
        f"waiting for 1 stopping container on node-a to be removed by its agent ({first}); "
    )
    assert first not in {c.id for c in service.desired("node-a")[1]}  # the agent removes it
    allocation = await cluster.get_json("/v1/nodes/node-a/allocation")
    assert sorted(allocation["containers"]) == sorted([first, second])

    # A report the agent sent before it saw the delete, arriving late: it says nothing
    # of the deleted container being gone, even though it leaves it out.
    await report(ws, before, [second])
    await service.quiet()
    await service.settled()
    assert (await views(cluster))[first]["state"] == "stopping"

    await report_caught_up(cluster, ws)
    await placed_within(cluster, 2)  # the stand-in, in the pass the report started
    shown = await views(cluster)
    assert sorted(shown) == sorted([second, stand_in])
    assert shown[stand_in]["record"]["node"] == "node-a"
    events = (await call(cluster, "GET", f"/v1/events?container={first}"))[1]["events"]
    assert [event["kind"] for event in events][-1] == "stopped"
    await assert_memory_is_the_store(cluster)
    await ws.close()


async def test_deletes_deploys_and_reports_at_once_leave_memory_equal_to_the_store(
    cluster: Coordinator,
) -> None:
    sockets = {node: await register(cluster, node) for node in ("node-a", "node-b")}
    for name in ("web", "api", "db"):
        status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(name, count=2))
        assert status == 201, answer
    service = cluster.app[SERVICE]
    ids = sorted(c.id for c in service.containers())
    revisions = {node: service.desired(node) for node in sockets}
    requests = [
        *(call(cluster, "DELETE", f"/v1/containers/{cid}") for cid in ids[:3]),
        call(cluster, "DELETE", f"{DEPLOYMENTS}/api"),
        call(cluster, "POST", f"{DEPLOYMENTS}/db/scale", {"count": 1}),
        *(call(cluster, "POST", DEPLOYMENTS, spec(f"new{i}", count=1)) for i in range(3)),
        # Reports from before any of these, and reports of every desired state since.
        *(
            report(ws, revisions[node][0], [c.id for c in revisions[node][1]])
            for node, ws in sockets.items()
        ),
        *(report_now(cluster, ws, node) for node, ws in sockets.items()),
    ]
    answers = await asyncio.gather(*requests, return_exceptions=True)
    failures = [a for a in answers if isinstance(a, BaseException)]
    assert not failures, failures
    statuses = {a[0] for a in answers if isinstance(a, tuple)}
    assert statuses <= {200, 201, 404, 409}, answers
    await service.quiet()
    await service.settled()
    await assert_memory_is_the_store(cluster)
    assert _plain(await read_books(cluster.app[STORE])) == _plain(service._books)

    for node, ws in sockets.items():
        await report_caught_up(cluster, ws, node)
    await service.schedule()
    await service.quiet()
    assert service._books.stopping == {}
    assert service.all_pending() == []
    await assert_memory_is_the_store(cluster)
    assert _plain(await read_books(cluster.app[STORE])) == _plain(service._books)
    for ws in sockets.values():
        await ws.close()


def _plain(books: Books) -> object:
    """What the books hold that the store must give back on a fresh load."""
    return msgspec.to_builtins(
        {
            "containers": books.containers,
            "stopping": books.stopping,
            "stop_revision": books.stop_revision,
            "pending": books.pending,
            "allocations": {
                node: sorted(state.allocations) for node, state in sorted(books.nodes.items())
            },
            "used": {node: state.memory_used for node, state in sorted(books.nodes.items())},
        }
    )
