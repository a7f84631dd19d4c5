"""Deployments through the HTTP API of an in-process coordinator with agents that are
plain websocket clients: admitted against quotas, placed, committed, pushed to the
nodes, visible per namespace, deleted, and kept across a restart."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.coordinator.conftest import (
    API_TOKEN,
    NAMESPACE,
    NAMESPACE_TOKEN,
    Coordinator,
    config_for,
    frame,
    hello,
    receive_frame,
    register,
    report_caught_up,
    start,
)

MIB = 1024 * 1024
DEPLOYMENTS = f"/v1/namespaces/{NAMESPACE}/deployments"


async def call(
    coordinator: Coordinator,
    method: str,
    path: str,
    body: object = None,
    token: str = API_TOKEN,
) -> tuple[int, Any]:
    response = await coordinator.http.request(
        method, coordinator.url + path, json=body, headers={"Authorization": f"Bearer {token}"}
    )
    return response.status, await response.json()


def spec(name: str = "web", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "image": "busybox",
        "command": ["sleep", "3600"],
        "count": 2,
        "resources": {"cpu": "0.5", "memory": "64Mi"},
        "cpu_bind": True,
    }
    return body | fields


# What the agent on each test websocket holds of its desired state (see next_desired).
_HELD: weakref.WeakKeyDictionary[aiohttp.ClientWebSocketResponse, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


async def next_desired(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    """The next desired frame on ``ws``, its ``containers`` made the whole desired state an
    agent holds after it, as the agent folds frames: a full frame replaces what it held, a
    delta (the coordinator's usual frame) changes the containers it carries and drops the
    ids in ``removed``. What was held starts empty, as a new node's welcome is."""
    while (frame := await receive_frame(ws))["type"] != "desired":
        pass
    held = {} if frame["full"] else dict(_HELD.get(ws, {}))
    for removed in frame.get("removed", []):
        held.pop(removed, None)
    held.update((container["id"], container) for container in frame["containers"])
    _HELD[ws] = held
    return frame | {"containers": list(held.values())}


async def test_a_deployment_is_placed_committed_and_pushed_to_its_node(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec())
    assert status == 201, answer
    containers = [view["record"] for view in answer["containers"]]
    assert [c["node"] for c in containers] == ["node-a", "node-a"]
    assert {(v["state"], v["reason"]) for v in answer["containers"]} == {
        ("starting", "not reported by node node-a yet")
    }
    # two half cores, bound: a fragment core each (the engine packs both on core 0)
    assert [c["limits"]["cpuset_cpus"] for c in containers] == ["0", "0"]
    assert {c["limits"]["cpu_shares"] for c in containers} == {512}
    assert {c["limits"]["mem_limit"] for c in containers} == {64 * MIB}
    desired = await next_desired(ws)
    assert (desired["full"], desired["since"]) == (False, 0)  # a delta on the welcome's
    pushed = {c["id"]: c for c in desired["containers"]}
    assert sorted(pushed) == sorted(c["id"] for c in containers)
    for container in containers:
        sent = pushed[container["id"]]
        assert sent["limits"] == container["limits"]
        assert (sent["namespace"], sent["deployment"], sent["shared_pool"]) == (
            NAMESPACE,
            "web",
            False,
        )
    await ws.close()


async def test_the_stop_timeout_is_stored_with_the_deployment_and_sent_with_each_container(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(stop_timeout_seconds=2))
    assert status == 201, answer
    assert answer["deployment"]["spec"]["stop_timeout_seconds"] == 2
    assert {v["record"]["stop_timeout_seconds"] for v in answer["containers"]} == {2}
    desired = await next_desired(ws)
    assert {c["stop_timeout_seconds"] for c in desired["containers"]} == {2}
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec("plain", count=1))
    assert status == 201, answer
    assert answer["deployment"]["spec"]["stop_timeout_seconds"] == 10  # Docker's default
    (stored,) = (await call(cluster, "GET", f"{DEPLOYMENTS}/web"))[1]["containers"][:1]
    assert stored["record"]["stop_timeout_seconds"] == 2
    await ws.close()


