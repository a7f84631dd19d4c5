"""``POST /v1/plans`` against a real coordinator: what-if placements, inline or on the
registered nodes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.coordinator.conftest import API_TOKEN, Coordinator, register

GiB = 2**30
MiB = 2**20
TWO_SOCKET = {  # 24 cores, NUMA 0 = cores 0-11, NUMA 1 = 12-23
    "cores": 24,
    "numa": {str(core): core // 12 for core in range(24)},
    "memory": "128Gi",
    "numa_memory": {"0": "64Gi", "1": "64Gi"},
}


async def post_plan(coordinator: Coordinator, body: dict[str, Any]) -> tuple[int, Any]:
    response = await coordinator.http.post(
        coordinator.url + "/v1/plans", json=body, headers={"Authorization": f"Bearer {API_TOKEN}"}
    )
    return response.status, await response.json()


async def test_the_1_7_cpu_example_binds_a_whole_core_and_70_pieces(
    coordinator: Coordinator,
) -> None:
    body = {
        "request": {"cpu": "1.7", "memory": "512Mi", "cpu_bind": True},
        "count": 10,
        "strategy": "auto",
        "nodes": [{"name": "n1"} | TWO_SOCKET, {"name": "n2"} | TWO_SOCKET],
    }
    status, plan = await post_plan(coordinator, body)
    assert status == 200, plan
    assert (plan["cpu_pieces"], plan["memory"], plan["cpu_bind"]) == (170, 512 * MiB, True)
    assert [(n["name"], n["deploy"]) for n in plan["nodes"]] == [("n1", 5), ("n2", 5)]
    assert plan["capacity"] == sum(n["capacity"] for n in plan["nodes"])
    for container in plan["nodes"][0]["containers"]:
        pieces = sorted(container["cores"].values())
        assert pieces == [70, 100]  # one whole core + 70 pieces of a fragment core
        assert container["cores"][str(container["fragment"])] == 70
        docker = container["docker"]
        assert docker["cpu_shares"] == 717  # max(2, round_half_up(1024 * 70 / 100))
        assert docker["cpu_quota"] == -1
        assert docker["cpuset_mems"] == str(container["numa"])
        assert docker["mem_limit"] == 512 * MiB
        cores = sorted(int(core) for core in container["cores"])
        assert docker["cpuset_cpus"] == ",".join(map(str, cores))


async def test_the_seed_numa_example_places_two_local_and_one_cross(
    coordinator: Coordinator,
) -> None:
    node = {
        "name": "numa",
        "cores": 4,
        "numa": {"0": 0, "1": 0, "2": 1, "3": 1},
        "memory": 2 * GiB,
        "numa_memory": {"0": "1Gi", "1": "1Gi"},
    }
    body = {
        "request": {"cpu": 1, "memory": "600Mi", "cpu_bind": True},
        "count": 3,
        "nodes": [node],
    }
    status, plan = await post_plan(coordinator, body)
    assert status == 200, plan
    [planned] = plan["nodes"]
    assert planned["capacity"] == 3
    assert [(c["cores"], c["numa"]) for c in planned["containers"]] == [
        ({"0": 100}, 0),
        ({"2": 100}, 1),
        ({"1": 100}, None),
    ]
    assert [c["docker"]["cpuset_mems"] for c in planned["containers"]] == ["0", "1", ""]


async def test_memory_mode_runs_on_the_shared_pool_with_a_quota(coordinator: Coordinator) -> None:
    body = {
        "request": {"cpu": "0.5", "memory": "1Gi"},
        "count": 2,
        "nodes": [{"name": "m1", "cores": 4, "memory": "3Gi"}],
    }
    status, plan = await post_plan(coordinator, body)
    assert status == 200, plan
    [planned] = plan["nodes"]
    assert (planned["capacity"], planned["deploy"]) == (3, 2)
    docker = planned["containers"][0]["docker"]
    assert (docker["cpuset_cpus"], docker["cpu_quota"], docker["cpu_shares"]) == (
        "0,1,2,3",  # spec 7: ascending ids, comma-joined
        50000,
        1024,
    )


async def test_existing_containers_steer_auto(coordinator: Coordinator) -> None:
    nodes = [
        {"name": "a", "cores": 8, "memory": "8Gi", "existing": 3},
        {"name": "b", "cores": 8, "memory": "8Gi", "existing": 0},
    ]
    body = {"request": {"cpu": 1, "memory": "1Gi", "cpu_bind": True}, "count": 3, "nodes": nodes}
    status, plan = await post_plan(coordinator, body)
    assert status == 200, plan
    assert {n["name"]: (n["existing"], n["deploy"]) for n in plan["nodes"]} == {
        "a": (3, 0),
        "b": (0, 3),
    }


async def test_a_plan_that_cannot_be_made_is_409_with_every_capacity(
    coordinator: Coordinator,
) -> None:
    body = {
        "request": {"cpu": 2, "memory": "1Gi", "cpu_bind": True},
        "count": 5,
        "nodes": [
            {"name": "a", "cores": 4, "memory": "8Gi"},
            {"name": "b", "cores": 2, "memory": "8Gi"},
        ],
    }
    status, answer = await post_plan(coordinator, body)
    assert status == 409
    error = answer["error"]
    assert error["code"] == "insufficient_capacity"
    assert "5" in error["message"]
    assert error["details"]["capacities"] == {"a": 2, "b": 1}


@pytest.mark.parametrize(
    ("request_spec", "extra", "fragment"),
    [
        ({"cpu": "0.001", "memory": "1Gi", "cpu_bind": True}, {}, "0.001"),
        ({"cpu": 0, "memory": "1Gi", "cpu_bind": True}, {}, "cpu"),
        ({"cpu": 1, "memory": -5}, {}, "memory"),
        ({"cpu": 1, "memory": "1Gi"}, {"strategy": "random"}, "random"),
        ({"cpu": 1, "memory": "1Gi"}, {"count": 0}, "0"),
        ({"cpu": 1, "memory": "1Gi", "cpu_bind": "yes"}, {}, "cpu_bind"),
    ],
    ids=[
        "finer-than-a-piece",
        "zero-cpu-bound",
        "negative-memory",
        "unknown-strategy",
        "no-containers",
        "flag-not-boolean",
    ],
)
async def test_a_bad_request_is_400(
    coordinator: Coordinator, request_spec: dict[str, Any], extra: dict[str, Any], fragment: str
) -> None:
    body = {
        "request": request_spec,
        "count": 1,
        "nodes": [{"name": "a", "cores": 4, "memory": "8Gi"}],
    } | extra
    status, answer = await post_plan(coordinator, body)
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert fragment in answer["error"]["message"]


@pytest.mark.parametrize(
    ("node", "fragment"),
    [
        ({"name": "a", "cores": 4, "memory": "lots"}, "memory"),
        ({"name": "a", "cores": {"x": 100}, "memory": "1Gi"}, "'x'"),
        ({"name": "a", "cores": 4, "memory": "1Gi", "numa": {"0": 0}}, "numa"),
    ],
    ids=["bad-memory", "bad-core-id", "numa-map-missing-cores"],
)
async def test_a_bad_inline_node_is_400_naming_it(
    coordinator: Coordinator, node: dict[str, Any], fragment: str
) -> None:
    body = {"request": {"cpu": 1, "memory": "1Gi"}, "count": 1, "nodes": [node]}
    status, answer = await post_plan(coordinator, body)
    assert status == 400, answer
    assert fragment in answer["error"]["message"]


async def test_without_inline_nodes_the_registered_ready_nodes_are_planned(
    coordinator: Coordinator,
) -> None:
    ws = await register(coordinator, "node-a")  # two CPUs, 1 GiB
    body = {"request": {"cpu": 1, "memory": "256Mi", "cpu_bind": True}, "count": 2}
    status, plan = await post_plan(coordinator, body)
    assert status == 200, plan
    assert [(n["name"], n["capacity"], n["deploy"]) for n in plan["nodes"]] == [("node-a", 2, 2)]
    assert sorted(c["docker"]["cpuset_cpus"] for c in plan["nodes"][0]["containers"]) == ["0", "1"]
    await ws.close()


async def test_planning_needs_an_api_token(coordinator: Coordinator) -> None:
    response = await coordinator.http.post(coordinator.url + "/v1/plans", json={})
    assert response.status == 401
