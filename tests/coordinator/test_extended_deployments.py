"""Deployments that need named extended resources (example.com/fpga): placed only on the
ready nodes that offer enough units not held by other containers, never twice, counted
by quotas, shown with the node's allocation and in the quota summary."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.coordinator.conftest import (
    API_TOKEN,
    Coordinator,
    hello,
    inventory,
    receive_frame,
    report_caught_up,
)

FPGA = "example.com/fpga"
DEPLOYMENTS = "/v1/namespaces/team-a/deployments"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


async def register_offering(
    coordinator: Coordinator, node: str, extended: dict[str, int]
) -> aiohttp.ClientWebSocketResponse:
    ws = await coordinator.connect()
    await ws.send_bytes(hello(node, inventory=inventory() | {"extended": extended}))
    assert (await receive_frame(ws))["type"] == "welcome"
    return ws


async def call(
    coordinator: Coordinator, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    response = await coordinator.http.request(
        method, coordinator.url + path, json=body, headers=AUTH
    )
    return response.status, await response.json()


def spec(name: str, count: int, extended: dict[str, int]) -> dict[str, Any]:
    return {
        "name": name,
        "image": "fpga-tool",
        "count": count,
        "resources": {"cpu": "0.1", "memory": "16Mi", "extended": extended},
    }


def held(answer: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
    return sorted((v["record"]["node"], v["record"]["extended"]) for v in answer["containers"])


async def test_containers_go_only_where_units_are_free_and_never_twice(
    cluster: Coordinator,
) -> None:
    sockets = [
        await register_offering(cluster, "node-a", {FPGA: 1}),
        await register_offering(cluster, "node-b", {FPGA: 2}),
        await register_offering(cluster, "node-c", {}),
    ]
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec("fpga", 3, {FPGA: 1}))
    assert status == 201, answer
    assert held(answer) == [
        ("node-a", {FPGA: 1}),
        ("node-b", {FPGA: 1}),
        ("node-b", {FPGA: 1}),
    ]
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec("more", 1, {FPGA: 1}))
    assert (status, refused["error"]["code"]) == (409, "insufficient_devices"), refused
    assert refused["error"]["details"] == {
        "reason": "capacity",
        "needed": {FPGA: 1},
        "free": {"node-a": {FPGA: 0}, "node-b": {FPGA: 0}, "node-c": {FPGA: 0}},
        "admitted_before_refusal": 0,
    }
    assert len((await cluster.get_json("/v1/containers"))["containers"]) == 3  # unchanged
    for ws in sockets:
        await ws.close()


async def test_a_container_needing_more_units_than_any_node_has_free_is_refused_with_numbers(
    cluster: Coordinator,
) -> None:
    ws_a = await register_offering(cluster, "node-a", {FPGA: 2})
    ws_b = await register_offering(cluster, "node-b", {FPGA: 1})
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec("one", 1, {FPGA: 1}))
    assert status == 201, answer
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec("pair", 1, {FPGA: 2}))
    assert status == 409, refused
    assert refused["error"]["details"]["free"] == {"node-a": {FPGA: 1}, "node-b": {FPGA: 1}}
    assert "2 x example.com/fpga" in refused["error"]["message"]
    await ws_a.close()
    await ws_b.close()


async def test_the_agent_is_told_what_each_container_holds(cluster: Coordinator) -> None:
    ws = await register_offering(cluster, "node-a", {FPGA: 2})
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec("fpga", 1, {FPGA: 2}))
    assert status == 201, answer
    while (frame := await receive_frame(ws))["type"] != "desired":
        pass
    assert [c["extended"] for c in frame["containers"]] == [{FPGA: 2}]
    await ws.close()


async def test_a_bad_name_is_refused_by_name_and_changes_nothing(cluster: Coordinator) -> None:
    ws = await register_offering(cluster, "node-a", {FPGA: 2})
    wanted = {"Example.com/fpga": 1, "nvidia.com/gpu": 1, FPGA: 1}
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec("bad", 1, wanted))
    assert (status, refused["error"]["code"]) == (422, "invalid_resource_name"), refused
    assert sorted(refused["error"]["details"]["resources"]) == [
        "Example.com/fpga",
        "nvidia.com/gpu",
    ]
    assert "'Example.com/fpga'" in refused["error"]["message"]
    status, zero = await call(cluster, "POST", DEPLOYMENTS, spec("zero", 1, {FPGA: 0}))
    assert status == 400, zero  # a count is at least 1
    assert (await cluster.get_json(DEPLOYMENTS))["deployments"] == []
    await ws.close()


async def test_a_quota_max_on_an_extended_resource_refuses_the_container_over_it(
    cluster: Coordinator,
) -> None:
    ws = await register_offering(cluster, "node-a", {FPGA: 4})
    quota = {"namespace": "team-a", "max": {FPGA: 2}}
    status, answer = await call(cluster, "PUT", "/v1/elasticquotas/team-a", quota)
    assert status == 200, answer
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("two", 2, {FPGA: 1})))[0] == 201
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec("third", 1, {FPGA: 1}))
    assert (status, refused["error"]["code"]) == (403, "quota_max_exceeded"), refused
    assert FPGA in refused["error"]["message"]
    used = (await cluster.get_json("/v1/elasticquotas/team-a"))["status"]["used"]
    assert used[FPGA] == 2
    await ws.close()


async def test_scaling_up_takes_free_units_and_deleting_gives_them_back(
    cluster: Coordinator,
) -> None:
    ws = await register_offering(cluster, "node-a", {FPGA: 3})
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("fpga", 1, {FPGA: 1})))[0] == 201
    status, scaled = await call(cluster, "POST", f"{DEPLOYMENTS}/fpga/scale", {"count": 3})
    assert status == 200, scaled
    assert len(scaled["containers"]) == 3
    allocation = await cluster.get_json("/v1/nodes/node-a/allocation")
    assert (allocation["extended"], allocation["extended_used"]) == ({FPGA: 3}, {FPGA: 3})
    status, refused = await call(cluster, "POST", f"{DEPLOYMENTS}/fpga/scale", {"count": 4})
    assert (status, refused["error"]["code"]) == (409, "insufficient_devices"), refused
    assert (await call(cluster, "DELETE", f"{DEPLOYMENTS}/fpga"))[0] == 200
    # Stopping, they hold their units until the agent reports them gone.
    allocation = await cluster.get_json("/v1/nodes/node-a/allocation")
    assert allocation["extended_used"] == {FPGA: 3}
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec("again", 1, {FPGA: 3}))
    assert (status, refused["error"]["code"]) == (409, "insufficient_devices"), refused
    await report_caught_up(cluster, ws)
    allocation = await cluster.get_json("/v1/nodes/node-a/allocation")
    assert allocation["extended_used"] == {}
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("again", 1, {FPGA: 3})))[0] == 201
    await ws.close()


async def test_a_drained_nodes_containers_move_only_to_nodes_with_free_units(
    cluster: Coordinator,
) -> None:
    sockets = [
        await register_offering(cluster, "node-a", {FPGA: 1}),
        await register_offering(cluster, "node-b", {}),
        await register_offering(cluster, "node-c", {FPGA: 1}),
    ]
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec("fpga", 1, {FPGA: 1}))
    assert status == 201, answer
    (first,) = answer["containers"]
    assert first["record"]["node"] == "node-a"
    status, drained = await call(cluster, "POST", "/v1/nodes/node-a/drain")
    assert status == 200, drained
    listed = (await cluster.get_json("/v1/containers"))["containers"]
    moved = [view for view in listed if view["state"] != "stopping"]
    assert [(c["record"]["node"], c["record"]["extended"]) for c in moved] == [
        ("node-c", {FPGA: 1})
    ]
    stopping = [view["record"]["id"] for view in listed if view["state"] == "stopping"]
    assert stopping == [first["record"]["id"]]  # on node-a until its agent removes it
    for ws in sockets:
        await ws.close()


async def test_the_quota_summary_counts_what_ready_nodes_offer(cluster: Coordinator) -> None:
    ws_a = await register_offering(cluster, "node-a", {FPGA: 2})
    ws_b = await register_offering(cluster, "node-b", {FPGA: 1, "x.io/nic": 1})
    quota = {"namespace": "team-a", "min": {FPGA: 4}}
    assert (await call(cluster, "PUT", "/v1/elasticquotas/team-a", quota))[0] == 200
    summary = await cluster.get_json("/v1/quotas")
    assert (summary["capacity"][FPGA], summary["capacity"]["x.io/nic"]) == (3, 1)
    assert summary["warnings"] == [
        f"the quotas guarantee 4 of {FPGA} in all, but the ready nodes offer 3"
    ]
    await ws_a.close()
    await ws_b.close()


async def test_a_realloc_keeps_the_extended_resources_counted_by_the_quota(
    cluster: Coordinator,
) -> None:
    ws = await register_offering(cluster, "node-a", {FPGA: 2})
    quota = {"namespace": "team-a", "max": {FPGA: 1}}
    assert (await call(cluster, "PUT", "/v1/elasticquotas/team-a", quota))[0] == 200
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec("one", 1, {FPGA: 1}))
    assert status == 201, answer
    container_id = answer["containers"][0]["record"]["id"]
    status, grown = await call(cluster, "PATCH", f"/v1/containers/{container_id}", {"cpu": "0.1"})
    assert status == 200, grown
    assert grown["record"]["requests"][FPGA] == 1
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec("two", 1, {FPGA: 1}))
    assert (status, refused["error"]["code"]) == (403, "quota_max_exceeded"), refused
    await ws.close()