async def test_unbound_containers_run_on_the_shared_pool_with_a_cfs_quota(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    await call(cluster, "POST", DEPLOYMENTS, spec("bound", count=1, resources={"cpu": "1"}))
    unbound = spec("batch", count=1, cpu_bind=False, resources={"cpu": "0.5", "memory": "32Mi"})
    status, answer = await call(cluster, "POST", DEPLOYMENTS, unbound)
    assert status == 201, answer
    (view,) = answer["containers"]
    limits = view["record"]["limits"]
    # weighted as what it asks for, 1024 per core (pool_link.placed_limits)
    assert (limits["cpu_quota"], limits["cpu_shares"]) == (50_000, 512)
    bound_cpu = (await call(cluster, "GET", f"{DEPLOYMENTS}/bound"))[1]["containers"][0]
    assert limits["cpuset_cpus"] != bound_cpu["record"]["limits"]["cpuset_cpus"]
    desired = await next_desired(ws)
    desired = await next_desired(ws)
    shared = [c for c in desired["containers"] if c["shared_pool"]]
    assert [c["deployment"] for c in shared] == ["batch"]
    await ws.close()


async def test_a_deployment_beyond_capacity_is_refused_with_the_numbers_and_changes_nothing(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(count=5))
    assert status == 409, answer
    error = answer["error"]
    assert error["details"]["reason"] == "capacity"
    assert error["details"]["capacities"] == {"node-a": 4}
    assert (await call(cluster, "GET", "/v1/containers"))[1] == {"containers": []}
    status, _ = await call(cluster, "GET", f"{DEPLOYMENTS}/web")
    assert status == 404
    await ws.close()


async def test_a_quota_max_refuses_and_its_min_labels_in_and_over_quota(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    quota = {"namespace": NAMESPACE, "min": {"cpu": "0.5"}, "max": {"cpu": "1"}}
    status, _ = await call(cluster, "PUT", f"/v1/elasticquotas/{NAMESPACE}", quota)
    assert status == 200
    status, refused = await call(cluster, "POST", DEPLOYMENTS, spec(count=3))
    assert status == 403, refused
    assert refused["error"]["code"] == "quota_max_exceeded"
    assert refused["error"]["details"]["reason"] == "quota"
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(count=2))
    assert status == 201, answer
    labels = sorted(view["record"]["capacity"] for view in answer["containers"])
    assert labels == ["in-quota", "over-quota"]
    status, over = await call(cluster, "GET", "/v1/containers?capacity=over-quota")
    assert [view["record"]["capacity"] for view in over["containers"]] == ["over-quota"]
    shown = (await call(cluster, "GET", f"/v1/elasticquotas/{NAMESPACE}"))[1]
    assert shown["status"]["used"]["cpu"] == "1"
    await ws.close()


async def test_a_namespace_token_sees_and_changes_only_its_namespaces(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    other = "/v1/namespaces/team-b/deployments"
    status, answer = await call(cluster, "POST", other, spec("theirs", count=1))
    assert status == 201, answer
    theirs = answer["containers"][0]["record"]["id"]
    status, refused = await call(cluster, "POST", other, spec("x", count=1), NAMESPACE_TOKEN)
    assert (status, refused["error"]["code"]) == (403, "forbidden")
    status, answer = await call(
        cluster, "POST", DEPLOYMENTS, spec("ours", count=1), NAMESPACE_TOKEN
    )
    assert status == 201, answer
    listed = (await call(cluster, "GET", "/v1/containers", token=NAMESPACE_TOKEN))[1]
    assert {view["record"]["namespace"] for view in listed["containers"]} == {NAMESPACE}
    assert (await call(cluster, "GET", f"/v1/containers/{theirs}", token=NAMESPACE_TOKEN))[0] == 404
    assert (await call(cluster, "DELETE", f"/v1/containers/{theirs}", token=NAMESPACE_TOKEN))[
        0
    ] == 404
    assert (await call(cluster, "GET", f"/v1/containers/{theirs}"))[0] == 200
    assert (await call(cluster, "GET", other, token=NAMESPACE_TOKEN))[0] == 403
    await ws.close()


async def test_deleting_a_container_stops_it_and_a_stand_in_keeps_the_count(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    answer = (await call(cluster, "POST", DEPLOYMENTS, spec(count=2)))[1]
    first, second = (view["record"]["id"] for view in answer["containers"])
    await next_desired(ws)
    status, deleted = await call(cluster, "DELETE", f"/v1/containers/{first}")
    assert status == 200, deleted
    stand_in = deleted["stand_in"]
    assert (deleted["deleted"], deleted["node"], deleted["pending"]) == (first, "node-a", "")
    desired = await next_desired(ws)
    assert sorted(c["id"] for c in desired["containers"]) == sorted([second, stand_in])
    listed = (await call(cluster, "GET", f"{DEPLOYMENTS}/web"))[1]["containers"]
    states = {v["record"]["id"]: v["state"] for v in listed}
    assert sorted(states) == sorted([first, second, stand_in])
    assert states[first] == "stopping"  # held until the agent reports it gone
    await report_caught_up(cluster, ws)
    listed = (await call(cluster, "GET", f"{DEPLOYMENTS}/web"))[1]["containers"]
    assert sorted(v["record"]["id"] for v in listed) == sorted([second, stand_in])
    # Only scaling lowers the count: once its agent removed the one scaled away, the
    # freed half core takes a new container.
    assert (await call(cluster, "POST", f"{DEPLOYMENTS}/web/scale", {"count": 1}))[0] == 200
    await report_caught_up(cluster, ws)
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("again", count=3)))[0] == 201
    await ws.close()


async def test_deployments_and_their_nodes_desired_state_survive_a_restart(
    tmp_path: Path,
) -> None:
    config = config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        ws = await register(cluster, "node-a")
        placed = (await call(cluster, "POST", DEPLOYMENTS, spec()))[1]["containers"]
        await ws.close()
    await runner.cleanup()
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        listed = (await call(cluster, "GET", "/v1/containers"))[1]["containers"]
        assert [v["record"] for v in listed] == sorted(
            (v["record"] for v in placed), key=lambda r: r["id"]
        )
        ws = await cluster.connect()
        await ws.send_bytes(hello("node-a"))
        welcome = await receive_frame(ws)
        assert sorted(c["id"] for c in welcome["containers"]) == sorted(
            v["record"]["id"] for v in placed
        )
        assert welcome["revision"] > 0
        events = (await call(cluster, "GET", "/v1/events"))[1]["events"]
        assert [e["kind"] for e in events] == ["admitted", "placed", "placed"]
        # the half cores are still taken: two more fit, not three
        assert (await call(cluster, "POST", DEPLOYMENTS, spec("more", count=3)))[0] == 409
        await ws.close()
    await runner.cleanup()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (spec(count=-1), 400, "invalid_request"),
        (spec(count=1001), 400, "invalid_request"),
        (spec(colour="red"), 400, "invalid_request"),
        (spec(name="Web!"), 400, "invalid_request"),
        (spec(resources={"cpu": "lots"}), 422, "invalid_request"),
        (spec(resources={"cpu": "0.001"}), 422, "invalid_request"),
        (spec(strategy="random"), 400, "invalid_request"),
        (spec(stop_timeout_seconds=-1), 400, "invalid_request"),
        (spec(stop_timeout_seconds=3601), 400, "invalid_request"),
        (spec(stop_timeout_seconds="10s"), 400, "invalid_request"),
    ],
)
async def test_a_bad_deployment_is_refused_and_changes_nothing(
    cluster: Coordinator, body: dict[str, Any], status: int, code: str
) -> None:
    ws = await register(cluster, "node-a")
    got, answer = await call(cluster, "POST", DEPLOYMENTS, body)
    assert (got, answer["error"]["code"]) == (status, code), answer
    assert (await call(cluster, "GET", "/v1/containers"))[1] == {"containers": []}
    await ws.close()


