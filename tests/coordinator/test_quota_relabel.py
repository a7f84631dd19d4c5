"""A quota write relabels the running containers at once (quotas spec 2: changing min
relabels; a deleted quota leaves its containers unmanaged), and the agent is told."""

from __future__ import annotations

import asyncio

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


async def test_quota_writes_and_deploys_at_once_leave_memory_equal_to_the_store(
    cluster: Coordinator,
) -> None:
    """Quota writes are decisions like deploys: sent together over real HTTP, each is
    committed with the labels it moves, and memory is the store afterwards."""
    await register(cluster, "node-a")
    tiny = {"resources": {"cpu": "0.1", "memory": "16Mi"}, "cpu_bind": False, "count": 1}
    writes = [
        call(cluster, "PUT", QUOTA, {"namespace": NAMESPACE, "min": {"cpu": f"0.{i}"}})
        for i in range(1, 6)
    ]
    deploys = [call(cluster, "POST", DEPLOYMENTS, spec(f"w{i}", **tiny)) for i in range(5)]
    answers = await asyncio.gather(*writes, *deploys, call(cluster, "DELETE", QUOTA))
    assert [status for status, _ in answers[:10]] == [200] * 5 + [201] * 5, answers
    assert answers[10][0] in (200, 404), answers[10]  # deleted, or not there yet
    stored_quotas = await cluster.stored("/quotas/")
    shown = (await call(cluster, "GET", "/v1/quotas"))[1]["quotas"]
    assert sorted(q["name"] for q in shown) == sorted(q["name"] for q in stored_quotas.values())
    for quota in shown:
        assert quota["min"] == stored_quotas[f"/quotas/{quota['name']}"]["min"]
    views = (await call(cluster, "GET", "/v1/containers"))[1]["containers"]
    stored = await cluster.stored("/containers/")
    assert {v["record"]["id"]: v["record"] for v in views} == {
        value["id"]: value for value in stored.values()
    }
