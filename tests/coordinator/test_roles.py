"""Roles of API tokens: admin tokens change configuration, namespace tokens only read (and
ask for capacity, plan and simulate); a refused write is 403 ``forbidden`` and changes
nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from coordinator.errors import Forbidden
from coordinator.http.auth import principal_for
from coordinator.http.roles import (
    ADMIN,
    PRINCIPAL,
    Principal,
    namespace_principal,
    principal_of,
    require_admin,
    require_namespace,
)
from tests.coordinator.conftest import (
    API_TOKEN,
    NAMESPACE,
    NAMESPACE_TOKEN,
    Coordinator,
    register,
)

EQ = "/v1/elasticquotas"
CEQ = "/v1/compositeelasticquotas"
TEMPLATE = {
    "capacity": 7,
    "algorithm": {"kind": "STATIC", "lease_length": 30, "refresh_interval": 10},
}


async def send(
    coordinator: Coordinator, method: str, path: str, body: object = None, *, token: str
) -> tuple[int, Any]:
    response = await coordinator.http.request(
        method, coordinator.url + path, json=body, headers={"Authorization": f"Bearer {token}"}
    )
    return response.status, await response.json()


async def as_admin(coordinator: Coordinator, method: str, path: str, body: object = None) -> Any:
    status, answer = await send(coordinator, method, path, body, token=API_TOKEN)
    assert status == 200, answer
    return answer


async def configured(coordinator: Coordinator) -> Coordinator:
    """A quota of each kind, a pool and a resource template, written by the admin."""
    await as_admin(coordinator, "PUT", f"{EQ}/{NAMESPACE}", {"namespace": NAMESPACE})
    await as_admin(coordinator, "PUT", f"{CEQ}/ml", {"namespaces": ["ml-1", "ml-2"]})
    await as_admin(coordinator, "PUT", "/v1/pools/production", {"weight": 2})
    await as_admin(coordinator, "PUT", "/v1/resources/db-*", TEMPLATE)
    return coordinator


async def configuration(coordinator: Coordinator) -> dict[str, Any]:
    """What the admin-only writes can change, as an admin reads it."""
    quotas = (await as_admin(coordinator, "GET", "/v1/quotas"))["quotas"]
    pools = (await as_admin(coordinator, "GET", "/v1/pools"))["pools"]
    templates = (await as_admin(coordinator, "GET", "/v1/resources"))["templates"]
    return {
        "quotas": [(q["name"], q["kind"], q["namespaces"], q["min"], q["max"]) for q in quotas],
        "pools": {pool["name"]: pool["config"] for pool in pools},
        "templates": templates,
    }


# Every admin-only write, on something that exists and on something new.
ADMIN_WRITES: list[tuple[str, str, object]] = [
    ("PUT", f"{EQ}/{NAMESPACE}", {"namespace": NAMESPACE, "min": {"cpu": 4}}),  # its own!
    ("PUT", f"{EQ}/team-b", {"namespace": "team-b"}),
    ("DELETE", f"{EQ}/{NAMESPACE}", None),
    ("PUT", f"{CEQ}/ml", {"namespaces": ["ml-1", "ml-2", "ml-3"]}),
    ("PUT", f"{CEQ}/batch", {"namespaces": ["batch-1"]}),
    ("DELETE", f"{CEQ}/ml", None),
    ("PUT", "/v1/pools/production", {"weight": 5}),
    ("PUT", "/v1/pools/research", {"weight": 1}),
    ("DELETE", "/v1/pools/production", None),
    ("PUT", "/v1/resources/db-*", TEMPLATE | {"capacity": 70}),
    ("PUT", "/v1/resources/seats-*", TEMPLATE),
    ("DELETE", "/v1/resources/db-*", None),
]
WRITE_IDS = [f"{method}-{path}" for method, path, _ in ADMIN_WRITES]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_WRITES, ids=WRITE_IDS)
async def test_a_namespace_token_may_not_change_configuration(
    coordinator: Coordinator, method: str, path: str, body: object
) -> None:
    await configured(coordinator)
    before = await configuration(coordinator)
    status, answer = await send(coordinator, method, path, body, token=NAMESPACE_TOKEN)
    assert status == 403, answer
    assert set(answer["error"]) == {"code", "message", "details"}
    assert answer["error"]["code"] == "forbidden"
    assert "needs an admin token" in answer["error"]["message"]
    assert answer["error"]["details"] == {"needs": "admin", "namespaces": [NAMESPACE]}
    assert await configuration(coordinator) == before


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_WRITES, ids=WRITE_IDS)
async def test_an_admin_token_may_change_configuration(
    coordinator: Coordinator, method: str, path: str, body: object
) -> None:
    await configured(coordinator)
    before = await configuration(coordinator)
    await as_admin(coordinator, method, path, body)
    assert await configuration(coordinator) != before


async def test_a_namespace_token_is_refused_before_its_body_is_read(
    coordinator: Coordinator,
) -> None:
    # A namespace token learns nothing from validation: 403, not 400 or 404.
    status, answer = await send(
        coordinator, "PUT", "/v1/pools/x", "not a pool", token=NAMESPACE_TOKEN
    )
    assert (status, answer["error"]["code"]) == (403, "forbidden")
    status, answer = await send(coordinator, "DELETE", f"{EQ}/ghost", token=NAMESPACE_TOKEN)
    assert (status, answer["error"]["code"]) == (403, "forbidden")


ADMIN_PREFIXES = (EQ, CEQ, "/v1/pools", "/v1/resources", "/v1/nodes")
OPEN_WRITES = frozenset({("POST", "/v1/pools/simulate")})
KNOWN_WRITE_PATHS = (f"{EQ}/{{name}}", f"{CEQ}/{{name}}", "/v1/pools/{name}", "/v1/resources/{id}")


async def test_every_write_route_on_configuration_is_admin_only(coordinator: Coordinator) -> None:
    """A guard for routes added later: each non-GET route under the configuration paths
    refuses a namespace token, except the ones that commit nothing."""
    checked = []
    for route in coordinator.app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if route.method in ("GET", "HEAD") or not path.startswith(ADMIN_PREFIXES):
            continue
        if (route.method, path) in OPEN_WRITES:
            continue
        concrete = re.sub(r"\{[^}]*\}", "x", path)
        status, answer = await send(coordinator, route.method, concrete, token=NAMESPACE_TOKEN)
        assert (status, answer["error"]["code"]) == (403, "forbidden"), (route.method, path)
        checked.append((route.method, path))
    known = {(method, path) for method in ("PUT", "DELETE") for path in KNOWN_WRITE_PATHS}
    assert set(checked) >= known


async def test_a_namespace_token_may_read_everything(coordinator: Coordinator) -> None:
    await configured(coordinator)
    ws = await register(coordinator, "node-a")
    paths = [
        "/v1/nodes",
        "/v1/nodes/node-a",
        "/v1/quotas",
        f"{EQ}/{NAMESPACE}",
        f"{CEQ}/ml",
        "/v1/pools",
        "/v1/pools/production",
        "/v1/pools/<root>",
        "/v1/resources",
        "/v1/resources/db-*",
        "/v1/resources/db-orders/status",
        "/v1/resources/db-orders/leases",
    ]
    await as_admin(
        coordinator,
        "POST",
        "/v1/capacity",
        {"client_id": "c0", "resources": [{"resource_id": "db-orders", "wants": 1}]},
    )
    for path in paths:
        status, namespace_view = await send(coordinator, "GET", path, token=NAMESPACE_TOKEN)
        assert status == 200, (path, namespace_view)
        admin_view = await as_admin(coordinator, "GET", path)
        if path.endswith("/leases"):  # the cluster's client c0 only as a total
            others = {"clients": 1, "has": 1, "wants": 1}
            admin_view |= {"leases": [], "others": others}
        if not path.startswith("/v1/nodes"):  # node records carry a last-seen time
            assert namespace_view == admin_view, path
    await ws.close()


async def test_a_namespace_token_may_ask_for_capacity_plan_and_simulate(
    coordinator: Coordinator,
) -> None:
    await configured(coordinator)
    capacity = {"client_id": "c0", "resources": [{"resource_id": "db-orders", "wants": 3}]}
    status, answer = await send(
        coordinator, "POST", "/v1/capacity", capacity, token=NAMESPACE_TOKEN
    )
    assert status == 200, answer
    assert answer["resources"][0]["gets"]["capacity"] == 3
    release = {"client_id": "c0", "resource_ids": ["db-orders"]}
    status, answer = await send(
        coordinator, "POST", "/v1/capacity/release", release, token=NAMESPACE_TOKEN
    )
    assert status == 200, answer
    plan = {
        "request": {"cpu": 1, "memory": "512Mi"},
        "count": 1,
        "nodes": [{"name": "m1", "cores": 2, "memory": "1Gi"}],
    }
    status, answer = await send(coordinator, "POST", "/v1/plans", plan, token=NAMESPACE_TOKEN)
    assert (status, answer["capacity"]) == (200, 2), answer
    simulation = {"total": {"cpu": 100}, "timeline": [{"dt": 1, "demands": {}}]}
    before = await configuration(coordinator)
    status, answer = await send(
        coordinator, "POST", "/v1/pools/simulate", simulation, token=NAMESPACE_TOKEN
    )
    assert status == 200, answer
    assert await configuration(coordinator) == before


async def test_a_token_close_to_a_namespace_token_is_401(coordinator: Coordinator) -> None:
    status, answer = await send(coordinator, "GET", "/v1/quotas", token=NAMESPACE_TOKEN[:-1] + "x")
    assert (status, answer["error"]["code"]) == (401, "unauthorized")


# --- the pieces --------------------------------------------------------------------------


def test_an_admin_may_use_every_namespace() -> None:
    assert ADMIN.may_use("team-a")
    assert ADMIN.may_use("anything-at-all")
    assert Principal(admin=True, namespaces=frozenset()).may_use("x")


def test_a_namespace_principal_may_use_only_its_namespaces() -> None:
    principal = namespace_principal(["team-a", "team-b"])
    assert principal == Principal(admin=False, namespaces=frozenset({"team-a", "team-b"}))
    assert principal.may_use("team-a")
    assert principal.may_use("team-b")
    assert not principal.may_use("team-c")
    assert not principal.may_use("team")  # no prefixes
    assert not principal.may_use("")
    assert not Principal(admin=False, namespaces=frozenset()).may_use("team-a")


def request_as(principal: Principal | None) -> web.Request:
    request = make_mocked_request("PUT", "/v1/pools/x")
    if principal is not None:
        request[PRINCIPAL] = principal
    return request


def test_principal_of_a_request_nobody_checked_is_a_bug_not_a_pass() -> None:
    with pytest.raises(RuntimeError, match="no API token was checked for PUT /v1/pools/x"):
        principal_of(request_as(None))
    with pytest.raises(RuntimeError):
        require_admin(request_as(None), "changing pools")


def test_require_admin() -> None:
    require_admin(request_as(ADMIN), "changing pools")
    with pytest.raises(Forbidden) as caught:
        require_admin(request_as(namespace_principal(["b", "a"])), "changing pools")
    assert (caught.value.kind, caught.value.code) == ("forbidden", "forbidden")
    assert caught.value.message == (
        "changing pools needs an admin token; this is a token for namespaces a, b"
    )


def test_require_namespace() -> None:
    require_namespace(request_as(ADMIN), "team-z")
    require_namespace(request_as(namespace_principal(["team-a"])), "team-a")
    with pytest.raises(Forbidden) as caught:
        require_namespace(request_as(namespace_principal(["team-a"])), "team-b")
    assert caught.value.code == "forbidden"
    assert caught.value.details == {"namespace": "team-b", "namespaces": ["team-a"]}


def test_principal_for_finds_the_matching_token_only() -> None:
    team = namespace_principal(["team-a"])
    principals = [("a" * 20, ADMIN), ("b" * 20, team)]
    assert principal_for("a" * 20, principals) is ADMIN
    assert principal_for("b" * 20, principals) is team
    assert principal_for("b" * 19, principals) is None
    assert principal_for("b" * 21, principals) is None
    assert principal_for(None, principals) is None
    assert principal_for("a" * 20, []) is None