async def test_a_realloc_changes_the_limits_pushes_them_and_can_be_undone(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    answer = (await call(cluster, "POST", DEPLOYMENTS, spec(count=1)))[1]
    container = answer["containers"][0]["record"]
    await next_desired(ws)
    path = f"/v1/containers/{container['id']}"
    status, grown = await call(cluster, "PATCH", path, {"cpu": "0.5", "memory": "32Mi"})
    assert status == 200, grown
    limits = grown["record"]["limits"]
    assert (limits["cpu_shares"], limits["mem_limit"]) == (1024, 96 * MIB)
    assert grown["record"]["history"][-1]["event"] == "realloc"
    desired = await next_desired(ws)
    assert desired["containers"][0]["limits"] == limits
    status, back = await call(cluster, "PATCH", path, {"cpu": "-0.5", "memory": "-32Mi"})
    assert status == 200, back
    assert back["record"]["limits"] == container["limits"]
    await ws.close()


@pytest.mark.parametrize(
    ("delta", "status", "reason"),
    [
        ({"cpu": "5"}, 409, "capacity"),
        ({"cpu": "-0.5"}, 422, "invalid"),
        ({"memory_limit": "-64Mi"}, 422, "invalid"),
    ],
)
async def test_a_realloc_that_cannot_be_made_changes_nothing(
    cluster: Coordinator, delta: dict[str, str], status: int, reason: str
) -> None:
    ws = await register(cluster, "node-a")
    answer = (await call(cluster, "POST", DEPLOYMENTS, spec(count=1)))[1]
    container = answer["containers"][0]["record"]
    path = f"/v1/containers/{container['id']}"
    got, refused = await call(cluster, "PATCH", path, delta)
    assert (got, refused["error"]["details"]["reason"]) == (status, reason), refused
    assert (await call(cluster, "GET", path))[1]["record"] == container
    await ws.close()


async def test_every_decision_is_an_event_with_its_reason(cluster: Coordinator) -> None:
    ws = await register(cluster, "node-a")
    placed = (await call(cluster, "POST", DEPLOYMENTS, spec(count=1)))[1]["containers"][0]
    container = placed["record"]["id"]
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("huge", count=9)))[0] == 409
    await call(cluster, "PATCH", f"/v1/containers/{container}", {"cpu": "0.5"})
    await call(cluster, "DELETE", f"/v1/containers/{container}")
    events = (await call(cluster, "GET", "/v1/events"))[1]["events"]
    assert [(e["kind"], e["deployment"]) for e in events] == [
        ("admitted", "web"),
        ("placed", "web"),
        ("refused", "huge"),
        ("realloc", "web"),
        ("deleted", "web"),
        ("placed", "web"),  # its stand-in, which keeps the count
    ]
    assert events[2]["reason"].startswith("capacity: ")
    assert events[3]["reason"] == "cpu_shares 512 -> 1024"
    assert events[5]["reason"] == f"on node-a, in place of {container} (deleted on request)"
    later = (await call(cluster, "GET", f"/v1/events?since={events[2]['sequence']}"))[1]
    assert [e["kind"] for e in later["events"]] == ["realloc", "deleted", "placed"]
    refused = (await call(cluster, "GET", "/v1/events?kind=refused"))[1]["events"]
    assert [e["deployment"] for e in refused] == ["huge"]
    others = (await call(cluster, "GET", "/v1/events", token=NAMESPACE_TOKEN))[1]["events"]
    assert len(others) == 6  # all in team-a, the namespace token's own
    assert (await call(cluster, "GET", "/v1/events?colour=red"))[0] == 400
    await ws.close()


