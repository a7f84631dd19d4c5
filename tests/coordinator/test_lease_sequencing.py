"""Lease decisions on their own sequenced path, over real HTTP: capacity requests,
releases and template changes sent at once from several tokens share commits and leave
the tables equal to a fresh load of the store, on SQLite and on etcd; a failed commit
changes nothing in memory; no read sees a grant whose commit is still in flight."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest

from coordinator.config import NamespaceToken
from coordinator.keys import LEASES, STORE
from coordinator.leases import Kind
from coordinator.services.lease_service import LeaseService
from coordinator.store import StoreError, Txn, TxnResult
from tests.coordinator.conftest import NAMESPACE_TOKEN, Coordinator, config_for, start
from tests.coordinator.lease_http import LeaseApi, template
from tests.coordinator.store_engines import Engine

TEAM_B = "team-b-token-for-tests-0123456789"
RESOURCES = ("fair", "proportional", "static", "extra.1")
TEMPLATES = [
    template("fair", Kind.FAIR_SHARE),
    template("proportional", Kind.PROPORTIONAL_SHARE),
    template("static", Kind.STATIC),
]


@contextlib.asynccontextmanager
async def coordinator_on(engine: Engine, data_dir: Path) -> AsyncIterator[LeaseApi]:
    """The admin's lease API of a coordinator on ``engine``'s store."""
    store: dict[str, Any] = {}
    if engine.etcd is not None:
        store = {"store": "etcd", "etcd_endpoints": list(engine.etcd.endpoints)}
        store["etcd_prefix"] = engine.etcd.prefix
    tokens = [
        NamespaceToken(token=NAMESPACE_TOKEN, namespaces=["team-a"]),
        NamespaceToken(token=TEAM_B, namespaces=["team-b"]),
    ]
    config = config_for(data_dir, resources=TEMPLATES, namespace_tokens=tokens, **store)
    runner, url = await start(config)
    try:
        async with aiohttp.ClientSession() as http:
            yield LeaseApi(Coordinator(url=url, app=runner.app, http=http))
    finally:
        await runner.cleanup()


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[LeaseApi]:
    async with coordinator_on(Engine("sqlite", path=tmp_path / "store.db"), tmp_path) as api:
        yield api


async def assert_tables_are_the_store(admin: LeaseApi) -> None:
    """Templates, each resource's status and leases, as memory answers them, are what a
    fresh load of the store answers."""
    app = admin.coordinator.app
    in_memory: LeaseService = app[LEASES]
    await in_memory.idle()
    from_store = await LeaseService.load(app[STORE], [])
    assert in_memory.templates == from_store.templates
    for resource in RESOURCES:
        assert in_memory.leases(resource) == from_store.leases(resource), resource
        status, stored = in_memory.status(resource), from_store.status(resource)
        if status is None or stored is None:
            assert status is stored, resource
            continue
        # The running sums are kept with += and -=: equal up to rounding (table.py).
        assert status.sum_has == pytest.approx(stored.sum_has, abs=1e-6), resource
        assert status.sum_wants == pytest.approx(stored.sum_wants, abs=1e-6), resource
        sums = {"sum_has": 0.0, "sum_wants": 0.0}
        assert msgspec.structs.replace(status, **sums) == msgspec.structs.replace(stored, **sums)


async def put_template(admin: LeaseApi, glob: str, kind: Kind, capacity: float) -> int:
    body = msgspec.to_builtins(template(glob, kind, capacity))
    status, _ = await admin.coordinator.call("PUT", f"/v1/resources/{glob}", body)
    return status


def counting_lease_commits(admin: LeaseApi, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of writes of each lease commit from now on, in a list that grows."""
    store = admin.coordinator.app[STORE]
    commit, sizes = store.commit, []

    async def counting(txn: Txn) -> TxnResult:
        if any(key.startswith("/leases/") for key in [*txn.puts, *txn.deletes]):
            sizes.append(len(txn.puts) + len(txn.deletes))
        return await commit(txn)

    monkeypatch.setattr(store, "commit", counting)
    return sizes


