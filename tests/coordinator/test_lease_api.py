"""Capacity leases through the real HTTP API of a coordinator on loopback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.leases import Kind
from tests.coordinator.conftest import API_TOKEN, Coordinator, config_for, start
from tests.coordinator.lease_http import CAPACITY, LeaseApi, template

TEMPLATES = [
    template("none", Kind.NO_ALGORITHM),
    template("static", Kind.STATIC),
    template("proportional", Kind.PROPORTIONAL_SHARE),
    template("fair", Kind.FAIR_SHARE),
    template("short", Kind.FAIR_SHARE, lease_length=1, refresh_interval=1),
    template("db-*", Kind.FAIR_SHARE, capacity=10),
]


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[LeaseApi]:
    runner, url = await start(config_for(tmp_path, resources=TEMPLATES))
    async with aiohttp.ClientSession() as http:
        yield LeaseApi(Coordinator(url=url, app=runner.app, http=http))
    await runner.cleanup()


@pytest.mark.parametrize(
    ("resource", "wants", "equilibrium"),
    [
        ("none", [100, 10, 1000], [100, 10, 1000]),
        ("static", [50, 200, 300], [50, 120, 120]),
        ("proportional", [1000, 50, 10], [40 + 960 * 30 / 970, 40 + 10 * 30 / 970, 10]),
        ("fair", [1000, 50, 10], [60, 50, 10]),
    ],
    ids=["no-algorithm", "static", "proportional-share", "fair-share"],
)
async def test_three_clients_refreshing_twice_reach_the_seed_equilibrium(
    api: LeaseApi, resource: str, wants: list[float], equilibrium: list[float]
) -> None:
    grants: list[float] = []
    for _ in range(2):
        grants = [await api.grant(f"c{i}", resource, w) for i, w in enumerate(wants)]
    assert grants == pytest.approx(equilibrium, abs=1e-6)
    status = await api.status(resource)
    assert (status["clients"], status["sum_wants"]) == (3, sum(wants))
    if resource in ("proportional", "fair"):
        assert status["sum_has"] == pytest.approx(CAPACITY)


async def test_the_first_round_never_hands_out_more_than_capacity(api: LeaseApi) -> None:
    first = [await api.grant(f"c{i}", "fair", w) for i, w in enumerate([1000, 50, 10])]
    assert first == [120, 0, 0]  # c0 is entitled to all of it while alone; the rest must wait
    assert sum(first) <= CAPACITY


async def test_a_higher_priority_band_is_served_first(api: LeaseApi) -> None:
    for _ in range(2):
        low = await api.grant("batch", "fair", 100, priority=0)
        high = await api.grant("web", "fair", 100, priority=5)
    assert (high, low) == (100, 20)


async def test_the_response_carries_expiry_refresh_and_safe_capacity(api: LeaseApi) -> None:
    answer = await api.ask("c0", "fair", 10)
    gets = answer["gets"]
    assert gets["refresh_interval"] == 5
    assert gets["expiry_time"] == pytest.approx(time.time() + 60, abs=5)
    assert answer["safe_capacity"] == CAPACITY  # alone: all of it
    await api.ask("c1", "fair", 10, subclients=3)
    assert (await api.ask("c0", "fair", 10))["safe_capacity"] == CAPACITY / 4


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"client_id": "c9", "resources": [{"resource_id": "fair", "wants": -1}]}, "wants"),
        (b'{"client_id": "c9", "resources": [{"resource_id": "fair", "wants": 1e999}]}', "wants"),
        (b'{"client_id": "c9", "resources": [{"resource_id": "fair", "wants": NaN}]}', "malformed"),
        ({"client_id": "", "resources": [{"resource_id": "fair", "wants": 1}]}, "client_id"),
        ({"client_id": "c9", "resources": [{"resource_id": "nope", "wants": 1}]}, "nope"),
        ({"client_id": "c9", "resources": [{"resource_id": "fair", "wants": "x"}]}, "wants"),
        (
            {
                "client_id": "c9",
                "resources": [{"resource_id": "fair", "wants": 1, "subclients": 0}],
            },
            "subclients",
        ),
        ({"client_id": "c9"}, "resources"),
        (
            {
                "client_id": "c9",
                "resources": [
                    {"resource_id": "fair", "wants": 5},
                    {"resource_id": "static", "wants": -5},
                ],
            },
            "static",
        ),
    ],
    ids=[
        "negative-wants",
        "infinite-wants",
        "nan-wants",
        "empty-client",
        "unknown-resource",
        "string-wants",
        "zero-subclients",
        "no-resources",
        "second-resource-bad",
    ],
)
async def test_a_bad_request_is_400_and_changes_nothing(
    api: LeaseApi, body: dict[str, Any] | bytes, fragment: str
) -> None:
    await api.grant("c0", "fair", 30)
    before = (await api.status("fair"), await api.leases("fair"))
    response = await api.post("/v1/capacity", body)
    assert response.status == 400
    error = (await response.json())["error"]
    assert fragment in error["message"]
    assert error["code"] in ("invalid_request", "unknown_resource")
    assert (await api.status("fair"), await api.leases("fair")) == before
    assert [lease["client_id"] for lease in await api.leases("static")] == []


async def test_release_frees_capacity_for_the_next_request(api: LeaseApi) -> None:
    assert await api.grant("c0", "fair", 120) == 120
    assert await api.grant("c1", "fair", 120) == 0
    response = await api.post("/v1/capacity/release", {"client_id": "c0", "resource_ids": ["fair"]})
    assert (response.status, await response.json()) == (200, {})
    assert await api.grant("c1", "fair", 120) == 120
    unknown = {"client_id": "ghost", "resource_ids": ["fair", "never-heard-of"]}
    assert (await api.post("/v1/capacity/release", unknown)).status == 200


async def test_an_expired_lease_stops_counting(api: LeaseApi) -> None:
    assert await api.grant("c0", "short", 120) == 120
    assert await api.grant("c1", "short", 120) == 0
    await asyncio.sleep(1.3)  # lease_length 1 s; the sweeper also runs every second
    assert [lease["client_id"] for lease in await api.leases("short")] == []
    assert await api.grant("c1", "short", 120) == 120


async def test_globs_configure_resources_created_on_first_request(api: LeaseApi) -> None:
    assert await api.grant("c0", "db-orders", 50) == 10
    status = await api.status("db-orders")
    assert (status["template"], status["kind"], status["capacity"]) == ("db-*", "FAIR_SHARE", 10)


async def test_templates_can_be_put_read_and_deleted(api: LeaseApi) -> None:
    body = {
        "capacity": 7,
        "safe_capacity": 1,
        "description": "licence seats",
        "algorithm": {"kind": "STATIC", "lease_length": 30, "refresh_interval": 10},
    }
    put = await api.coordinator.http.put(
        api.coordinator.url + "/v1/resources/seats-*",
        json=body,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    assert put.status == 200, await put.text()
    stored = await api.coordinator.get_json("/v1/resources/seats-*")
    assert (stored["identifier_glob"], stored["capacity"]) == ("seats-*", 7)
    assert await api.grant("c0", "seats-a", 9) == 7
    listing = await api.coordinator.get_json("/v1/resources")
    assert "seats-*" in [t["identifier_glob"] for t in listing["templates"]]
    deleted = await api.coordinator.http.delete(
        api.coordinator.url + "/v1/resources/seats-*",
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    assert deleted.status == 200
    response = await api.post(
        "/v1/capacity", {"client_id": "c0", "resources": [{"resource_id": "seats-a", "wants": 1}]}
    )
    assert response.status == 400


async def test_a_template_change_applies_to_an_existing_resource(api: LeaseApi) -> None:
    assert await api.grant("c0", "fair", 200) == 120
    algorithm = {"kind": "FAIR_SHARE", "lease_length": 60, "refresh_interval": 5}
    # learning_mode_duration 0: left out it would be the lease length, and this fresh
    # store would put the reconfigured resource into learning mode.
    body = {"capacity": 60, "algorithm": algorithm | {"learning_mode_duration": 0}}
    put = await api.coordinator.http.put(
        api.coordinator.url + "/v1/resources/fair",
        json=body,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    assert put.status == 200, await put.text()
    assert (await api.status("fair"))["capacity"] == 60
    assert await api.grant("c1", "fair", 10) == 0  # c0 still holds 120 > 60: nothing is free
    assert await api.grant("c0", "fair", 200) == 50  # c0 refreshes and shrinks to its share


@pytest.mark.parametrize(
    ("glob", "body", "fragment"),
    [
        (
            "bad",
            {
                "capacity": -1,
                "algorithm": {"kind": "FAIR_SHARE", "lease_length": 5, "refresh_interval": 5},
            },
            "capacity",
        ),
        (
            "bad",
            {
                "capacity": 1,
                "algorithm": {"kind": "FAIR_SHARE", "lease_length": 5, "refresh_interval": 0.5},
            },
            "refresh_interval",
        ),
        (
            "bad",
            {
                "capacity": 1,
                "algorithm": {"kind": "FAIR_SHARE", "lease_length": 2, "refresh_interval": 5},
            },
            "lease_length",
        ),
        (
            "bad",
            {
                "capacity": 1,
                "algorithm": {"kind": "MAGIC", "lease_length": 5, "refresh_interval": 5},
            },
            "MAGIC",
        ),
        ("bad", {"capacity": 1}, "algorithm"),
        (
            "bad",
            {
                "capacity": 1,
                "safe_capacity": -2,
                "algorithm": {"kind": "STATIC", "lease_length": 5, "refresh_interval": 5},
            },
            "safe_capacity",
        ),
    ],
    ids=[
        "negative-capacity",
        "refresh-below-1s",
        "lease-shorter-than-refresh",
        "unknown-kind",
        "no-algorithm",
        "bad-safe-capacity",
    ],
)
async def test_an_invalid_template_is_400_and_changes_nothing(
    api: LeaseApi, glob: str, body: dict[str, Any], fragment: str
) -> None:
    before = await api.coordinator.get_json("/v1/resources")
    response = await api.coordinator.http.put(
        api.coordinator.url + f"/v1/resources/{glob}",
        json=body,
        headers={"Authorization": f"Bearer {API_TOKEN}"},
    )
    assert response.status == 400, await response.text()
    assert fragment in (await response.json())["error"]["message"]
    assert await api.coordinator.get_json("/v1/resources") == before


async def test_the_lease_api_needs_an_api_token(api: LeaseApi) -> None:
    response = await api.coordinator.http.post(
        api.coordinator.url + "/v1/capacity", json={"client_id": "c", "resources": []}
    )
    assert response.status == 401


async def test_metrics_show_each_resource(api: LeaseApi) -> None:
    await api.grant("c0", "fair", 30)
    await api.grant("c1", "fair", 20)
    text = await (await api.coordinator.get("/metrics", token=None)).text()
    assert 'allot_lease_capacity{resource="fair"} 120.0' in text
    assert 'allot_lease_has{resource="fair"} 50.0' in text
    assert 'allot_lease_wants{resource="fair"} 50.0' in text
    assert 'allot_lease_clients{resource="fair"} 2.0' in text


async def test_leases_survive_a_restart_without_learning(tmp_path: Path) -> None:
    learning = [template("fair", Kind.FAIR_SHARE, learning_mode_duration=60)]
    config = config_for(tmp_path, resources=learning)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        api = LeaseApi(Coordinator(url=url, app=runner.app, http=http))
        assert await api.grant("c0", "fair", 50, has=50) == 50  # fresh store: learning
        assert (await api.status("fair"))["learning"] is True
        await runner.cleanup()
        runner, url = await start(config)
        api = LeaseApi(Coordinator(url=url, app=runner.app, http=http))
        status = await api.status("fair")
        assert (status["learning"], status["clients"], status["sum_has"]) == (False, 1, 50)
        assert await api.grant("c1", "fair", 100) == 70  # c0's 50 still counts
    await runner.cleanup()


async def test_learning_mode_on_a_fresh_store_grants_what_clients_report(tmp_path: Path) -> None:
    learning = [template("fair", Kind.FAIR_SHARE, learning_mode_duration=60)]
    runner, url = await start(config_for(tmp_path, resources=learning))
    async with aiohttp.ClientSession() as http:
        api = LeaseApi(Coordinator(url=url, app=runner.app, http=http))
        assert await api.grant("old-holder", "fair", 100, has=90) == 90
        assert await api.grant("newcomer", "fair", 100) == 0
        status = await api.status("fair")
        assert (status["learning"], status["sum_has"]) == (True, 90)
    await runner.cleanup()
