"""The quota API against a real coordinator: writes, refusals that change nothing,
status, persistence and the cluster-wide summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.coordinator.conftest import API_TOKEN, Coordinator, config_for, register, start

EQ = "/v1/elasticquotas"
CEQ = "/v1/compositeelasticquotas"


async def put(coordinator: Coordinator, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    response = await coordinator.http.put(
        coordinator.url + path, json=body, headers={"Authorization": f"Bearer {API_TOKEN}"}
    )
    return response.status, await response.json()


async def delete(coordinator: Coordinator, path: str) -> int:
    response = await coordinator.http.delete(
        coordinator.url + path, headers={"Authorization": f"Bearer {API_TOKEN}"}
    )
    return response.status


async def quota_names(coordinator: Coordinator) -> list[str]:
    summary = await coordinator.get_json("/v1/quotas")
    return [quota["name"] for quota in summary["quotas"]]


async def test_an_elastic_quota_is_stored_in_canonical_form_with_status(
    coordinator: Coordinator,
) -> None:
    body = {"namespace": "team-a", "min": {"cpu": "500m", "memory": "1Gi"}, "max": {"cpu": 2}}
    status, quota = await put(coordinator, f"{EQ}/team-a", body)
    assert status == 200, quota
    assert quota == {
        "name": "team-a",
        "kind": "ElasticQuota",
        "namespaces": ["team-a"],
        "min": {"cpu": "0.5", "memory": 2**30},
        "max": {"cpu": "2"},
        "status": {"used": {"cpu": "0", "memory": 0}, "over_quota": {"cpu": "0", "memory": 0}},
    }
    assert await coordinator.get_json(f"{EQ}/team-a") == quota
    assert (await coordinator.get(f"{CEQ}/team-a")).status == 404  # the other kind


async def test_a_composite_quota_pools_several_namespaces(coordinator: Coordinator) -> None:
    body = {"namespaces": ["ml-1", "ml-2"], "min": {"gpu-memory": 40}}
    status, quota = await put(coordinator, f"{CEQ}/ml", body)
    assert status == 200, quota
    assert (quota["kind"], quota["namespaces"], quota["min"]) == (
        "CompositeElasticQuota",
        ["ml-1", "ml-2"],
        {"gpu-memory": 40},
    )


@pytest.mark.parametrize(
    ("first", "second", "status", "code"),
    [
        (
            (f"{EQ}/a", {"namespace": "shared"}),
            (f"{EQ}/b", {"namespace": "shared"}),
            409,
            "namespace_has_elasticquota",
        ),
        (
            (f"{EQ}/a", {"namespace": "shared"}),
            (f"{CEQ}/c", {"namespaces": ["shared", "other"]}),
            409,
            "namespace_has_elasticquota",
        ),
        (
            (f"{CEQ}/c", {"namespaces": ["shared", "other"]}),
            (f"{EQ}/a", {"namespace": "shared"}),
            409,
            "namespace_in_composite",
        ),
        (
            (f"{EQ}/x", {"namespace": "ns-1"}),
            (f"{CEQ}/x", {"namespaces": ["ns-2"]}),
            409,
            "quota_name_taken",
        ),
        (
            (f"{EQ}/a", {"namespace": "ns-1"}),
            (f"{EQ}/b", {"namespace": "ns-2", "min": {"cpu": 4}, "max": {"cpu": 2}}),
            422,
            "max_below_min",
        ),
        (
            (f"{EQ}/a", {"namespace": "ns-1"}),
            (f"{EQ}/Bad_Name", {"namespace": "ns-2"}),
            422,
            "invalid_name",
        ),
        (
            (f"{EQ}/a", {"namespace": "ns-1"}),
            (f"{EQ}/b", {"namespace": "ns-2", "min": {"gpu-memory": "16Gi"}}),
            422,
            "invalid_quantity",
        ),
        (
            (f"{EQ}/a", {"namespace": "ns-1"}),
            (f"{EQ}/b", {"namespace": "ns-2", "min": {"nvidia.com/mig-2g.20gbx": 1}}),
            422,
            "malformed_mig_name",
        ),
        (
            (f"{EQ}/a", {"namespace": "ns-1"}),
            (f"{CEQ}/b", {"namespaces": ["ns-2", "ns-2"]}),
            422,
            "duplicate_namespace",
        ),
    ],
    ids=[
        "second-quota-in-a-namespace",
        "composite-over-an-elastic-namespace",
        "elastic-over-a-composite-namespace",
        "name-of-the-other-kind",
        "max-below-min",
        "invalid-name",
        "gpu-memory-with-a-suffix",
        "malformed-mig-name",
        "duplicate-namespace",
    ],
)
async def test_a_write_that_breaks_a_rule_names_it_and_changes_nothing(
    coordinator: Coordinator,
    first: tuple[str, dict[str, Any]],
    second: tuple[str, dict[str, Any]],
    status: int,
    code: str,
) -> None:
    accepted, _ = await put(coordinator, *first)
    assert accepted == 200
    before = await coordinator.get_json("/v1/quotas")
    refused, answer = await put(coordinator, *second)
    assert (refused, answer["error"]["code"]) == (status, code)
    assert answer["error"]["message"]
    assert await coordinator.get_json("/v1/quotas") == before


async def test_a_malformed_body_is_400(coordinator: Coordinator) -> None:
    status, answer = await put(coordinator, f"{EQ}/a", {"namespaces": ["x"]})
    assert (status, answer["error"]["code"]) == (400, "invalid_request")


async def test_a_quota_can_be_replaced_and_deleted(coordinator: Coordinator) -> None:
    await put(coordinator, f"{EQ}/a", {"namespace": "ns-1", "min": {"cpu": 1}})
    status, quota = await put(coordinator, f"{EQ}/a", {"namespace": "ns-1", "min": {"cpu": 3}})
    assert (status, quota["min"]) == (200, {"cpu": "3"})
    assert await delete(coordinator, f"{EQ}/a") == 200
    assert (await coordinator.get(f"{EQ}/a")).status == 404
    assert await delete(coordinator, f"{EQ}/a") == 404
    # The namespace is free again for a composite quota.
    status, _ = await put(coordinator, f"{CEQ}/c", {"namespaces": ["ns-1", "ns-2"]})
    assert status == 200


async def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    config = config_for(tmp_path)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        first = Coordinator(url=url, app=runner.app, http=http)
        await put(first, f"{EQ}/a", {"namespace": "ns-1", "min": {"memory": "2Gi"}})
        await put(first, f"{CEQ}/c", {"namespaces": ["ns-2", "ns-3"], "max": {"cpu": 8}})
        await runner.cleanup()
        runner, url = await start(config)
        second = Coordinator(url=url, app=runner.app, http=http)
        assert await quota_names(second) == ["a", "c"]
        assert (await second.get_json(f"{CEQ}/c"))["max"] == {"cpu": "8"}
    await runner.cleanup()


async def test_the_summary_warns_when_guarantees_exceed_the_cluster(
    coordinator: Coordinator,
) -> None:
    ws = await register(coordinator, "node-a")  # two CPUs, 1 GiB
    await put(coordinator, f"{EQ}/a", {"namespace": "ns-1", "min": {"cpu": 1}})
    await put(coordinator, f"{CEQ}/c", {"namespaces": ["ns-2", "ns-3"], "min": {"cpu": 2}})
    summary = await coordinator.get_json("/v1/quotas")
    assert summary["total_min"] == {"cpu": "3"}  # the composite counts once
    assert summary["capacity"] == {"cpu": "2", "memory": 2**30}
    assert summary["warnings"] == [
        "the quotas guarantee 3 of cpu in all, but the ready nodes offer 2"
    ]
    await ws.close()