async def test_a_deployment_scales_up_beside_its_containers_and_down_newest_first(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    first = (await call(cluster, "POST", DEPLOYMENTS, spec(count=1)))[1]["containers"]
    scale = f"{DEPLOYMENTS}/web/scale"
    status, grown = await call(cluster, "POST", scale, {"count": 3})
    assert status == 200, grown
    assert grown["deployment"]["spec"]["count"] == 3
    ids = [view["record"]["id"] for view in grown["containers"]]
    assert len(ids) == 3
    assert first[0]["record"]["id"] in ids
    status, refused = await call(cluster, "POST", scale, {"count": 9})
    assert (status, refused["error"]["details"]["reason"]) == (409, "capacity")
    status, shrunk = await call(cluster, "POST", scale, {"count": 1})
    assert status == 200, shrunk
    assert [view["record"]["id"] for view in shrunk["containers"]] == [first[0]["record"]["id"]]
    assert (await call(cluster, "POST", scale, {"count": -1}))[0] == 400
    await ws.close()


async def test_a_namespace_claiming_its_min_preempts_an_over_quota_container_of_another(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")  # 2 CPUs
    for team in ("team-a", "team-b"):
        quota = {"namespace": team, "min": {"cpu": "1"}, "max": {"cpu": "2"}}
        assert (await call(cluster, "PUT", f"/v1/elasticquotas/{team}", quota))[0] == 200
    borrowed = (await call(cluster, "POST", DEPLOYMENTS, spec(count=4)))[1]["containers"]
    labels = [view["record"]["capacity"] for view in borrowed]
    assert sorted(labels) == ["in-quota", "in-quota", "over-quota", "over-quota"]
    claim = spec("claim", count=1)
    status, answer = await call(cluster, "POST", "/v1/namespaces/team-b/deployments", claim)
    assert status == 201, answer
    events = (await call(cluster, "GET", "/v1/events?kind=preempted"))[1]["events"]
    (preempted,) = events
    # the newest over-quota container of team-a goes, by rule R1 (team-b within its min)
    newest_over = max(
        (v["record"] for v in borrowed if v["record"]["capacity"] == "over-quota"),
        key=lambda r: (r["created"], r["id"]),
    )
    assert preempted["container"] == newest_over["id"]
    assert "R1" in preempted["reason"]
    # The victim keeps its core until its agent reports it gone; the claim waits for it.
    left = (await call(cluster, "GET", "/v1/containers?namespace=team-a"))[1]["containers"]
    states = {view["record"]["id"]: view["state"] for view in left}
    assert states.pop(newest_over["id"]) == "stopping"
    assert sorted(states.values()) == ["starting"] * 3
    (claimed,) = answer["containers"]
    assert (claimed["state"], claimed["record"]["node"]) == ("pending", "")
    assert claimed["reason"] == (
        f"waiting for preempted containers to stop: {newest_over['id']} on node-a"
    )
    await report_caught_up(cluster, ws)  # the decision that lets the victim go places it
    shown = (await call(cluster, "GET", f"/v1/containers/{claimed['record']['id']}"))[1]
    assert (shown["state"], shown["record"]["node"]) == ("starting", "node-a"), shown
    # team-b is now at its min: one more claim is refused, as R2 allows no more
    status, refused = await call(
        cluster, "POST", "/v1/namespaces/team-b/deployments", spec("more", count=2)
    )
    assert status == 409, refused
    assert refused["error"]["details"]["reason"] == "capacity"
    await ws.close()


async def test_a_replaced_container_takes_over_the_allocation_with_a_new_image(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    old = (await call(cluster, "POST", DEPLOYMENTS, spec(count=2)))[1]["containers"][0]["record"]
    await next_desired(ws)
    status, answer = await call(
        cluster, "POST", f"/v1/containers/{old['id']}/replace", {"image": "busybox:2"}
    )
    assert status == 201, answer
    new = answer["record"]
    assert (new["image"], new["node"], new["limits"]) == ("busybox:2", old["node"], old["limits"])
    assert new["history"][-1]["event"] == "replaced"
    assert new["replaces"] == old["id"]
    status, kept = await call(cluster, "GET", f"/v1/containers/{old['id']}")
    assert (status, kept["record"]["replaced_by"]) == (200, new["id"])
    desired = await next_desired(ws)
    pushed = {c["id"]: c for c in desired["containers"]}
    assert pushed[new["id"]]["replaces"] == old["id"]
    assert old["id"] not in pushed
    # nothing charged twice: the node still has room for exactly two more half cores
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("more", count=3)))[0] == 409
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("more", count=2)))[0] == 201
    # the agent says the swap is done: the old record goes, the new one stands alone
    done = {"id": new["id"], "state": "running", "replacing": "done"}
    await ws.send_bytes(frame("status", applied_revision=desired["revision"], containers=[done]))
    while True:  # past the pushes of the "more" deployment
        pushed = {c["id"]: c for c in (await next_desired(ws))["containers"]}
        if pushed[new["id"]]["replaces"] == "":
            break
    assert (await call(cluster, "GET", f"/v1/containers/{old['id']}"))[0] == 404
    await ws.close()


