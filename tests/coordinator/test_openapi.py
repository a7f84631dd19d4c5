"""The OpenAPI document against the app it describes: every route and nothing else, every
example valid, and live answers of a real coordinator valid against their schemas.

Validation uses a small checker of the JSON Schema keywords the document uses (below); a
keyword it does not know fails the test instead of passing unchecked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from coordinator.app import make_app
from coordinator.http.auth import UI_PREFIX
from coordinator.openapi import examples as ex
from coordinator.openapi.document import openapi_document, resolve
from coordinator.openapi.operations import OPENAPI_PATH, OPERATIONS
from shared.api.deployments import MAX_COUNT
from shared.codec import json_decoder, to_json
from shared.protocol import SUBPROTOCOL
from tests.coordinator.conftest import (
    API_TOKEN,
    JOIN_TOKEN,
    NAMESPACE_TOKEN,
    Coordinator,
    config_for,
    register,
    report_caught_up,
)

DOCUMENT = openapi_document()
DEPLOYMENTS = "/v1/namespaces/{namespace}/deployments"
METHODS = ("get", "put", "post", "delete", "patch")

# --- a checker for the subset of JSON Schema in the document -------------------------

ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: object, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    if kind == "number" and isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, JSON_TYPES[kind])


def problems(schema: Mapping[str, Any], value: object, where: str = "$") -> list[str]:
    """Why ``value`` does not match ``schema`` (refs resolved in the document); [] if it does."""
    unknown = set(schema) - ANNOTATIONS - set(_CHECKS)
    if unknown:
        raise AssertionError(f"{where}: the checker does not know {sorted(unknown)}")
    found: list[str] = []
    for keyword, check in _CHECKS.items():
        if keyword in schema:
            found += check(schema, value, where)
    return found


def _ref(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    return problems(resolve(DOCUMENT, schema["$ref"]), value, where)


def _type(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if any(_is(value, kind) for kind in kinds):
        return []
    return [f"{where}: {value!r} is not of type {schema['type']}"]


def _enum(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    ok = any(type(value) is type(item) and value == item for item in schema["enum"])
    return [] if ok else [f"{where}: {value!r} is not one of {schema['enum']}"]


def _any_of(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    tried = [problems(option, value, where) for option in schema["anyOf"]]
    return [] if any(not found for found in tried) else [f"{where}: no anyOf matches: {tried}"]


def _properties(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    found: list[str] = []
    for name, sub in schema["properties"].items():
        if name in value:
            found += problems(sub, value[name], f"{where}.{name}")
    return found


def _required(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    return [f"{where}: {name!r} is missing" for name in schema["required"] if name not in value]


def _additional(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    extra = schema["additionalProperties"]
    found: list[str] = []
    for name in set(value) - set(schema.get("properties", {})):
        if extra is False:
            found.append(f"{where}: unknown property {name!r}")
        elif extra is not True:
            found += problems(extra, value[name], f"{where}.{name}")
    return found


def _property_names(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    names = schema["propertyNames"]
    return [p for name in value for p in problems(names, name, f"{where} key {name!r}")]


def _items(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    if not isinstance(value, list):
        return []
    return [
        p for i, item in enumerate(value) for p in problems(schema["items"], item, f"{where}[{i}]")
    ]


_MEASURED: dict[str, type | str] = {
    "imum": "number",
    "Length": str,
    "Items": list,
    "Properties": dict,
}


def _bound(keyword: str) -> Any:
    """minimum/maximum of a number, or the least or most characters, items or properties."""
    (kind,) = (kind for suffix, kind in _MEASURED.items() if keyword.endswith(suffix))

    def check(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
        if not (_is(value, kind) if isinstance(kind, str) else isinstance(value, kind)):
            return []
        limit = schema[keyword]
        measure = value if kind == "number" else len(value)  # type: ignore[arg-type]
        ok = measure >= limit if keyword.startswith("min") else measure <= limit
        return [] if ok else [f"{where}: {value!r} breaks {keyword} {limit}"]

    return check


def _pattern(schema: Mapping[str, Any], value: object, where: str) -> list[str]:
    if not isinstance(value, str) or re.search(schema["pattern"], value):
        return []
    return [f"{where}: {value!r} does not match {schema['pattern']!r}"]


_CHECKS = {
    "$ref": _ref,
    "type": _type,
    "enum": _enum,
    "anyOf": _any_of,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "propertyNames": _property_names,
    "items": _items,
    "minimum": _bound("minimum"),
    "maximum": _bound("maximum"),
    "minLength": _bound("minLength"),
    "maxLength": _bound("maxLength"),
    "maxItems": _bound("maxItems"),
    "maxProperties": _bound("maxProperties"),
    "pattern": _pattern,
}


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"$ref": "#/components/schemas/ScaleSpec"}, {"count": -1}),
        ({"$ref": "#/components/schemas/ScaleSpec"}, {"count": 1, "colour": "red"}),
        ({"$ref": "#/components/schemas/ScaleSpec"}, {}),
        ({"$ref": "#/components/schemas/ScaleSpec"}, {"count": True}),
        ({"$ref": "#/components/schemas/NodeHealth"}, "gone"),
        ({"$ref": "#/components/schemas/Gpu"}, {"numa": "0"}),
        ({"$ref": "#/components/schemas/DeploymentSpec"}, ex.DEPLOYMENT_SPEC | {"name": "Web!"}),
        (
            {"$ref": "#/components/schemas/ResourcesSpec"},
            {"cpu": "1", "mig": {"3G.40GB": 1}},
        ),
        ({"$ref": "#/components/schemas/NodeList"}, {"nodes": [{"name": "n"}]}),
        ({"$ref": "#/components/schemas/Inventory"}, ex.INVENTORY | {"online": "0-"}),
        ({"$ref": "#/components/schemas/Inventory"}, ex.INVENTORY | {"memory": 0}),
        ({"$ref": "#/components/schemas/Gpu"}, {"uuid": ""}),
        ({"$ref": "#/components/schemas/NumaNode"}, {"distances": {"0": 9}}),
    ],
)
def test_the_checker_finds_what_is_wrong(schema: dict[str, Any], value: object) -> None:
    assert problems(schema, value)


# --- the document and the app ----------------------------------------------------------


def test_every_route_is_documented_and_nothing_else(tmp_path: Path) -> None:
    app = make_app(config_for(tmp_path))
    routes = {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.method != "HEAD"
        and route.resource is not None
        # The dashboard's HTML pages are no part of the JSON API.
        and not (route.resource.canonical + "/").startswith(UI_PREFIX)
    }
    documented = {(method, path) for path, item in DOCUMENT["paths"].items() for method in item}
    assert routes - documented == set(), (
        "routes without an entry in coordinator/openapi/operations.py"
    )
    assert documented - routes == set(), "documented operations the app does not have"


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            assert method in METHODS, (path, method)
            yield method, path, operation


def response(operation: Mapping[str, Any], status: int) -> dict[str, Any]:
    answer = operation["responses"][str(status)]
    found: dict[str, Any] = resolve(DOCUMENT, answer["$ref"]) if "$ref" in answer else answer
    return found


def test_every_operation_is_described_completely() -> None:
    ids = [operation["operationId"] for _, _, operation in operations()]
    assert len(ids) == len(set(ids)) == len(OPERATIONS)
    for method, path, operation in operations():
        where = f"{method.upper()} {path}"
        assert operation["summary"], where
        assert operation["tags"], where
        assert set(re.findall(r"\{(\w+)\}", path)) == {
            p["name"] for p in operation.get("parameters", []) if p["in"] == "path"
        }, where
        if "requestBody" in operation:
            assert operation["requestBody"]["content"]["application/json"]["examples"], where
        for status in operation["responses"]:
            content = response(operation, int(status)).get("content", {})
            if status.startswith("2") or int(status) >= 400:
                assert content, where
            for media in content.values():
                assert media["examples"], f"{where} {status}"
        is_open = path in ("/healthz", "/readyz", "/metrics")
        assert (operation["security"] == []) == is_open, where
        if not is_open:
            assert "401" in operation["responses"], where


def examples() -> Iterator[Any]:
    """A (schema, value) parameter for every example in the document, request or answer."""
    for method, path, operation in operations():
        where = f"{method.upper()} {path}"
        media_types = [("request", operation.get("requestBody", {}).get("content", {}))]
        media_types += [
            (s, response(operation, int(s)).get("content", {})) for s in operation["responses"]
        ]
        for part, content in media_types:
            for media in content.values():
                for name, example in media["examples"].items():
                    yield pytest.param(
                        media["schema"], example["value"], id=f"{where} {part} {name}"
                    )


@pytest.mark.parametrize(("schema", "value"), list(examples()))
def test_every_example_validates_against_its_schema(schema: dict[str, Any], value: object) -> None:
    assert problems(schema, value) == []


def struct_examples() -> Iterator[Any]:
    for op in OPERATIONS:
        answers = [(alt.response, alt.examples) for alt in op.alternatives]
        for body, named in (
            (op.request, op.request_examples),
            (op.response, op.examples),
            *answers,
        ):
            if isinstance(body, type):
                for name, value in named.items():
                    yield pytest.param(body, value, id=f"{op.method} {op.path} {name}")


@pytest.mark.parametrize(("body", "value"), list(struct_examples()))
def test_struct_examples_decode_as_the_coordinator_decodes(body: type[Any], value: object) -> None:
    """The schema msgspec wrote and the decoder msgspec runs agree on every example."""
    json_decoder(body).decode(to_json(value))


# --- live -------------------------------------------------------------------------------


async def test_the_document_is_served_to_any_api_token(coordinator: Coordinator) -> None:
    served = await coordinator.get_json(OPENAPI_PATH)
    assert served["openapi"] == "3.1.0"
    assert served == DOCUMENT
    assert (await coordinator.get(OPENAPI_PATH, token=NAMESPACE_TOKEN)).status == 200
    assert (await coordinator.get(OPENAPI_PATH, token=None)).status == 401


async def test_live_answers_match_the_documented_schemas(cluster: Coordinator) -> None:
    """A session that calls every operation; each answer must have a documented status
    and validate against the schema documented for it."""
    ws = await register(cluster, "node-a")
    called: set[tuple[str, str]] = set()

    async def call(
        method: str,
        template: str,
        status: int,
        body: object = None,
        *,
        at: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
        token: str | None = API_TOKEN,
    ) -> Any:
        path = template.format(**(at or {}))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        answer = await cluster.http.request(
            method, cluster.url + path, json=body, headers=headers, params=query
        )
        assert answer.status == status, (method, path, await answer.text())
        operation = DOCUMENT["paths"][template][method.lower()]
        assert str(status) in operation["responses"], (method, template, status)
        [(media, described)] = response(operation, status)["content"].items()
        assert answer.content_type == media
        value = await (answer.json() if media == "application/json" else answer.text())
        assert problems(described["schema"], value) == [], (method, path)
        called.add((method.lower(), template))
        return value

    await call("GET", "/healthz", 200, token=None)
    await call("GET", "/readyz", 200, token=None)
    await call("GET", "/metrics", 200, token=None)
    await call("GET", "/v1/nodes", 200)
    await call("GET", "/v1/nodes", 401, token=None)
    await call("GET", "/v1/nodes/{name}", 200, at={"name": "node-a"})
    await call("GET", "/v1/nodes/{name}", 404, at={"name": "ghost"})
    await call("GET", "/v1/nodes/{name}/allocation", 200, at={"name": "node-a"})
    await call("GET", "/v1/nodes/{name}/allocation", 404, at={"name": "ghost"})

    glob = {"id": "db.*"}
    await call("PUT", "/v1/resources/{id}", 200, ex.TEMPLATE_BODY, at=glob)
    await call("GET", "/v1/resources/{id}", 200, at=glob)
    await call("POST", "/v1/capacity", 200, ex.CAPACITY_REQUEST)
    await call("POST", "/v1/capacity", 200, ex.CAPACITY_REQUEST_FULL)
    await call("POST", "/v1/capacity", 400, {"client_id": "c", "resources": "x"})
    await call("GET", "/v1/resources", 200)
    await call("GET", "/v1/resources/{id}/status", 200, at={"id": "db.write"})
    await call("GET", "/v1/resources/{id}/leases", 200, at={"id": "db.write"})
    await call("POST", "/v1/capacity/release", 200, ex.RELEASE_REQUEST)
    foreign = ex.CAPACITY_REQUEST | {"namespace": "team-b"}
    await call("POST", "/v1/capacity", 403, foreign, token=NAMESPACE_TOKEN)
    await call("POST", "/v1/capacity", 200, ex.CAPACITY_REQUEST, token=NAMESPACE_TOKEN)
    leases = {"id": "db.write"}
    await call("GET", "/v1/resources/{id}/leases", 200, at=leases, token=NAMESPACE_TOKEN)
    await call("POST", "/v1/capacity/release", 403, ex.RELEASE_FOR_NAMESPACE, token=NAMESPACE_TOKEN)
    await call("POST", "/v1/capacity/release", 200, ex.RELEASE_FOR_NAMESPACE)

    await call("POST", "/v1/plans", 200, ex.PLAN_REQUEST)
    await call("POST", "/v1/plans", 200, ex.PLAN_ON_REGISTERED)
    await call("POST", "/v1/plans", 409, ex.PLAN_REQUEST | {"count": 9})

    eq, ceq = "/v1/elasticquotas/{name}", "/v1/compositeelasticquotas/{name}"
    team, ml = {"name": "team-a"}, {"name": "ml"}
    await call("PUT", eq, 200, ex.ELASTIC_QUOTA_BODY, at=team)
    await call("PUT", eq, 403, ex.ELASTIC_QUOTA_BODY, at=team, token=NAMESPACE_TOKEN)
    await call("GET", eq, 200, at=team)
    await call("PUT", ceq, 200, ex.COMPOSITE_QUOTA_BODY, at=ml)
    await call("PUT", ceq, 409, {"namespaces": ["team-a", "x"]}, at={"name": "x"})
    await call("GET", ceq, 200, at=ml)
    await call("GET", "/v1/quotas", 200)

    pool = {"name": "production"}
    await call("PUT", "/v1/pools/{name}", 200, ex.BURST_POOL, at=pool)
    await call("PUT", "/v1/pools/{name}", 422, {"weight": 0}, at={"name": "bad"})
    await call("GET", "/v1/pools", 200)
    await call("GET", "/v1/pools/{name}", 200, at=pool)
    await call("GET", "/v1/pools/{name}", 200, at={"name": "<root>"})
    await call("POST", "/v1/pools/simulate", 200, ex.SIMULATION_REQUEST)

    ns, other, web = (
        {"namespace": "team-a"},
        {"namespace": "team-b"},
        {"namespace": "team-a", "name": "web"},
    )
    one = DEPLOYMENTS + "/{name}"
    await call("POST", DEPLOYMENTS, 201, ex.DEPLOYMENT_SPEC, at=ns)
    await call("POST", DEPLOYMENTS, 201, ex.BATCH_SPEC, at=ns)
    await call("POST", DEPLOYMENTS, 403, ex.DEPLOYMENT_SPEC, at=other, token=NAMESPACE_TOKEN)
    await call("POST", DEPLOYMENTS, 400, {"name": "web"}, at=ns)
    await call("GET", DEPLOYMENTS, 200, at=ns)
    await call("GET", one, 200, at=web)
    scaled = await call("POST", one + "/scale", 200, {"count": 1}, at=web)
    await report_caught_up(cluster, ws)  # the one scaled away is gone: its cores are free
    await call("GET", "/v1/containers", 200, query={"capacity": "in-quota"})
    await call("GET", "/v1/containers", 400, query={"colour": "red"})
    container = {"id": scaled["containers"][0]["record"]["id"]}
    await call("GET", "/v1/containers/{id}", 200, at=container)
    await call("PATCH", "/v1/containers/{id}", 200, ex.REALLOC_DELTA, at=container)
    await call("PATCH", "/v1/containers/{id}", 200, ex.REALLOC_SHRINK, at=container)
    replaced = await call(
        "POST", "/v1/containers/{id}/replace", 201, {"image": "busybox:2"}, at=container
    )
    await call("GET", "/v1/containers/{id}", 200, at=container)  # replaced_by, until swapped
    container = {"id": replaced["record"]["id"]}
    await call("GET", "/v1/events", 200, query={"kind": "placed", "since": "1"})
    await call("GET", "/v1/events", 400, query={"since": "yesterday"})
    node, capacity = {"name": "node-a"}, "/v1/nodes/{name}/capacity"
    await call("PATCH", capacity, 200, ex.CAPACITY_GROW, at=node)
    await call("PATCH", capacity, 200, ex.CAPACITY_MEMORY, at=node)
    await call("PATCH", capacity, 409, {"mode": "absolute", "memory": 1}, at=node)
    await call("PATCH", capacity, 400, {"mode": "sideways"}, at=node)
    await call("POST", "/v1/nodes/{name}/cordon", 200, at=node)
    await call("POST", "/v1/nodes/{name}/uncordon", 200, at=node)
    await call("DELETE", "/v1/containers/{id}", 200, at=container)
    await call("DELETE", one, 200, at=web)
    await call("DELETE", one, 404, at=web)

    await call("DELETE", eq, 200, at=team)
    await call("DELETE", ceq, 200, at=ml)
    await call("DELETE", "/v1/pools/{name}", 200, at=pool)
    await call("DELETE", "/v1/resources/{id}", 200, at=glob)
    await call("POST", "/v1/nodes/{name}/drain", 200, at=node)
    await call("DELETE", "/v1/nodes/{name}", 409, at=node)  # ready: only a lost one goes
    await call("DELETE", "/v1/nodes/{name}", 403, at=node, token=NAMESPACE_TOKEN)
    await call("DELETE", "/v1/nodes/{name}", 404, at={"name": "ghost"})
    await call("GET", OPENAPI_PATH, 200)

    every = {(method, path) for method, path, _ in operations()}
    assert every - called == {("get", "/v1/agent")}  # the socket has a test of its own
    await ws.close()


async def test_the_agent_socket_answers_as_documented(coordinator: Coordinator) -> None:
    operation = DOCUMENT["paths"]["/v1/agent"]["get"]
    assert operation["security"] == [{"joinToken": []}]
    refusals = [
        await coordinator.get("/v1/agent", token=API_TOKEN),  # an API token is not the join token
        await coordinator.get("/v1/agent", token=JOIN_TOKEN),  # no websocket subprotocol offered
    ]
    for answer in refusals:
        schema = response(operation, answer.status)["content"]["application/json"]["schema"]
        assert problems(schema, await answer.json()) == []
    assert [answer.status for answer in refusals] == [401, 400]
    assert "101" in operation["responses"]
    ws = await register(coordinator, "node-a")  # the upgrade, and a hello answered
    assert ws.protocol == SUBPROTOCOL
    await ws.close()


@pytest.mark.parametrize("operation_id", ["createDeployment", "scaleDeployment"])
def test_the_cap_on_a_deployments_containers_is_documented(operation_id: str) -> None:
    [operation] = [o for _, _, o in operations() if o["operationId"] == operation_id]
    assert f"at most {MAX_COUNT:,} containers" in operation["description"]
