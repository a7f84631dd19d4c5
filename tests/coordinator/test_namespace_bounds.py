"""A namespace token stays inside its namespaces (issue 15): a deployment may name only a
pool its namespace may use, and a node's allocation names only its own containers.

A real coordinator on a real port; "team-a" is the namespace token's only namespace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.coordinator.conftest import API_TOKEN, NAMESPACE_TOKEN, Coordinator, register
from tests.coordinator.test_deployment_api import call

MEMORY_ONLY = {"cpu": "0.1", "memory": "16Mi"}


def deployment(name: str, pool: str = "", count: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "busybox", "count": count}
    return body | {"resources": MEMORY_ONLY} | ({"pool": pool} if pool else {})


async def put_pool(cluster: Coordinator, name: str, fields: dict[str, Any]) -> None:
    status, answer = await call(cluster, "PUT", f"/v1/pools/{name}", fields)
    assert status == 200, answer


@pytest.fixture
async def teams(cluster: Coordinator) -> Coordinator:
    """team-a with a batch pool below it, team-b with its own, a pool opened to team-a."""
    await register(cluster, "node-a")
    await put_pool(cluster, "team-a", {})
    await put_pool(cluster, "team-a-batch", {"parent": "team-a"})
    await put_pool(cluster, "team-b", {})
    await put_pool(cluster, "shared", {"namespaces": ["team-a"]})
    await put_pool(cluster, "shared-gpu", {"parent": "shared"})
    return cluster


@pytest.mark.parametrize(
    ("pool", "status", "code"),
    [
        ("team-b", 403, "pool_forbidden"),
        ("nowhere", 422, "unknown_pool"),
        ("", 201, None),
        ("team-a", 201, None),
        ("team-a-batch", 201, None),
        ("shared", 201, None),
        ("shared-gpu", 201, None),
    ],
)
@pytest.mark.parametrize("token", [NAMESPACE_TOKEN, API_TOKEN], ids=["team-token", "admin"])
async def test_a_deployment_names_only_a_pool_its_namespace_may_use(
    teams: Coordinator, pool: str, status: int, code: str | None, token: str
) -> None:
    got, answer = await call(
        teams, "POST", "/v1/namespaces/team-a/deployments", deployment("web", pool), token=token
    )
    assert got == status, answer
    _, listed = await call(teams, "GET", "/v1/containers")
    if code is None:
        assert [c["record"]["pool"] for c in listed["containers"]] == [pool or "team-a"]
    else:
        assert answer["error"]["code"] == code
        assert answer["error"]["details"]["pool"] == pool
        assert listed["containers"] == []
        _, pools = await call(teams, "GET", "/v1/pools/team-b")
        assert pools["introspection"]["demand_share"] in (None, 0)


async def test_a_closed_pool_takes_no_more_containers_but_keeps_those_it_has(
    teams: Coordinator,
) -> None:
    path = "/v1/namespaces/team-a/deployments"
    status, answer = await call(teams, "POST", path, deployment("web", "shared"))
    assert status == 201, answer
    await put_pool(teams, "shared", {"namespaces": []})
    status, answer = await call(teams, "POST", path + "/web/scale", {"count": 2})
    assert status == 403, answer
    assert answer["error"]["code"] == "pool_forbidden"
    status, answer = await call(teams, "POST", path + "/web/scale", {"count": 0})
    assert status == 200, answer


@pytest.mark.parametrize(
    "namespaces",
    [["Team A"], "team-a", [1], ["-a"]],
    ids=["not-a-label", "not-a-list", "not-a-string", "leading-dash"],
)
async def test_a_pool_opened_to_something_that_is_not_a_namespace_is_refused(
    cluster: Coordinator, namespaces: object
) -> None:
    status, answer = await call(cluster, "PUT", "/v1/pools/p", {"namespaces": namespaces})
    assert status == 422, answer
    assert answer["error"]["code"] == "invalid_namespaces"
    status, _ = await call(cluster, "GET", "/v1/pools/p")
    assert status == 404


async def test_a_node_allocation_names_only_the_tokens_own_containers(
    cluster: Coordinator,
) -> None:
    await register(cluster, "node-a")
    for team, count in (("team-a", 1), ("team-b", 2)):
        status, answer = await call(
            cluster, "POST", f"/v1/namespaces/{team}/deployments", deployment("web", count=count)
        )
        assert status == 201, answer
    _, mine = await call(cluster, "GET", "/v1/containers", token=NAMESPACE_TOKEN)
    own = [c["record"]["id"] for c in mine["containers"]]
    status, seen = await call(cluster, "GET", "/v1/nodes/node-a/allocation", token=NAMESPACE_TOKEN)
    assert status == 200, seen
    assert (seen["containers"], seen["other_containers"]) == (own, 2)
    _, everything = await call(cluster, "GET", "/v1/nodes/node-a/allocation")
    assert (len(everything["containers"]), everything["other_containers"]) == (3, 0)
    assert seen["memory_used"] == everything["memory_used"]  # amounts are not hidden


CONCURRENT_POOLS = ["team-a-batch", "team-b", "shared", "nowhere", "", "team-a-batch", "shared-gpu"]
OPEN = {"team-a", "team-a-batch", "shared", "shared-gpu"}


async def deploy_at_once(teams: Coordinator) -> list[tuple[int, Any]]:
    """One deployment per pool of CONCURRENT_POOLS, all sent at once with team-a's token."""
    return await asyncio.gather(
        *(
            call(
                teams,
                "POST",
                "/v1/namespaces/team-a/deployments",
                deployment(f"d{i}", pool),
                token=NAMESPACE_TOKEN,
            )
            for i, pool in enumerate(CONCURRENT_POOLS)
        )
    )


async def test_concurrent_deployments_never_land_in_a_forbidden_pool(teams: Coordinator) -> None:
    answers = await deploy_at_once(teams)
    for pool, (status, answer) in zip(CONCURRENT_POOLS, answers, strict=True):
        if pool in ("team-b", "nowhere"):
            assert (status, answer["error"]["code"]) == (
                (403, "pool_forbidden") if pool == "team-b" else (422, "unknown_pool")
            )
        else:  # concurrent deploys never refuse each other without a real conflict
            assert status == 201, answer
    _, containers = await call(teams, "GET", "/v1/containers")
    assert {c["record"]["pool"] for c in containers["containers"]} <= OPEN
    stored = await teams.stored("/containers/")
    assert {value["pool"] for value in stored.values()} <= OPEN


async def test_concurrent_deployments_into_pools_match_the_store(teams: Coordinator) -> None:
    """What memory holds after concurrent requests is exactly what the store holds."""
    answers = await deploy_at_once(teams)
    placed = {f"d{i}" for i, (status, _) in enumerate(answers) if status == 201}
    assert placed == {
        f"d{i}" for i, pool in enumerate(CONCURRENT_POOLS) if pool in OPEN or not pool
    }
    _, listed = await call(teams, "GET", "/v1/namespaces/team-a/deployments")
    in_memory = {d["deployment"]["spec"]["name"]: d["deployment"] for d in listed["deployments"]}
    stored = await teams.stored("/deployments/team-a/")
    assert {value["spec"]["name"]: value for value in stored.values()} == in_memory
    _, containers = await call(teams, "GET", "/v1/containers")
    stored_containers = await teams.stored("/containers/")
    assert {c["record"]["id"]: c["record"] for c in containers["containers"]} == {
        value["id"]: value for value in stored_containers.values()
    }
