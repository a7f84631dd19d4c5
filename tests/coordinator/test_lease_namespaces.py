"""Capacity leases bounded by namespace, through the real HTTP API of a coordinator on
loopback: a lease belongs to the namespace of the token that made it, client ids are per
namespace, and a namespace token sees other namespaces' leases only as totals."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.config import NamespaceToken
from coordinator.leases import Kind
from tests.coordinator.conftest import NAMESPACE_TOKEN, Coordinator, config_for, start
from tests.coordinator.lease_http import CAPACITY, LeaseApi, template

TEAM_A = NAMESPACE_TOKEN  # for "team-a" only
TEAM_B = "team-b-token-for-tests-0123456789"
PLATFORM = "platform-token-for-tests-0123456789"  # for "team-c" and "team-d"
NAMESPACE_TOKENS = [
    NamespaceToken(token=TEAM_A, namespaces=["team-a"]),
    NamespaceToken(token=TEAM_B, namespaces=["team-b"]),
    NamespaceToken(token=PLATFORM, namespaces=["team-c", "team-d"]),
]
TEMPLATES = [template("fair", Kind.FAIR_SHARE), template("static", Kind.STATIC)]
NO_OTHERS = {"clients": 0, "has": 0, "wants": 0}


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[LeaseApi]:
    """The lease API with the admin token; ``with_token`` gives the namespaces' views."""
    config = config_for(tmp_path, resources=TEMPLATES, namespace_tokens=NAMESPACE_TOKENS)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        yield LeaseApi(Coordinator(url=url, app=runner.app, http=http))
    await runner.cleanup()