async def test_requests_releases_and_template_changes_at_once_leave_the_tables_as_stored(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with coordinator_on(engine, tmp_path) as admin:
        apis = [admin.with_token(NAMESPACE_TOKEN), admin.with_token(TEAM_B), admin]
        commits = counting_lease_commits(admin, monkeypatch)
        rng = random.Random(29)

        async def one_change() -> int:
            roll = rng.random()
            if roll < 0.08:  # a template: a new capacity, or a resource of its own
                glob, kind = rng.choice([("fair", Kind.FAIR_SHARE), ("extra.*", Kind.STATIC)])
                return await put_template(admin, glob, kind, rng.choice([40, 120, 300]))
            api = rng.choice(apis)
            client = f"c{rng.randrange(8)}"
            resources = rng.sample(RESOURCES, rng.randint(1, 2))
            if roll < 0.3:
                return (await api.release(client, resources)).status
            body = {
                "client_id": client,
                "resources": [
                    {"resource_id": r, "wants": rng.uniform(0, 90), "priority": rng.randint(0, 1)}
                    for r in resources
                ],
            }
            status = (await api.post("/v1/capacity", body)).status
            # "extra.1" has no template until a PUT made one.
            return 200 if status == 400 and "extra.1" in resources else status

        statuses = await asyncio.gather(*(one_change() for _ in range(400)))

        assert set(statuses) == {200}, statuses
        await assert_tables_are_the_store(admin)
        leased = {r: admin.coordinator.app[LEASES].leases(r) for r in RESOURCES}
        assert {lease.namespace for r in RESOURCES for lease in leased[r]} == {
            "",
            "team-a",
            "team-b",
        }
        assert len(commits) < 200, f"{len(commits)} lease commits for 400 changes sent at once"
        assert max(commits) > 1


async def test_a_failed_commit_changes_nothing_in_memory(
    admin: LeaseApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await admin.grant("kept", "fair", 50) == 50
    store = admin.coordinator.app[STORE]
    commit = store.commit

    async def failing(txn: Txn) -> TxnResult:
        if any(key.startswith("/leases/") for key in [*txn.puts, *txn.deletes]):
            raise StoreError("disk full")
        return await commit(txn)

    monkeypatch.setattr(store, "commit", failing)
    answers = await asyncio.gather(
        *(admin.ask_response(f"c{i}", "fair", 30) for i in range(10)),
        admin.release("kept", ["fair"]),
    )
    template_status = await put_template(admin, "fair", Kind.FAIR_SHARE, 10)

    assert {answer.status for answer in answers} == {503}
    assert template_status == 503
    assert [lease["client_id"] for lease in await admin.leases("fair")] == ["kept"]
    assert (await admin.status("fair"))["capacity"] == 120
    monkeypatch.setattr(store, "commit", commit)  # a fresh load commits its templates
    await assert_tables_are_the_store(admin)
    assert await admin.grant("c0", "fair", 30) == 30
    await assert_tables_are_the_store(admin)


async def test_no_read_sees_a_grant_whose_commit_is_in_flight(
    admin: LeaseApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = admin.coordinator.app[STORE]
    commit = store.commit
    entered, go_on = asyncio.Event(), asyncio.Event()

    async def held(txn: Txn) -> TxnResult:
        entered.set()
        await go_on.wait()
        return await commit(txn)

    monkeypatch.setattr(store, "commit", held)
    granting = asyncio.ensure_future(admin.grant("web-7", "fair", 40))
    await entered.wait()

    assert await admin.leases("fair") == []
    assert (await admin.status("fair"))["sum_has"] == 0
    go_on.set()
    assert await granting == 40
    assert [lease["has"] for lease in await admin.leases("fair")] == [40]
