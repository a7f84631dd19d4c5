"""Each deployment and scale-up is an ``admitted`` event, committed with its placements:
how many containers went into which pool, and how their quota labels them."""

from __future__ import annotations

from tests.coordinator.conftest import NAMESPACE, Coordinator, register
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call, spec


async def events(cluster: Coordinator) -> list[dict[str, str]]:
    listed: list[dict[str, str]] = (await call(cluster, "GET", "/v1/events"))[1]["events"]
    return listed


async def test_a_deployment_and_its_scale_up_are_admitted_with_their_quota_labels(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    quota = {"namespace": NAMESPACE, "min": {"cpu": "0.5"}, "max": {"cpu": "2"}}
    assert (await call(cluster, "PUT", f"/v1/elasticquotas/{NAMESPACE}", quota))[0] == 200
    assert (await call(cluster, "POST", DEPLOYMENTS, spec(count=2)))[0] == 201
    first = await events(cluster)
    assert [e["kind"] for e in first] == ["admitted", "placed", "placed"]
    assert first[0]["deployment"] == "web"
    assert first[0]["reason"] == (
        f"2 container(s) into pool {NAMESPACE}; quota {NAMESPACE}: 1 in-quota, 1 over-quota"
    )
    assert (await call(cluster, "POST", f"{DEPLOYMENTS}/web/scale", {"count": 3}))[0] == 200
    (admitted,) = [e for e in await events(cluster) if e["kind"] == "admitted"][1:]
    assert admitted["reason"] == (
        f"1 container(s), scaled to 3 into pool {NAMESPACE};"
        f" quota {NAMESPACE}: 0 in-quota, 1 over-quota"
    )
    await ws.close()


async def test_a_namespace_without_a_quota_is_admitted_unmanaged(cluster: Coordinator) -> None:
    ws = await register(cluster, "node-a")
    batch = {"namespaces": [NAMESPACE]}  # a pool the namespace may use
    assert (await call(cluster, "PUT", "/v1/pools/batch", batch))[0] == 200
    assert (await call(cluster, "POST", DEPLOYMENTS, spec(count=1, pool="batch")))[0] == 201
    (admitted,) = [e for e in await events(cluster) if e["kind"] == "admitted"]
    assert admitted["reason"] == "1 container(s) into pool batch; no quota governs the namespace"
    await ws.close()
