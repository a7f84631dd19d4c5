"""The lease API of a real coordinator over HTTP, as one API token uses it."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from coordinator.leases import Algorithm, Kind, ResourceTemplate
from tests.coordinator.conftest import API_TOKEN, Coordinator

CAPACITY = 120.0


def template(
    glob: str, kind: Kind, capacity: float = CAPACITY, **algorithm: Any
) -> ResourceTemplate:
    """A template with leases of a minute and no learning, unless ``algorithm`` says else."""
    settings: dict[str, Any] = {"lease_length": 60, "refresh_interval": 5} | algorithm
    settings.setdefault("learning_mode_duration", 0)
    return ResourceTemplate(
        identifier_glob=glob, capacity=capacity, algorithm=Algorithm(kind=kind, **settings)
    )


class LeaseApi:
    """Requests with one token; ``namespace``, where a method takes it, goes in the body
    only when given."""

    def __init__(self, coordinator: Coordinator, token: str = API_TOKEN) -> None:
        self.coordinator = coordinator
        self.token = token

    def with_token(self, token: str) -> LeaseApi:
        return LeaseApi(self.coordinator, token)

    async def post(self, path: str, body: object) -> aiohttp.ClientResponse:
        """POST ``body``: JSON from a value, or sent as it is from bytes."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.coordinator.http.post(
            self.coordinator.url + path,
            data=data,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )

    async def get_json(self, path: str) -> Any:
        response = await self.coordinator.get(path, token=self.token)
        assert response.status == 200, await response.text()
        return await response.json()

    async def ask_response(
        self, client: str, resource: str, wants: float, namespace: str | None = None, **extra: Any
    ) -> aiohttp.ClientResponse:
        body: dict[str, Any] = {
            "client_id": client,
            "resources": [{"resource_id": resource, "wants": wants} | extra],
        }
        if namespace is not None:
            body["namespace"] = namespace
        return await self.post("/v1/capacity", body)

    async def ask(
        self, client: str, resource: str, wants: float, namespace: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        response = await self.ask_response(client, resource, wants, namespace, **extra)
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = (await response.json())["resources"][0]
        return answer

    async def grant(
        self, client: str, resource: str, wants: float, namespace: str | None = None, **extra: Any
    ) -> float:
        answer = await self.ask(client, resource, wants, namespace, **extra)
        capacity: float = answer["gets"]["capacity"]
        return capacity

    async def release(
        self, client: str, resources: list[str], namespace: str | None = None
    ) -> aiohttp.ClientResponse:
        body: dict[str, Any] = {"client_id": client, "resource_ids": resources}
        if namespace is not None:
            body["namespace"] = namespace
        return await self.post("/v1/capacity/release", body)

    async def status(self, resource: str) -> dict[str, Any]:
        status: dict[str, Any] = await self.get_json(f"/v1/resources/{resource}/status")
        return status

    async def lease_view(self, resource: str) -> dict[str, Any]:
        """The whole answer of ``GET /v1/resources/{id}/leases``."""
        view: dict[str, Any] = await self.get_json(f"/v1/resources/{resource}/leases")
        return view

    async def leases(self, resource: str) -> list[dict[str, Any]]:
        leases: list[dict[str, Any]] = (await self.lease_view(resource))["leases"]
        return leases
