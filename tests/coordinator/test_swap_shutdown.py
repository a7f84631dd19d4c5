"""A coordinator that stops while the end of a swap is being committed finishes that
commit first: the agent reported the swap done, and a restart finds it ended (the old
record gone, one allocation), instead of a swap still under way that only the agent's
next report would end. The store's commits of containers are made slow (a slow disk) so
that the commit is still in flight when the stop begins."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.deployments.records import CONTAINER_PREFIX
from coordinator.keys import DEPLOYMENTS, STORE
from coordinator.status_listing import Listing
from coordinator.store import Txn, TxnResult
from shared.protocol import ContainerStatus, Status
from tests.coordinator.conftest import (
    Coordinator,
    config_for,
    register,
    start,
)

SLOW_DISK_SECONDS = 0.5
WEB = {
    "name": "web",
    "image": "busybox",
    "cpu_bind": True,
    "resources": {"cpu": "0.5", "memory": "64Mi"},
}


def done(container_id: str) -> Status:
    """The agent's report: the new container runs, the old one is gone."""
    running = ContainerStatus(
        id=container_id, state="running", namespace="team-a", deployment="web", replacing="done"
    )
    return Status(applied_revision=2, containers=[running])


async def test_shutdown_awaits_the_commit_of_a_swaps_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        coordinator = Coordinator(url=url, app=runner.app, http=http)
        ws = await register(coordinator, "node-a")
        status, placed = await coordinator.call("POST", "/v1/namespaces/team-a/deployments", WEB)
        assert status == 201, placed
        old = placed["containers"][0]["record"]["id"]
        status, swapped = await coordinator.call(
            "POST", f"/v1/containers/{old}/replace", {"image": "busybox:2"}
        )
        assert status == 201, swapped
        new = swapped["record"]["id"]
        await ws.close()
    service, store = runner.app[DEPLOYMENTS], runner.app[STORE]
    commit = store.commit

    async def slowly(txn: Txn) -> TxnResult:
        if any(key.startswith(CONTAINER_PREFIX) for key in (*txn.puts, *txn.deletes)):
            await asyncio.sleep(SLOW_DISK_SECONDS)
        return await commit(txn)

    monkeypatch.setattr(store, "commit", slowly)
    report = done(new)
    service.observe("node-a", report, Listing().take(report))  # as the hub does
    await runner.cleanup()

    runner, url = await start(config)
    try:
        async with aiohttp.ClientSession() as http:
            coordinator = Coordinator(url=url, app=runner.app, http=http)
            record: Any = await coordinator.get_json(f"/v1/containers/{new}")
            assert record["record"]["replaces"] == ""
            assert (await coordinator.get(f"/v1/containers/{old}")).status == 404
            allocation = await coordinator.get_json("/v1/nodes/node-a/allocation")
            assert allocation["containers"] == [new]
    finally:
        await runner.cleanup()
