"""A quota write relabels the running containers at once (quotas spec 2: changing min
relabels; a deleted quota leaves its containers unmanaged), and the agent is told."""

from __future__ import annotations

from tests.coordinator.conftest import NAMESPACE, Coordinator, register
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call, next_desired, spec

QUOTA = f"/v1/elasticquotas/{NAMESPACE}"


async def labels(cluster: Coordinator) -> list[str]:
    views = (await call(cluster, "GET", "/v1/containers"))[1]["containers"]
    return sorted(view["record"]["capacity"] for view in views)


async def test_changing_min_relabels_and_pushes_the_labels(cluster: Coordinator) -> None:
    ws = await register(cluster, "node-a")
    quota = {"namespace": NAMESPACE, "min": {"cpu": "0.5"}}
    assert (await call(cluster, "PUT", QUOTA, quota))[0] == 200
    assert (await call(cluster, "POST", DEPLOYMENTS, spec(count=2)))[0] == 201
    assert await labels(cluster) == ["in-quota", "over-quota"]
    await next_desired(ws)

    assert (await call(cluster, "PUT", QUOTA, quota | {"min": {"cpu": "1"}}))[0] == 200
    assert await labels(cluster) == ["in-quota", "in-quota"]
    pushed = await next_desired(ws)
    assert sorted(c["capacity"] for c in pushed["containers"]) == ["in-quota", "in-quota"]
    relabelled = (await call(cluster, "GET", "/v1/events?kind=relabelled"))[1]["events"]
    assert [event["reason"] for event in relabelled] == ["over-quota -> in-quota"]

    assert (await call(cluster, "DELETE", QUOTA))[0] == 200
    assert await labels(cluster) == ["", ""]
    await ws.close()
