"""A node's allocation, and the admin's levers: SetNode, cordon, drain."""

from __future__ import annotations

from typing import Any

from tests.coordinator.conftest import (
    API_TOKEN,
    NAMESPACE_TOKEN,
    Coordinator,
    hello,
    inventory,
    receive_frame,
    register,
)

MIB = 1024 * 1024
DEPLOYMENTS = "/v1/namespaces/team-a/deployments"


async def call(
    coordinator: Coordinator, method: str, path: str, body: object = None, token: str = API_TOKEN
) -> tuple[int, Any]:
    response = await coordinator.http.request(
        method, coordinator.url + path, json=body, headers={"Authorization": f"Bearer {token}"}
    )
    return response.status, await response.json()


def spec(name: str, count: int, cpu: str = "0.5", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "count": count,
        "cpu_bind": True,
        "resources": {"cpu": cpu, "memory": "64Mi"},
    } | fields


async def test_the_allocation_shows_what_is_offered_used_and_shared(cluster: Coordinator) -> None:
    ws = await register(cluster, "node-a")
    await call(cluster, "POST", DEPLOYMENTS, spec("web", 1, cpu="1"))
    status, allocation = await call(cluster, "GET", "/v1/nodes/node-a/allocation")
    assert status == 200, allocation
    assert allocation["cores"] == {"0": 100, "1": 100}
    assert sum(allocation["used"].values()) == 100
    assert allocation["memory_used"] == 64 * MIB
    assert len(allocation["shared_pool"]) == 1
    assert allocation["cordoned"] is False
    assert (await call(cluster, "GET", "/v1/nodes/nowhere/allocation"))[0] == 404
    await ws.close()


async def test_set_node_changes_what_is_offered_and_refuses_going_below_the_allocated(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    await call(cluster, "POST", DEPLOYMENTS, spec("web", 1, cpu="1"))
    path = "/v1/nodes/node-a/capacity"
    grow = {"mode": "delta", "cores": {"2": 100}, "numa": {"2": 0}}
    status, grown = await call(cluster, "PATCH", path, grow)
    assert status == 200, grown
    assert sorted(grown["cores"]) == ["0", "1", "2"]
    used_core = next(core for core, pieces in grown["used"].items() if pieces)
    status, refused = await call(
        cluster, "PATCH", path, {"mode": "delta", "cores": {used_core: -50}}
    )
    assert (status, refused["error"]["code"]) == (409, "below_allocation"), refused
    status, refused = await call(cluster, "PATCH", path, {"mode": "sideways"})
    assert status == 400, refused
    status, refused = await call(
        cluster, "PATCH", path, {"mode": "delta", "cores": {"2": -100}}, NAMESPACE_TOKEN
    )
    assert (status, refused["error"]["code"]) == (403, "forbidden")
    assert sorted((await call(cluster, "GET", "/v1/nodes/node-a/allocation"))[1]["cores"]) == [
        "0",
        "1",
        "2",
    ]
    await ws.close()


async def test_a_cordoned_node_takes_nothing_new_and_a_drain_moves_its_containers(
    cluster: Coordinator,
) -> None:
    node_a = await register(cluster, "node-a")
    placed = (await call(cluster, "POST", DEPLOYMENTS, spec("web", 2)))[1]["containers"]
    assert {view["record"]["node"] for view in placed} == {"node-a"}
    node_b = await register(cluster, "node-b")
    status, answer = await call(cluster, "POST", "/v1/nodes/node-b/cordon")
    assert (status, answer) == (200, {"node": "node-b", "cordoned": True})
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec("big", 5))
    assert status == 409, refused  # node-a alone has room for 2 more, node-b is cordoned
    await call(cluster, "POST", "/v1/nodes/node-b/uncordon")
    status, drained = await call(cluster, "POST", "/v1/nodes/node-a/drain")
    assert status == 200, drained
    assert sorted(drained["released"]) == sorted(view["record"]["id"] for view in placed)
    listed = (await call(cluster, "GET", "/v1/containers"))[1]["containers"]
    moved = [view for view in listed if view["state"] != "stopping"]
    stopping = [view for view in listed if view["state"] == "stopping"]
    assert [view["record"]["node"] for view in moved] == ["node-b", "node-b"]
    assert [view["record"]["node"] for view in stopping] == ["node-a", "node-a"]
    assert sorted(drained["stand_ins"].values()) == sorted(v["record"]["id"] for v in moved)
    assert drained["placed"] == {v["record"]["id"]: "node-b" for v in moved}
    assert drained["pending"] == {}
    assert (await call(cluster, "GET", "/v1/nodes/node-a/allocation"))[1]["cordoned"] is True
    while (frame := await receive_frame(node_b))["type"] != "desired":
        pass
    assert len(frame["containers"]) == 2
    assert (await call(cluster, "POST", "/v1/nodes/node-a/drain", token=NAMESPACE_TOKEN))[0] == 403
    for ws in (node_a, node_b):
        await ws.close()


async def say_hello_with(cluster: Coordinator, reserved: str) -> None:
    """The agent of node-a comes back with ``reserved_cpus`` set to ``reserved``."""
    wire = inventory()
    wire["reserved"] = reserved
    ws = await cluster.connect()
    await ws.send_bytes(hello("node-a", inventory=wire))
    assert (await receive_frame(ws))["type"] == "welcome"
    await ws.close()


async def test_a_hardware_change_moves_the_capacity_unless_containers_hold_it(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("web", 1)))[0] == 201  # core 0
    await ws.close()
    await say_hello_with(cluster, reserved="1")
    allocation = (await call(cluster, "GET", "/v1/nodes/node-a/allocation"))[1]
    assert allocation["cores"] == {"0": 100}
    await say_hello_with(cluster, reserved="0")  # core 1 back, core 0 held by the container
    allocation = (await call(cluster, "GET", "/v1/nodes/node-a/allocation"))[1]
    assert allocation["cores"] == {"0": 100}
    events = (await call(cluster, "GET", "/v1/events?kind=node"))[1]["events"]
    reasons = [event["reason"] for event in events]
    assert reasons[0].startswith("capacity follows the hardware: 1 cores")
    assert reasons[1].startswith("the hardware changed but the capacity was kept")
    assert "core 0" in reasons[1]
