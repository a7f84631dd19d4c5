"""The lease API in a process of its own (``lease_address``), a real spawned process: it
answers on its port and through the main port alike, takes over the main store's leases
and gives them back, and shows in the main process's metrics; on etcd it commits fenced
by the leader's key beside the leader's own commits, and stops once deposed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.etcd_cluster import EtcdCluster
from coordinator.app import make_app
from coordinator.config import CoordinatorConfig
from coordinator.election import LEADER_KEY, Election
from coordinator.lease_worker import LeaseDoor, LeaseWorker, lease_process
from coordinator.leases import Kind
from coordinator.services.lease_records import LEASES_PREFIX
from coordinator.store import Txn
from coordinator.store.etcd import EtcdStore
from coordinator.store.fenced import MARKERS, FencedStore
from coordinator.store.replica import Replica
from coordinator.store.sqlite import SqliteStore
from tests.coordinator.conftest import Coordinator, config_for
from tests.coordinator.lease_http import LeaseApi, template
from tests.coordinator.store_engines import etcd_settings

TEMPLATES = [template("fair", Kind.FAIR_SHARE), template("static", Kind.STATIC)]


@contextlib.asynccontextmanager
async def main_process(
    config: CoordinatorConfig, leases: LeaseDoor | None
) -> AsyncIterator[tuple[LeaseApi, aiohttp.ClientSession]]:
    """The main application on loopback (the lease API forwarded if ``leases``)."""
    runner = web.AppRunner(make_app(config, leases=leases), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        async with aiohttp.ClientSession() as http:
            coordinator = Coordinator(url=f"http://{host}:{port}", app=runner.app, http=http)
            yield LeaseApi(coordinator), http
    finally:
        await runner.cleanup()


def on_lease_port(api: LeaseApi, door: LeaseDoor) -> LeaseApi:
    """The same token's lease API, on the lease process's own port."""
    there = Coordinator(url=door.url, app=api.coordinator.app, http=api.coordinator.http)
    return LeaseApi(there, api.token)


async def stored_leases(path: Path) -> list[str]:
    store = await SqliteStore.open(path)
    try:
        return [entry.key for entry in await store.range("/leases/held/")]
    finally:
        await store.close()


async def scraped(api: LeaseApi, line: str) -> str:
    """The main port's /metrics once it holds ``line`` (the lease figures are read from
    the lease process every two seconds)."""
    deadline = time.monotonic() + 10
    while True:
        text = await (await api.coordinator.get("/metrics", token=None)).text()
        if line in text or time.monotonic() > deadline:
            return text
        await asyncio.sleep(0.2)


async def test_both_ports_answer_alike_and_the_leases_move_with_the_setting(
    tmp_path: Path,
) -> None:
    alone = config_for(tmp_path, resources=TEMPLATES)
    async with main_process(alone, None) as (api, _):
        assert await api.grant("before", "static", 7) == 7
    config = config_for(tmp_path, resources=TEMPLATES, lease_address="127.0.0.1:0")

    async with lease_process(config, won_at=None) as door:
        assert door is not None
        async with main_process(config, door) as (main, _):
            own = on_lease_port(main, door)
            pairs = [("main", main), ("own", own)]
            assert await own.leases("static") == await main.leases("static")
            assert [lease["client_id"] for lease in await own.leases("static")] == ["before"]
            granted = await asyncio.gather(
                *(api.grant(f"{n}{i}", "fair", 3) for i in range(20) for n, api in pairs)
            )
            assert granted == [3.0] * 40
            assert await own.lease_view("fair") == await main.lease_view("fair")
            assert len(await main.leases("fair")) == 40
            bad: dict[str, Any] = {"client_id": "x", "resources": [{"resource_id": "nope"}]}
            answers = [await api.post("/v1/capacity", bad) for api in (main, own)]
            assert [a.status for a in answers] == [400, 400]
            assert len({await a.text() for a in answers}) == 1
            metrics = await scraped(main, 'allot_lease_clients{resource="fair"} 40.0')
            assert 'allot_lease_clients{resource="fair"} 40.0' in metrics
            assert metrics.count("# TYPE allot_lease_requests_total counter") == 1
    assert len(await stored_leases(config.lease_store_path)) == 41
    assert await stored_leases(config.store_path) == []

    async with lease_process(alone, won_at=None) as door:  # the setting unset again
        assert door is None
        assert await stored_leases(config.store_path) != []
        async with main_process(alone, None) as (api, _):
            assert len(await api.leases("fair")) == 40
    assert await stored_leases(config.lease_store_path) == []


async def test_on_etcd_it_commits_fenced_beside_the_leader_and_stops_once_deposed(
    etcd_cluster: EtcdCluster, tmp_path: Path
) -> None:
    settings = etcd_settings(etcd_cluster)
    config = config_for(
        tmp_path,
        resources=TEMPLATES,
        lease_address="127.0.0.1:0",
        store="etcd",
        etcd_endpoints=list(settings.endpoints),
        etcd_prefix=settings.prefix,
    )
    leader_store, other_store = await EtcdStore.open(settings), await EtcdStore.open(settings)
    replica = await Replica.follow(leader_store)
    try:
        # Not renewed here: a TTL that outlasts the test until the lease is revoked.
        won = await Election(leader_store, replica, url="http://leader", ttl=60).campaign()
        fenced = FencedStore(
            replica, LEADER_KEY, won.won_at, witness=leader_store, on_deposed=lambda _: None
        )
        worker = await LeaseWorker.start(config, won_at=won.won_at)
        try:
            async with aiohttp.ClientSession() as http:
                api = LeaseApi(Coordinator(url=worker.door.url, app=web.Application(), http=http))
                leader_writes = [fenced.commit(Txn(puts={f"/q/{i}": b"x"})) for i in range(10)]
                grants = [api.grant(f"c{i}", "fair", 5) for i in range(10)]
                written, granted = await asyncio.gather(
                    asyncio.gather(*leader_writes), asyncio.gather(*grants)
                )
                assert granted == [5.0] * 10
                assert all(result.succeeded for result in written)
                held = await other_store.range(LEASES_PREFIX + "held/")
                assert len(held) == 10
                markers = [entry.key for entry in await other_store.range(MARKERS)]
                assert any("-leases-" in key for key in markers), markers
                assert any("-leases-" not in key for key in markers), markers

                await leader_store.revoke_lease(won.lease)  # deposed: another may lead
                await Election(other_store, replica, url="http://other", ttl=2).campaign()
                refused = await api.ask_response("late", "fair", 5)
                assert refused.status == 503
            assert await worker.exited(within=10)
        finally:
            await worker.stop()
        assert len(await other_store.range(LEASES_PREFIX + "held/")) == 10
    finally:
        await leader_store.close()
        await other_store.close()