async def test_a_failed_replacement_gives_the_allocation_back_to_the_old_container(
    cluster: Coordinator,
) -> None:
    ws = await register(cluster, "node-a")
    old = (await call(cluster, "POST", DEPLOYMENTS, spec(count=1)))[1]["containers"][0]["record"]
    await next_desired(ws)
    new = (await call(cluster, "POST", f"/v1/containers/{old['id']}/replace", {"image": "x"}))[1]
    new = new["record"]
    refused = await call(cluster, "POST", f"/v1/containers/{new['id']}/replace", {"image": "y"})
    assert (refused[0], refused[1]["error"]["code"]) == (409, "swap_under_way")
    desired = await next_desired(ws)
    failed = {
        "id": new["id"],
        "state": "missing",
        "replacing": "failed",
        "error": "replace failed: it did not keep running (exited)",
    }
    for _ in range(2):  # a report that comes twice ends the swap once
        await ws.send_bytes(
            frame("status", applied_revision=desired["revision"], containers=[failed])
        )
    desired = await next_desired(ws)
    assert [(c["id"], c["replaces"]) for c in desired["containers"]] == [(old["id"], "")]
    assert (await call(cluster, "GET", f"/v1/containers/{new['id']}"))[0] == 404
    status, back = await call(cluster, "GET", f"/v1/containers/{old['id']}")
    assert (status, back["record"]["replaced_by"]) == (200, "")
    assert back["record"]["limits"] == old["limits"]
    (why,) = (await call(cluster, "GET", "/v1/events?kind=refused"))[1]["events"]
    assert why["reason"].startswith(f"replace by {new['id']} failed, {old['id']} runs again")
    # the allocation is the old container's again, charged once: three more half cores fit
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("more", count=4)))[0] == 409
    assert (await call(cluster, "POST", DEPLOYMENTS, spec("more", count=3)))[0] == 201
    await ws.close()
