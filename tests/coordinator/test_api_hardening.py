"""Requests that once answered 500 or were wrongly refused or accepted (issue 15): each
is now a clear 4xx JSON error that changes nothing, or is accepted as the README says.

A real coordinator on a real port, with one registered node (a websocket client)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.store import Txn
from coordinator.store.sqlite import SqliteStore
from shared.codec import to_json
from tests.coordinator.conftest import (
    NAMESPACE,
    NAMESPACE_TOKEN,
    Coordinator,
    config_for,
    register,
    start,
)
from tests.coordinator.test_deployment_api import DEPLOYMENTS, MIB, call, spec


async def state_of(cluster: Coordinator) -> tuple[Any, Any]:
    """What a client sees of every deployment and container, to compare before and after."""
    _, deployments = await call(cluster, "GET", DEPLOYMENTS)
    _, containers = await call(cluster, "GET", "/v1/containers")
    return deployments, containers


async def one_container(cluster: Coordinator, **fields: Any) -> dict[str, Any]:
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(count=1, **fields))
    assert status == 201, answer
    record: dict[str, Any] = answer["containers"][0]["record"]
    return record


@pytest.mark.parametrize(
    "second",
    [("POST", "/replace", {"image": "busybox:2"}), ("PATCH", "", {"cpu": "0.1"})],
    ids=["replace-again", "realloc"],
)
async def test_a_container_being_replaced_answers_409_swap_under_way(
    cluster: Coordinator, second: tuple[str, str, dict[str, Any]]
) -> None:
    await register(cluster, "node-a")
    old = await one_container(cluster)
    status, answer = await call(
        cluster, "POST", f"/v1/containers/{old['id']}/replace", {"image": "busybox:1"}
    )
    assert status == 201, answer
    before = await state_of(cluster)
    method, suffix, body = second
    status, answer = await call(cluster, method, f"/v1/containers/{old['id']}{suffix}", body)
    assert status == 409, answer
    assert answer["error"]["code"] == "swap_under_way"
    assert answer["error"]["details"]["replaced_by"] == before[1]["containers"][0]["record"]["id"]
    assert await state_of(cluster) == before


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"cpu": 3.8e16, "memory": "64Mi"}, "cpu"),
        ({"cpu": "1e16", "memory": "64Mi"}, "cpu"),
        ({"cpu": "38000000000000000", "memory": "64Mi"}, "cpu"),
        ({"cpu": 1, "memory": 2**70}, "memory"),
        ({"cpu": 1, "memory": "9999999Ti"}, "memory"),
        ({"cpu": 1, "memory": "64Mi", "cpu_limit": 1e300}, "cpu_limit"),
    ],
    ids=["float-cores", "exponent-string", "digits-string", "int-bytes", "Ti", "limit"],
)
async def test_an_absurd_quantity_is_a_422_naming_the_field(
    cluster: Coordinator, resources: dict[str, Any], field: str
) -> None:
    await register(cluster, "node-a")
    before = await state_of(cluster)
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(resources=resources))
    assert status in (400, 422), answer
    assert field in answer["error"]["message"]
    assert await state_of(cluster) == before


@pytest.mark.parametrize(
    "path",
    ["/v1/namespaces/Bad_NS%20x/deployments", "/v1/namespaces/-team/deployments"],
    ids=["upper-and-space", "leading-dash"],
)
async def test_a_namespace_in_the_path_must_be_a_namespace_name(
    cluster: Coordinator, path: str
) -> None:
    await register(cluster, "node-a")
    status, answer = await call(cluster, "POST", path, spec())
    assert status == 422, answer
    assert answer["error"]["code"] == "invalid_namespace"
    status, answer = await call(cluster, "GET", path)
    assert status == 422, answer
    _, containers = await call(cluster, "GET", "/v1/containers")
    assert containers == {"containers": []}


@pytest.mark.parametrize(
    "fields",
    [
        {"labels": {"allot.id": "mine"}},
        {"labels": {"allot.anything": "x"}},
        {"labels": {"": "x"}},
        {"env": {"A=B": "x"}},
        {"env": {"": "x"}},
        {"command": ["sleep", "1\u0000"]},
        {"image": "Not An Image!"},
    ],
    ids=["allot.id", "allot.prefix", "empty-label", "env-equals", "empty-env", "nul", "image"],
)
async def test_what_the_agent_would_refuse_forever_is_refused_at_once(
    cluster: Coordinator, fields: dict[str, Any]
) -> None:
    await register(cluster, "node-a")
    before = await state_of(cluster)
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(**fields))
    assert status == 422, answer
    assert answer["error"]["code"] == "invalid_container"
    assert await state_of(cluster) == before


async def test_a_replacement_with_a_bad_image_is_refused(cluster: Coordinator) -> None:
    await register(cluster, "node-a")
    record = await one_container(cluster)
    before = await state_of(cluster)
    body = {"image": "Bad Image", "command": ["x\u0000"]}
    status, answer = await call(cluster, "POST", f"/v1/containers/{record['id']}/replace", body)
    assert status == 422, answer
    assert len(answer["error"]["details"]["problems"]) == 2
    assert await state_of(cluster) == before


@pytest.mark.parametrize(
    "old",
    [
        {"name": "old", "image": "busybox", "labels": {"allot.id": "x"}},
        {"name": "old\n", "image": "", "count": 0},
    ],
    ids=["reserved-label", "breaks-the-spec-constraints"],
)
async def test_a_deployment_stored_before_these_checks_still_loads(
    tmp_path: Path, old: dict[str, Any]
) -> None:
    stored = {"namespace": NAMESPACE, "spec": old | {"resources": {"cpu": 1}}, "created": 1.0}
    store = await SqliteStore.open(tmp_path / "allot.db")
    await store.commit(Txn(puts={f"/deployments/{NAMESPACE}/old": to_json(stored)}))
    await store.close()
    runner, url = await start(config_for(tmp_path))
    try:
        async with aiohttp.ClientSession() as http:
            coordinator = Coordinator(url=url, app=runner.app, http=http)
            status, answer = await call(coordinator, "GET", DEPLOYMENTS)
    finally:
        await runner.cleanup()
    assert status == 200, answer
    (loaded,) = answer["deployments"]
    assert {key: loaded["deployment"]["spec"][key] for key in old} == old


@pytest.mark.parametrize(
    ("delta", "cpu_shares", "mem_limit"),
    [({"memory": "+32Mi"}, 512, 96 * MIB), ({"cpu": "+0.5"}, 1024, 64 * MIB)],
    ids=["+memory", "+cpu"],
)
async def test_a_realloc_delta_may_carry_a_plus_sign(
    cluster: Coordinator, delta: dict[str, str], cpu_shares: int, mem_limit: int
) -> None:
    await register(cluster, "node-a")
    record = await one_container(cluster)
    status, answer = await call(cluster, "PATCH", f"/v1/containers/{record['id']}", delta)
    assert status == 200, answer
    limits = answer["record"]["limits"]
    assert (limits["cpu_shares"], limits["mem_limit"]) == (cpu_shares, mem_limit)


async def test_shrinking_is_allowed_when_usage_is_above_a_lowered_quota_max(
    cluster: Coordinator,
) -> None:
    await register(cluster, "node-a")
    quota = {"namespace": NAMESPACE, "min": {"cpu": "0.5"}, "max": {"cpu": "2"}}
    status, answer = await call(cluster, "PUT", f"/v1/elasticquotas/{NAMESPACE}", quota)
    assert status in (200, 201), answer
    first = await one_container(cluster, name="a", cpu_bind=False)
    await one_container(cluster, name="b", cpu_bind=False, resources={"cpu": "1.2"} | MEMORY)
    lowered = quota | {"max": {"cpu": "1.5"}}
    status, answer = await call(cluster, "PUT", f"/v1/elasticquotas/{NAMESPACE}", lowered)
    assert status == 200, answer
    status, answer = await call(cluster, "PATCH", f"/v1/containers/{first['id']}", {"cpu": "-0.1"})
    assert status == 200, answer
    assert answer["record"]["requests"]["cpu"] == "0.4"
    # growing is still refused, by the new max
    status, answer = await call(cluster, "PATCH", f"/v1/containers/{first['id']}", {"cpu": "0.1"})
    assert status == 403, answer
    assert answer["error"]["code"] == "quota_max_exceeded"


async def test_a_namespace_token_gets_the_same_refusals(cluster: Coordinator) -> None:
    await register(cluster, "node-a")
    status, answer = await call(
        cluster,
        "POST",
        DEPLOYMENTS,
        spec(resources={"cpu": 3.8e16, "memory": "64Mi"}),
        token=NAMESPACE_TOKEN,
    )
    assert status in (400, 422), answer


MEMORY = {"memory": "64Mi"}


async def test_a_deployment_scaled_to_zero_survives_a_restart(tmp_path: Path) -> None:
    """The count and the container still stopping (its agent has not reported it gone)
    both survive the restart."""
    runner, url = await start(config_for(tmp_path))
    async with aiohttp.ClientSession() as http:
        coordinator = Coordinator(url=url, app=runner.app, http=http)
        await register(coordinator, "node-a")
        status, answer = await call(coordinator, "POST", DEPLOYMENTS, spec())
        assert status == 201, answer
        status, answer = await call(coordinator, "POST", DEPLOYMENTS + "/web/scale", {"count": 0})
        assert status == 200, answer
    await runner.cleanup()
    runner, url = await start(config_for(tmp_path))
    try:
        async with aiohttp.ClientSession() as http:
            coordinator = Coordinator(url=url, app=runner.app, http=http)
            status, answer = await call(coordinator, "GET", DEPLOYMENTS + "/web")
    finally:
        await runner.cleanup()
    assert status == 200, answer
    assert answer["deployment"]["spec"]["count"] == 0
    assert [view["state"] for view in answer["containers"]] == ["stopping"] * 2


async def test_an_empty_deployment_may_be_made_and_scaled_up(cluster: Coordinator) -> None:
    await register(cluster, "node-a")
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(count=0))
    assert status == 201, answer
    assert answer["containers"] == []
    status, answer = await call(cluster, "POST", DEPLOYMENTS + "/web/scale", {"count": 1})
    assert status == 200, answer
    assert len(answer["containers"]) == 1


async def test_a_name_with_a_trailing_newline_is_refused(cluster: Coordinator) -> None:
    await register(cluster, "node-a")
    status, answer = await call(cluster, "POST", DEPLOYMENTS, spec(name="web\n"))
    assert status in (400, 422), answer
    assert await state_of(cluster) == ({"deployments": []}, {"containers": []})


async def test_concurrent_changes_of_one_container_leave_memory_equal_to_the_store(
    cluster: Coordinator,
) -> None:
    """Replace twice, realloc both ways and a shrink, all at once over real HTTP: every
    answer is a success or a clear 409/403, never a 500, and afterwards what the API
    shows from memory is what the store holds."""
    await register(cluster, "node-a")
    record = await one_container(cluster, cpu_bind=False)
    path = f"/v1/containers/{record['id']}"
    answers = await asyncio.gather(
        call(cluster, "POST", path + "/replace", {"image": "busybox:1"}),
        call(cluster, "POST", path + "/replace", {"image": "busybox:2"}),
        call(cluster, "PATCH", path, {"cpu": "+0.1"}),
        call(cluster, "PATCH", path, {"memory": "-8Mi"}),
    )
    statuses = [status for status, _ in answers]
    assert all(status in (200, 201, 409) for status in statuses), answers
    assert statuses[:2].count(201) == 1, answers  # exactly one replace starts a swap
    refusals = {answer["error"]["code"] for status, answer in answers if status == 409}
    assert refusals <= {"swap_under_way"}, answers  # never a false conflict
    _, containers = await call(cluster, "GET", "/v1/containers")
    stored = await cluster.stored("/containers/")
    live = {value["id"]: value for value in stored.values() if not value["replaced_by"]}
    assert {view["record"]["id"]: view["record"] for view in containers["containers"]} == live