def holders(leases: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(namespace, client id) -> has, of a lease listing."""
    return {(lease["namespace"], lease["client_id"]): lease["has"] for lease in leases}


async def everything(admin: LeaseApi) -> tuple[Any, ...]:
    """All the lease state an admin can read, to show that a refusal changed nothing."""
    return (
        await admin.get_json("/v1/resources"),
        await admin.lease_view("fair"),
        await admin.lease_view("static"),
    )


# --- what was seen -------------------------------------------------------------------


async def test_a_client_id_of_another_namespace_is_a_new_client_not_a_refresh(
    admin: LeaseApi,
) -> None:
    team_a, team_b = admin.with_token(TEAM_A), admin.with_token(TEAM_B)
    assert await team_b.grant("team-b-client", "fair", 100) == 100

    assert await team_a.grant("team-b-client", "fair", 120) == 20  # only what is free

    assert holders(await admin.leases("fair")) == {
        ("team-a", "team-b-client"): 20,
        ("team-b", "team-b-client"): 100,
    }


async def test_a_release_naming_another_namespaces_client_leaves_its_lease(
    admin: LeaseApi,
) -> None:
    team_a, team_b = admin.with_token(TEAM_A), admin.with_token(TEAM_B)
    assert await team_b.grant("team-b-client", "fair", 100) == 100

    response = await team_a.release("team-b-client", ["fair"])

    assert (response.status, await response.json()) == (200, {})  # nothing of team-a's
    assert holders(await admin.leases("fair")) == {("team-b", "team-b-client"): 100}
    assert await team_a.grant("team-a-client", "fair", 120) == 20


async def test_a_namespace_token_sees_only_its_own_clients_and_totals_of_the_rest(
    admin: LeaseApi,
) -> None:
    team_a, team_b = admin.with_token(TEAM_A), admin.with_token(TEAM_B)
    await team_a.grant("web-7", "fair", 30)
    await team_b.grant("secret-b", "fair", 20, subclients=2)
    await team_b.grant("secret-b", "fair", 25)
    assert await admin.grant("cluster-batch", "fair", 100) == 65

    view = await team_a.lease_view("fair")

    (own,) = view["leases"]
    assert own == {
        "namespace": "team-a",
        "client_id": "web-7",
        "has": 30,
        "wants": 30,
        "subclients": 1,
        "priority": 0,
        "expiry_time": own["expiry_time"],
    }
    assert view["resource_id"] == "fair"
    assert view["others"] == {"clients": 2, "has": 90, "wants": 125}
    everyone = await admin.lease_view("fair")
    assert holders(everyone["leases"]) == {
        ("", "cluster-batch"): 65,
        ("team-a", "web-7"): 30,
        ("team-b", "secret-b"): 25,
    }
    assert everyone["others"] == NO_OTHERS


async def test_no_view_names_another_namespaces_client(admin: LeaseApi) -> None:
    await admin.with_token(TEAM_B).grant("secret-b", "fair", 20)
    await admin.grant("secret-cluster", "static", 5)
    views = [
        "/v1/resources",
        "/v1/resources/fair/status",
        "/v1/resources/fair/leases",
        "/v1/resources/static/status",
        "/v1/resources/static/leases",
        "/metrics",
    ]
    for path in views:
        response = await admin.coordinator.get(path, token=TEAM_A)
        text = await response.text()
        assert response.status == 200, text
        assert "secret" not in text, path


# --- acting for a namespace ------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/capacity", "/v1/capacity/release"])
async def test_naming_a_namespace_of_another_token_is_403_and_changes_nothing(
    admin: LeaseApi, path: str
) -> None:
    team_a, team_b = admin.with_token(TEAM_A), admin.with_token(TEAM_B)
    await team_b.grant("web-7", "fair", 100)
    before = await everything(admin)
    body = {
        "client_id": "web-7",
        "namespace": "team-b",
        "resources": [{"resource_id": "fair", "wants": 120}],
        "resource_ids": ["fair"],
    }

    response = await team_a.post(path, body)

    assert response.status == 403
    error = (await response.json())["error"]
    assert error["code"] == "forbidden"
    assert error["details"] == {"namespace": "team-b", "namespaces": ["team-a"]}
    assert await everything(admin) == before


async def test_an_admin_acts_for_the_cluster_or_for_the_namespace_it_names(
    admin: LeaseApi,
) -> None:
    team_a, team_b = admin.with_token(TEAM_A), admin.with_token(TEAM_B)
    await team_b.grant("web-7", "fair", 50)
    await admin.grant("web-7", "fair", 10)  # the cluster's own web-7
    await admin.grant("helper", "fair", 5, namespace="team-a")

    assert holders(await team_a.leases("fair")) == {("team-a", "helper"): 5}
    assert (await admin.release("web-7", ["fair"], namespace="team-b")).status == 200
    assert holders(await admin.leases("fair")) == {("", "web-7"): 10, ("team-a", "helper"): 5}
    assert (await admin.release("web-7", ["fair"])).status == 200
    assert holders(await admin.leases("fair")) == {("team-a", "helper"): 5}


async def test_a_token_of_several_namespaces_must_name_one(admin: LeaseApi) -> None:
    platform = admin.with_token(PLATFORM)
    before = await everything(admin)

    for response in (
        await platform.ask_response("web-7", "fair", 10),
        await platform.release("web-7", ["fair"]),
    ):
        assert response.status == 400
        error = (await response.json())["error"]
        assert error["code"] == "namespace_required"
        assert error["details"] == {"namespaces": ["team-c", "team-d"]}
        assert "namespace" in error["message"]
    assert await everything(admin) == before

    await platform.grant("web-7", "fair", 10, namespace="team-c")
    await platform.grant("web-7", "fair", 20, namespace="team-d")
    assert holders(await platform.leases("fair")) == {
        ("team-c", "web-7"): 10,
        ("team-d", "web-7"): 20,
    }


async def test_one_client_id_in_three_namespaces_holds_three_leases_within_capacity(
    admin: LeaseApi,
) -> None:
    apis = [admin.with_token(TEAM_A), admin.with_token(TEAM_B), admin]
    rounds = [[100, 10, 60], [40, 90, 5], [100, 10, 60], [70, 70, 70], [70, 70, 70]]
    for wants in rounds:
        for api, wanted in zip(apis, wants, strict=True):
            await api.grant("web-7", "fair", wanted)
            assert (await admin.status("fair"))["sum_has"] <= CAPACITY + 1e-6
    equal_shares = dict.fromkeys([("team-a", "web-7"), ("team-b", "web-7"), ("", "web-7")], 40)
    assert holders(await admin.leases("fair")) == pytest.approx(equal_shares)
    assert (await admin.status("fair"))["clients"] == 3
    metrics = await (await admin.coordinator.get("/metrics", token=None)).text()
    assert 'allot_lease_clients{resource="fair"} 3.0' in metrics

    assert (await admin.with_token(TEAM_A).release("web-7", ["fair"])).status == 200
    assert set(holders(await admin.leases("fair"))) == {("team-b", "web-7"), ("", "web-7")}


# --- validation at decode time -----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("namespace", "Team-A"),
        ("namespace", "team-a\n"),
        ("namespace", "-team"),
        ("namespace", ""),
        ("namespace", "a" * 64),
        ("namespace", 7),
        ("client_id", ""),
        ("client_id", "c" * 257),
    ],
    ids=[
        "upper-case-namespace",
        "namespace-with-newline",
        "namespace-starting-with-dash",
        "empty-namespace",
        "namespace-of-64",
        "namespace-not-a-string",
        "empty-client-id",
        "client-id-of-257",
    ],
)
@pytest.mark.parametrize("path", ["/v1/capacity", "/v1/capacity/release"])
async def test_a_malformed_namespace_or_client_id_is_400_and_changes_nothing(
    admin: LeaseApi, path: str, field: str, value: object
) -> None:
    await admin.grant("web-7", "fair", 10)
    before = await everything(admin)
    body = {
        "client_id": "web-7",
        "resources": [{"resource_id": "fair", "wants": 20}],
        "resource_ids": ["fair"],
    } | {field: value}

    response = await admin.post(path, body)

    assert response.status == 400
    error = (await response.json())["error"]
    assert (error["code"], f"$.{field}" in error["message"]) == ("invalid_request", True)
    assert await everything(admin) == before
