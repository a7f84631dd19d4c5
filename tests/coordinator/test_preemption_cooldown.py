"""The preemption cool-down (quotas spec 8.3) is stored with the preemption that starts
it, so a restarted coordinator still keeps the preempted quota from striking back."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tests.coordinator.conftest import Coordinator, config_for, register, report_caught_up, start
from tests.coordinator.test_deployment_api import call, spec


async def quota(cluster: Coordinator, namespace: str, minimum: str) -> None:
    body = {"namespace": namespace, "min": {"cpu": minimum}, "max": {"cpu": "2"}}
    status, answer = await call(cluster, "PUT", f"/v1/elasticquotas/{namespace}", body)
    assert status == 200, answer


async def deploy(cluster: Coordinator, namespace: str, name: str, count: int) -> int:
    path = f"/v1/namespaces/{namespace}/deployments"
    return (await call(cluster, "POST", path, spec(name, count=count)))[0]


async def test_the_cool_down_outlives_a_restart(tmp_path: Path) -> None:
    config = config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        ws = await register(cluster, "node-a")  # 2 CPUs: four half cores
        await quota(cluster, "team-a", "1")
        await quota(cluster, "team-b", "0.5")
        assert await deploy(cluster, "team-b", "b", 3) == 201  # one in-quota, two borrowed
        assert await deploy(cluster, "team-a", "a", 1) == 201  # the node is full
        assert await deploy(cluster, "team-a", "claim", 1) == 201  # R1: team-a takes one back
        preempted = (await call(cluster, "GET", "/v1/events?kind=preempted"))[1]["events"]
        assert [event["namespace"] for event in preempted] == ["team-b"]
        await report_caught_up(cluster, ws)  # the victim is gone: the claim is placed
        # The minimums move so that team-b could now reclaim from a borrowing team-a.
        await quota(cluster, "team-a", "0.5")
        await quota(cluster, "team-b", "1.5")
        await ws.close()
    await runner.cleanup()

    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        ws = await register(cluster, "node-a")
        over = (await call(cluster, "GET", "/v1/containers?capacity=over-quota"))[1]
        assert [view["record"]["namespace"] for view in over["containers"]] == ["team-a"]
        status, refused = await call(
            cluster, "POST", "/v1/namespaces/team-b/deployments", spec("back", count=1)
        )
        assert status == 409, refused
        assert refused["error"]["details"]["reason"] == "capacity"
        assert "node-a" in refused["error"]["details"]["preemption"]
        preempted = (await call(cluster, "GET", "/v1/events?kind=preempted"))[1]["events"]
        assert len(preempted) == 1  # nothing of team-a was taken
        await ws.close()
    await runner.cleanup()
