"""The HTTP API over a real socket: tokens, JSON errors, health, nodes and metrics."""

from __future__ import annotations

import pytest

from tests.coordinator.conftest import API_TOKEN, JOIN_TOKEN, Coordinator, register


async def test_health_is_open(coordinator: Coordinator) -> None:
    response = await coordinator.get("/healthz", token=None)
    assert response.status == 200
    assert await response.json() == {"status": "ok"}


async def test_a_coordinator_alone_is_always_ready_as_the_leader(coordinator: Coordinator) -> None:
    response = await coordinator.get("/readyz", token=None)
    assert response.status == 200
    assert await response.json() == {"status": "ok", "role": "leader"}


async def test_metrics_are_open_prometheus_text(coordinator: Coordinator) -> None:
    response = await coordinator.get("/metrics", token=None)
    assert response.status == 200
    assert response.content_type == "text/plain"
    text = await response.text()
    assert "# TYPE allot_nodes gauge" in text
    assert 'allot_nodes{state="lost"} 0.0' in text


@pytest.mark.parametrize("token", [None, "not-an-api-token-0123456"], ids=["missing", "wrong"])
@pytest.mark.parametrize("path", ["/v1/nodes", "/v1/nodes/node-a", "/v1/nothing-here"])
async def test_api_without_a_valid_token_is_401_json(
    coordinator: Coordinator, token: str | None, path: str
) -> None:
    response = await coordinator.get(path, token=token)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    body = await response.json()
    assert body["error"]["code"] == "unauthorized"
    assert set(body["error"]) == {"code", "message", "details"}


async def test_the_join_token_is_not_an_api_token(coordinator: Coordinator) -> None:
    response = await coordinator.get("/v1/nodes", token=JOIN_TOKEN)
    assert response.status == 401


async def test_nodes_list_is_empty_then_shows_a_registered_node(coordinator: Coordinator) -> None:
    assert await coordinator.get_json("/v1/nodes") == {"nodes": []}
    ws = await register(coordinator, "node-a")
    nodes = (await coordinator.get_json("/v1/nodes"))["nodes"]
    assert [node["name"] for node in nodes] == ["node-a"]
    assert nodes[0]["inventory"]["cpus"][1] == {"id": 1, "core": 1, "package": 0, "numa": 0}
    await ws.close()


async def test_an_unknown_node_is_404_json(coordinator: Coordinator) -> None:
    response = await coordinator.get("/v1/nodes/ghost")
    assert response.status == 404
    body = await response.json()
    assert body == {
        "error": {
            "code": "not_found",
            "message": "no node named 'ghost'",
            "details": {"node": "ghost"},
        }
    }


async def test_unknown_route_and_wrong_method_are_json(coordinator: Coordinator) -> None:
    missing = await coordinator.get("/v1/nothing-here")
    assert missing.status == 404
    assert (await missing.json())["error"]["code"] == "not_found"
    wrong = await coordinator.http.delete(
        coordinator.url + "/v1/nodes", headers={"Authorization": f"Bearer {API_TOKEN}"}
    )
    assert wrong.status == 405
    assert (await wrong.json())["error"]["code"] == "method_not_allowed"
