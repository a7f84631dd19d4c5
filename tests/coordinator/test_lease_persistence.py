"""Leases with their namespaces in the store: through restarts, from a store of the
version before namespaces, and under concurrent requests from several tokens, each time
with a real coordinator on loopback and its SQLite store."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from coordinator.config import CoordinatorConfig, NamespaceToken
from coordinator.keys import LEASES, STORE
from coordinator.leases import Kind
from coordinator.services.lease_keys import HELD_PREFIX
from coordinator.services.lease_service import LeaseService, StoredLease
from coordinator.store import Txn
from coordinator.store.sqlite import SqliteStore
from shared.codec import to_json
from shared.logs import fields_of
from tests.coordinator.conftest import NAMESPACE_TOKEN, Coordinator, config_for, start
from tests.coordinator.lease_http import CAPACITY, LeaseApi, template

TEAM_A = NAMESPACE_TOKEN  # for "team-a" only
TEAM_B = "team-b-token-for-tests-0123456789"
RESOURCES = ("fair", "proportional", "static")
TEMPLATES = [
    template("fair", Kind.FAIR_SHARE),
    template("proportional", Kind.PROPORTIONAL_SHARE),
    template("static", Kind.STATIC),
]


def config(data_dir: Path) -> CoordinatorConfig:
    tokens = [
        NamespaceToken(token=TEAM_A, namespaces=["team-a"]),
        NamespaceToken(token=TEAM_B, namespaces=["team-b"]),
    ]
    return config_for(data_dir, resources=TEMPLATES, namespace_tokens=tokens)


class Restartable:
    """A coordinator on one store that a test stops and starts again."""

    def __init__(self, config: CoordinatorConfig, http: aiohttp.ClientSession) -> None:
        self.config = config
        self.http = http
        self.runner: web.AppRunner | None = None

    async def start(self) -> LeaseApi:
        """The admin's lease API of a coordinator started on the store."""
        self.runner, url = await start(self.config)
        return LeaseApi(Coordinator(url=url, app=self.runner.app, http=self.http))

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[Restartable]:
    async with aiohttp.ClientSession() as http:
        restartable = Restartable(config(tmp_path), http)
        try:
            yield restartable
        finally:
            await restartable.stop()


def holders(leases: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """(namespace, client id) -> has, of a lease listing."""
    return {(lease["namespace"], lease["client_id"]): lease["has"] for lease in leases}


async def test_a_restart_keeps_each_lease_with_its_namespace(coordinator: Restartable) -> None:
    admin = await coordinator.start()
    for api in (admin.with_token(TEAM_A), admin.with_token(TEAM_B), admin):
        await api.grant("web-7", "fair", 30)
        await api.grant("web-7", "static", 5)
    await admin.grant("web-7", "static", 7, namespace="team-b")  # the admin, for team-b
    before = [await admin.lease_view(resource) for resource in ("fair", "static")]

    await coordinator.stop()
    admin = await coordinator.start()

    assert [await admin.lease_view(resource) for resource in ("fair", "static")] == before
    assert holders(before[1]["leases"]) == {
        ("", "web-7"): 5,
        ("team-a", "web-7"): 5,
        ("team-b", "web-7"): 7,
    }
    team_a = admin.with_token(TEAM_A)
    assert await team_a.grant("web-7", "fair", 60) == 60  # its own lease, refreshed
    assert holders(await team_a.leases("fair")) == {("team-a", "web-7"): 60}
    assert (await team_a.lease_view("fair"))["others"] == {"clients": 2, "has": 60, "wants": 60}


async def test_a_store_of_the_version_before_namespaces_loads_as_the_clusters_own(
    coordinator: Restartable, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    await coordinator.start()  # a store with its templates, past learning mode
    await coordinator.stop()
    lease = StoredLease(has=30, wants=40, subclients=1, priority=0, expiry_time=4e9)
    expired = StoredLease(has=5, wants=5, subclients=1, priority=0, expiry_time=1.0)
    old_keys = {
        "/leases/held/fair/web-7": lease,
        "/leases/held/fair/a%2Fb": lease,
        "/leases/held/fair/gone": expired,
    }
    store = await SqliteStore.open(coordinator.config.store_path)  # as the old version wrote
    await store.commit(Txn(puts={key: to_json(value) for key, value in old_keys.items()}))
    await store.close()
    monkeypatch.setattr(logging.getLogger("allot"), "propagate", True)  # to caplog
    caplog.set_level(logging.INFO, logger="allot.coordinator.leases")

    admin = await coordinator.start()

    assert holders(await admin.leases("fair")) == {("", "a/b"): 30, ("", "web-7"): 30}
    assert (await admin.status("fair"))["learning"] is False
    assert await admin.with_token(TEAM_A).leases("fair") == []
    store_keys = [entry.key for entry in await admin.coordinator.app[STORE].range(HELD_PREFIX)]
    assert store_keys == ["/leases/held/fair//a%2Fb", "/leases/held/fair//web-7"]  # rewritten
    logged = {r.getMessage(): fields_of(r) for r in caplog.records}
    assert logged["leases loaded"]["leases"] == 2
    assert logged["leases loaded"]["dropped"] == 1
    rekeyed = "leases of a store without namespaces now belong to the cluster's own clients"
    assert logged[rekeyed] == {"leases": 2}
    assert (await admin.release("web-7", ["fair"])).status == 200
    await coordinator.stop()
    admin = await coordinator.start()
    assert holders(await admin.leases("fair")) == {("", "a/b"): 30}  # released for good


async def test_concurrent_requests_of_three_tokens_leave_memory_and_store_alike(
    coordinator: Restartable,
) -> None:
    admin = await coordinator.start()
    apis = [admin.with_token(TEAM_A), admin.with_token(TEAM_B), admin]
    rng = random.Random(15)

    def some_resources() -> list[str]:
        return rng.sample(RESOURCES, rng.randint(1, len(RESOURCES)))

    async def one_request() -> int:
        api = rng.choice(apis)
        # The admin acts for the cluster's clients, or for team-a's, as team-a does.
        namespace = rng.choice([None, "team-a"]) if api is admin else None
        client = f"c{rng.randrange(5)}"
        if rng.random() < 0.3:
            response = await api.release(client, some_resources(), namespace)
        else:
            body = {
                "client_id": client,
                "resources": [
                    {"resource_id": r, "wants": rng.uniform(0, 80), "priority": rng.randint(0, 1)}
                    for r in some_resources()
                ],
            }
            response = await api.post("/v1/capacity", body | {"namespace": namespace})
        return response.status

    statuses = await asyncio.gather(*(one_request() for _ in range(300)))

    assert set(statuses) == {200}
    in_memory = admin.coordinator.app[LEASES]
    from_store = await LeaseService.load(admin.coordinator.app[STORE], [])
    for resource in RESOURCES:
        assert in_memory.leases(resource) == from_store.leases(resource), resource
    namespaces = {lease.namespace for r in RESOURCES for lease in in_memory.leases(r)}
    assert namespaces == {"", "team-a", "team-b"}
    for resource in ("fair", "proportional"):
        assert sum(lease.has for lease in in_memory.leases(resource)) <= CAPACITY + 1e-6
