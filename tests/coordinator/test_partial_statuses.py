"""Partial statuses against a real coordinator over real sockets: after a full status, a
partial one updates only the containers it lists; a stopping container it names gone, or
that the session's listing leaves out, is let go as a full report would, and one it does
not name is kept; an older agent's full statuses work as before; a partial status before
any full one lets nothing go; agents reporting partially while deploys and deletes run
leave memory equal to a fresh load of the store; and the work of a partial report does
not grow with the node's containers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.deployments.books import Books
from coordinator.deployments.tally import StateTally
from coordinator.keys import DEPLOYMENTS as SERVICE
from shared.protocol import ContainerStatus
from tests.coordinator.conftest import Coordinator, frame, hello, receive_frame
from tests.coordinator.store_engines import sqlite_engine
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call
from tests.coordinator.test_sequenced_nodes import (
    assert_memory_is_a_fresh_load,
    coordinator_on,
    deploy,
    say_hello,
    sessions_end,
)
from tests.coordinator.test_sequenced_nodes import inventory as wire_inventory
from tests.coordinator.test_stopping_api import whole_cores


def status(revision: int, running: Iterable[str], **fields: Any) -> bytes:
    containers = [{"id": cid, "state": "running", "cpu_usage": 0.25} for cid in running]
    return frame(
        "status", applied_revision=revision, listed_after=revision, containers=containers, **fields
    )


def partial(revision: int, changed: list[dict[str, Any]], gone: Iterable[str] = ()) -> bytes:
    return frame(
        "status",
        applied_revision=revision,
        listed_after=revision,
        partial=True,
        containers=changed,
        gone=list(gone),
    )


async def acted_on(cluster: Coordinator, ws: aiohttp.ClientWebSocketResponse) -> list[Any]:
    """Wait until every frame sent on ``ws`` so far was acted on, and the decisions they
    asked for are committed; the coordinator's frames meanwhile. A frame of an unknown
    type is answered in its turn, after those sent before it."""
    await ws.send_bytes(frame("barrier"))
    received = []
    while (answer := await receive_frame(ws)).get("code") != "unknown_type":
        received.append(answer)
    service = cluster.app[SERVICE]
    await service.settled()
    await service.quiet()
    return received


async def placed(cluster: Coordinator, body: dict[str, Any]) -> list[str]:
    code, answer = await call(cluster, "POST", DEPLOYMENTS, body)
    assert code == 201, answer
    return sorted(view["record"]["id"] for view in answer["containers"])


async def state_of(cluster: Coordinator, container_id: str) -> str | None:
    code, answer = await call(cluster, "GET", f"/v1/containers/{container_id}")
    return answer["state"] if code == 200 else None


async def test_a_partial_status_updates_only_the_containers_it_lists(cluster: Coordinator) -> None:
    ws = await cluster.connect()
    await ws.send_bytes(hello("node-a"))
    assert (await receive_frame(ws))["partial_statuses"] is True
    first, second = await placed(cluster, whole_cores("web", 2))
    revision, _ = cluster.app[SERVICE].desired("node-a")
    await ws.send_bytes(status(revision, [first, second]))
    await acted_on(cluster, ws)
    service = cluster.app[SERVICE]
    before = service.observed(second)

    crashed = {"id": first, "state": "exited", "exit_code": 3}
    await ws.send_bytes(partial(revision, [crashed]))
    await acted_on(cluster, ws)
    now = service.observed(first)
    assert now is not None
    assert (now.state, now.exit_code, now.cpu_usage) == ("exited", 3, None)
    assert service.observed(second) is before  # untouched: the full status's, usage too
    await ws.close()


@pytest.mark.parametrize("report", ["partial-gone", "partial-unchanged", "full"])
async def test_a_stopping_container_goes_when_its_agent_no_longer_holds_it(
    cluster: Coordinator, report: str
) -> None:
    """``partial-gone``: a partial status names it gone; ``partial-unchanged``: the
    session's full status already left it out, but was sent before the agent saw the
    delete, and a recent partial status changes nothing; ``full``: an older agent's full
    status leaves it out. The other stopping container, still held, is kept."""
    ws = await cluster.connect()
    await ws.send_bytes(hello("node-a"))
    await receive_frame(ws)
    first, second = await placed(cluster, whole_cores("web", 2))
    before, _ = cluster.app[SERVICE].desired("node-a")
    held = [first, second] if report == "partial-gone" else [second]
    await ws.send_bytes(status(before, held))
    for container_id in (first, second):
        code, answer = await call(cluster, "DELETE", f"/v1/containers/{container_id}")
        assert code == 200, answer
    await acted_on(cluster, ws)
    assert await state_of(cluster, first) == "stopping"  # a report from before the delete

    after, _ = cluster.app[SERVICE].desired("node-a")
    sent = {
        "partial-gone": partial(after, [], gone=[first]),
        "partial-unchanged": partial(after, []),
        "full": status(after, [second]),
    }[report]
    await ws.send_bytes(sent)
    await acted_on(cluster, ws)
    assert await state_of(cluster, first) is None
    assert await state_of(cluster, second) == "stopping"
    events = (await call(cluster, "GET", f"/v1/events?container={first}"))[1]["events"]
    assert events[-1]["kind"] == "stopped"
    await ws.close()


async def test_a_partial_status_before_a_full_one_lets_nothing_go(cluster: Coordinator) -> None:
    ws = await cluster.connect()
    await ws.send_bytes(hello("node-a"))
    await receive_frame(ws)
    first, second = await placed(cluster, whole_cores("web", 2))
    code, answer = await call(cluster, "DELETE", f"/v1/containers/{first}")
    assert code == 200, answer
    revision, _ = cluster.app[SERVICE].desired("node-a")

    crashed = {"id": second, "state": "exited", "exit_code": 1}
    await ws.send_bytes(partial(revision, [crashed], gone=[first]))
    answers = await acted_on(cluster, ws)
    assert [a["code"] for a in answers if a["type"] == "error"] == ["partial_before_full"]
    assert await state_of(cluster, first) == "stopping"
    observed = cluster.app[SERVICE].observed(second)
    assert observed is not None
    assert observed.state == "exited"  # what it lists is still taken in

    await ws.send_bytes(status(revision, [second]))  # the full one, late: now it goes
    await acted_on(cluster, ws)
    assert await state_of(cluster, first) is None
    await ws.close()


class PartialAgent:
    """A node's agent that reports the node's desired state now, as a partial status
    against the listing it last sent (a full one first)."""

    def __init__(self, cluster: Coordinator, node: str, ws: aiohttp.ClientWebSocketResponse):
        self.cluster, self.node, self.ws = cluster, node, ws
        self.listed: set[str] | None = None

    async def report(self) -> None:
        revision, desired = self.cluster.app[SERVICE].desired(self.node)
        ids = {container.id for container in desired}
        if self.listed is None:
            await self.ws.send_bytes(status(revision, sorted(ids)))
        else:
            new = [{"id": cid, "state": "running"} for cid in sorted(ids - self.listed)]
            await self.ws.send_bytes(partial(revision, new, gone=sorted(self.listed - ids)))
        self.listed = ids


async def test_partial_reports_deploys_and_deletes_at_once_leave_memory_a_fresh_load(
    tmp_path: Path,
) -> None:
    async with coordinator_on(sqlite_engine(tmp_path), tmp_path) as cluster:
        nodes = [f"node-{i}" for i in range(4)]
        agents = [
            PartialAgent(cluster, n, await say_hello(cluster, n, wire_inventory())) for n in nodes
        ]
        await asyncio.gather(*(deploy(cluster, f"before-{i}", 3) for i in range(3)))
        await asyncio.gather(*(agent.report() for agent in agents))  # full ones
        service = cluster.app[SERVICE]
        ids = sorted(c.id for c in service.containers())

        answers = await asyncio.gather(
            *(cluster.call("DELETE", f"/v1/containers/{cid}") for cid in ids[:4]),
            cluster.call("DELETE", "/v1/namespaces/mini/deployments/before-2"),
            *(deploy(cluster, f"during-{i}", 2) for i in range(4)),
            *(agent.report() for agent in agents),
            *(agent.report() for agent in agents),
        )
        codes = {a[0] for a in answers if isinstance(a, tuple)}
        assert codes <= {200, 201, 404, 409}, answers
        for _ in range(3):  # caught up: what was stopped goes, what it made room for comes
            await asyncio.gather(*(agent.report() for agent in agents))
            for agent in agents:
                await acted_on(cluster, agent.ws)
        assert service.books.stopping == {}
        await sessions_end(cluster, [agent.ws for agent in agents])
        await assert_memory_is_a_fresh_load(cluster)


async def work_of_one_partial(
    tmp_path: Path, containers: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, int]:
    """How many container statuses the books take in, and how many the state tally
    counts, for one partial status naming one change, on a node of ``containers``."""
    async with coordinator_on(sqlite_engine(tmp_path), tmp_path) as cluster:
        ws = await say_hello(cluster, "node-a", wire_inventory())
        await deploy(cluster, "web", containers)
        revision, desired = cluster.app[SERVICE].desired("node-a")
        ids = [container.id for container in desired]
        await ws.send_bytes(status(revision, ids))
        await acted_on(cluster, ws)

        taken: list[ContainerStatus] = []
        counted: list[str] = []
        observe, count = Books.observe, StateTally.count

        def observing(books: Books, node: str, statuses: Iterable[ContainerStatus]) -> None:
            seen = list(statuses)
            taken.extend(seen)
            observe(books, node, seen)

        def counting(tally: StateTally, record: Any, observed: Any) -> None:
            counted.append(record.id)
            count(tally, record, observed)

        monkeypatch.setattr(Books, "observe", observing)
        monkeypatch.setattr(StateTally, "count", counting)
        await ws.send_bytes(partial(revision, [{"id": ids[0], "state": "exited"}]))
        await acted_on(cluster, ws)
        monkeypatch.undo()
        observed = cluster.app[SERVICE].observed(ids[0])
        assert observed is not None
        assert observed.state == "exited"
        await sessions_end(cluster, [ws])
        return len(taken), len(counted)


async def test_a_partial_reports_work_does_not_grow_with_the_nodes_containers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = await work_of_one_partial(tmp_path / "small", 3, monkeypatch)
    large = await work_of_one_partial(tmp_path / "large", 60, monkeypatch)
    assert small == large == (1, 1)
