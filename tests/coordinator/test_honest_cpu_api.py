"""Honest CPU through the API (issue 17, items 2-4), on a registered two-CPU node as in
the README's walk-through: realloc keeps bound cores exclusive, unbound containers are
charged CPU in deploys, plans and the allocation view, ``--cpu 0`` is refused, and a
node's ``cpu_overcommit`` is set with SetNode and kept in its allocation record."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.coordinator.conftest import Coordinator, register

DEPLOYMENTS = "/v1/namespaces/team-a/deployments"


def spec(name: str, count: int, cpu: str, *, bind: bool, memory: str = "32Mi") -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "count": count,
        "cpu_bind": bind,
        "resources": {"cpu": cpu, "memory": memory},
    }


async def walkthrough(cluster: Coordinator) -> list[str]:
    """The README's deployments: web (2 x 0.5 CPU, bound: core 0), batch (0.5 unbound);
    the web containers' ids."""
    status, web = await cluster.call("POST", DEPLOYMENTS, spec("web", 2, "0.5", bind=True))
    assert status == 201, web
    status, batch = await cluster.call("POST", DEPLOYMENTS, spec("batch", 1, "0.5", bind=False))
    assert status == 201, batch
    return [c["record"]["id"] for c in web["containers"]]


async def test_a_realloc_cannot_take_the_shared_pool_from_unbound_containers(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    web = await walkthrough(cluster)
    before = await cluster.get_json("/v1/nodes/node-a/allocation")
    assert before["shared_pool"] == [1]
    status, refused = await cluster.call("PATCH", f"/v1/containers/{web[0]}", {"cpu": "+0.5"})
    assert status == 409, refused
    assert "kept for the unbound containers" in refused["error"]["message"]
    assert await cluster.get_json("/v1/nodes/node-a/allocation") == before
    await ws.close()


async def test_unbound_containers_are_charged_cpu_in_deploys_plans_and_the_allocation(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    await walkthrough(cluster)
    allocation = await cluster.get_json("/v1/nodes/node-a/allocation")
    assert (allocation["unbound_cpu"], allocation["shared_cpu"]) == (50, 100)
    assert (allocation["shared_limit"], allocation["cpu_overcommit"]) == (100, "1")
    plan = {"request": {"cpu": "2", "memory": "16Mi"}, "count": 1}
    status, answer = await cluster.call("POST", "/v1/plans", plan)
    assert status == 409, answer  # was "1506 more" on this two-CPU node
    assert answer["error"]["details"]["capacities"] == {"node-a": 0}
    status, answer = await cluster.call("POST", "/v1/plans", plan | {"request": {"cpu": "0.5"}})
    assert (status, answer["error"]["code"]) == (400, "invalid_request"), answer
    status, answer = await cluster.call(
        "POST", "/v1/plans", {"request": {"cpu": "0.5", "memory": "16Mi"}, "count": 1}
    )
    assert (status, answer["capacity"]) == (200, 1), answer
    status, refused = await cluster.call("POST", DEPLOYMENTS, spec("more", 2, "0.5", bind=False))
    assert status == 409, refused
    assert (await cluster.get_json("/v1/nodes/node-a/allocation"))["unbound_cpu"] == 50
    await ws.close()


async def test_a_container_without_cpu_is_refused_and_changes_nothing(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    status, refused = await cluster.call("POST", DEPLOYMENTS, spec("idle", 1, "0", bind=False))
    assert (status, refused["error"]["code"]) == (422, "invalid_request"), refused
    assert "cpu_request" in refused["error"]["message"]
    assert await cluster.get_json("/v1/containers") == {"containers": []}
    await ws.close()


async def test_cpu_overcommit_is_set_per_node_and_kept_in_its_record(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    path = "/v1/nodes/node-a/capacity"
    status, answer = await cluster.call("PATCH", path, {"mode": "delta", "cpu_overcommit": "2"})
    assert status == 200, answer
    assert (answer["cpu_overcommit"], answer["shared_limit"]) == ("2", 400)
    status, placed = await cluster.call("POST", DEPLOYMENTS, spec("batch", 3, "1", bind=False))
    assert status == 201, placed
    status, refused = await cluster.call("PATCH", path, {"mode": "absolute", "cpu_overcommit": "1"})
    assert (status, refused["error"]["code"]) == (409, "below_allocation"), refused
    for bad in ("0.5", "lots", 1000):
        status, refused = await cluster.call(
            "PATCH", path, {"mode": "absolute", "cpu_overcommit": bad}
        )
        assert (status, refused["error"]["code"]) == (422, "invalid_request"), refused
    stored = await cluster.stored("/allocations/node-a")
    assert stored["/allocations/node-a"]["cpu_overcommit"] == "2"
    await ws.close()


async def test_concurrent_deploys_and_overcommit_changes_never_oversell_the_shared_pool(
    cluster: Coordinator,
) -> None:
    """Unbound and bound deploys and overcommit changes, all at once over real HTTP:
    each is a success or a clear refusal, the unbound requests stay within the shared
    pool times the overcommit, and memory equals the store afterwards."""
    ws = await register(cluster, "node-a")
    path = "/v1/nodes/node-a/capacity"
    answers = await asyncio.gather(
        *(cluster.call("POST", DEPLOYMENTS, spec(f"u{i}", 1, "0.5", bind=False)) for i in range(6)),
        cluster.call("POST", DEPLOYMENTS, spec("b0", 1, "1", bind=True)),
        cluster.call("PATCH", path, {"mode": "delta", "cpu_overcommit": "1.5"}),
        cluster.call("PATCH", path, {"mode": "delta", "cpu_overcommit": "1"}),
    )
    assert all(status in (200, 201, 409) for status, _ in answers), answers
    allocation = await cluster.get_json("/v1/nodes/node-a/allocation")
    assert allocation["unbound_cpu"] <= allocation["shared_limit"]
    assert not set(allocation["shared_pool"]) & {int(c) for c, n in allocation["used"].items() if n}
    stored = await cluster.stored("/allocations/node-a")
    record = stored.pop("/allocations/node-a")
    held = {key.removeprefix("/allocations/node-a/"): a for key, a in stored.items()}
    assert record["cpu_overcommit"] == allocation["cpu_overcommit"]
    assert set(held) == set(allocation["containers"])
    unbound = sum(a["cpu_request"] for a in held.values() if not a["cpu_bind"])
    assert unbound == allocation["unbound_cpu"]
    await ws.close()
