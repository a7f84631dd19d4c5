"""The coordinator's /metrics (issue 27) over real HTTP on SQLite: every family with the
values real operations through the service leave (a deployment's running containers
and their usage, a drain's pending stand-ins, a quota's used CPU, a pool's fair share,
the decision, store and HTTP histograms), the exposition parsed by prometheus_client's
own parser; and scrapes at once with writes, memory checked against the store after."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.config import CoordinatorConfig, PoolSettings
from coordinator.leases import Kind
from shared.config import ConfigError, load
from tests.coordinator.conftest import (
    API_TOKEN,
    JOIN_TOKEN,
    NAMESPACE,
    Coordinator,
    config_for,
    frame,
    register,
    start,
)
from tests.coordinator.lease_http import template
from tests.coordinator.metrics_text import Scraped, scrape
from tests.coordinator.test_deployment_api import DEPLOYMENTS, call, next_desired, spec
from tests.coordinator.test_pending import assert_memory_is_the_store

MiB = 2**20
WEB = {"namespace": NAMESPACE, "deployment": "web"}


async def watched(tmp_path: Path, **settings: Any) -> AsyncIterator[Coordinator]:
    config = config_for(
        tmp_path,
        lease_seconds=60.0,
        heartbeat_seconds=20.0,
        pools=PoolSettings(fair_share_update_period=0.05),
        resources=[template("fair", Kind.FAIR_SHARE)],
        **settings,
    )
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[Coordinator]:
    async for running in watched(tmp_path):
        yield running


@pytest.fixture
async def per_deployment(tmp_path: Path) -> AsyncIterator[Coordinator]:
    async for running in watched(tmp_path, metrics_container_series="deployment"):
        yield running


async def running_web(
    coordinator: Coordinator,
) -> tuple[aiohttp.ClientWebSocketResponse, list[str]]:
    """node-a with the deployment web (two bound containers of 0.5 CPU and 64Mi), which
    its agent reports running, each using 0.25 cores and 10 MB."""
    ws = await register(coordinator, "node-a")
    status, placed = await call(coordinator, "POST", DEPLOYMENTS, spec())
    assert status == 201, placed
    desired = await next_desired(ws)
    ids = sorted(container["id"] for container in desired["containers"])
    running = [
        {"id": cid, "state": "running", "cpu_usage": 0.25, "memory_usage": 10_000_000}
        for cid in ids
    ]
    await ws.send_bytes(frame("status", applied_revision=desired["revision"], containers=running))
    await until(coordinator, lambda seen: _web(seen, "running") == 2)
    return ws, ids


def _web(seen: Scraped, state: str) -> float:
    return seen.value("allot_deployment_containers", **WEB, state=state)


async def until(
    coordinator: Coordinator, holds: Callable[[Scraped], bool], seconds: float = 10.0
) -> Scraped:
    """Scrape until ``holds(scraped)``; the last scrape. Not a bound on time: a poll."""
    return await scraped_until(coordinator.http, coordinator.url, holds, seconds)


async def scraped_until(
    http: aiohttp.ClientSession, url: str, holds: Callable[[Scraped], bool], seconds: float = 10.0
) -> Scraped:
    """``until`` for any coordinator's URL (a standby's)."""
    for _ in range(int(seconds / 0.05)):
        seen = await scrape(http, url)
        try:
            if holds(seen):
                return seen
        except KeyError:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"never held; last scrape had {sorted(seen.families)}")


async def test_every_object_family_shows_what_the_service_did(coordinator: Coordinator) -> None:
    quota = {"namespace": NAMESPACE, "min": {"cpu": "500m"}, "max": {"cpu": 2}}
    assert (await call(coordinator, "PUT", f"/v1/elasticquotas/{NAMESPACE}", quota))[0] == 200
    assert (await call(coordinator, "PUT", f"/v1/pools/{NAMESPACE}", {"weight": 1.0}))[0] == 200
    _, ids = await running_web(coordinator)
    # The pools' figures come from their last update (every fair_share_update_period):
    # one that ran between the deploy and the agent's report counted the containers'
    # requests as their usage (seen in a make test).
    pool = {"pool": NAMESPACE, "resource": "cpu"}
    seen = await until(
        coordinator,
        lambda s: (
            (s.value("allot_pool_demand", **pool), s.value("allot_pool_usage", **pool))
            == (1.0, 0.5)
        ),
    )

    assert seen.value("allot_coordinator_leader") == 1
    assert list(seen.with_name("allot_build_info").values()) == [1.0]
    assert {"process_cpu_seconds", "process_resident_memory_bytes"} <= seen.families
    assert "python_gc_collections" in seen.families
    assert seen.value("allot_nodes", state="ready") == 1

    node = {"node": "node-a"}
    assert seen.value("allot_node_cpu_cores", **node, kind="offered") == 2
    assert seen.value("allot_node_cpu_cores", **node, kind="bound") == 1  # 2 x 0.5, pinned
    assert seen.value("allot_node_cpu_cores", **node, kind="shared_requested") == 0
    assert seen.value("allot_node_memory_bytes", **node, kind="offered") == 2**30
    assert seen.value("allot_node_memory_bytes", **node, kind="requested") == 128 * MiB
    assert seen.value("allot_node_gpus", **node, kind="offered") == 0
    assert seen.value("allot_node_cordoned", **node) == 0

    assert seen.value("allot_deployment_desired", **WEB) == 2
    assert [_web(seen, s) for s in ("placed", "pending", "running", "failed")] == [2, 0, 2, 0]
    assert seen.value("allot_scheduler_pending_containers") == 0
    for cid in ids:
        labels = WEB | {"container": cid, "node": "node-a"}
        assert seen.value("allot_container_cpu_usage_cores", **labels) == 0.25
        assert seen.value("allot_container_memory_usage_bytes", **labels) == 10_000_000

    team = {"quota": NAMESPACE, "resource": "cpu"}
    assert seen.value("allot_quota_min", **team) == 0.5
    assert seen.value("allot_quota_max", **team) == 2
    assert seen.value("allot_quota_used", **team) == 1
    assert seen.value("allot_quota_borrowed", **team) == 0.5
    assert seen.value("allot_quota_used", quota=NAMESPACE, resource="memory") == 128 * MiB

    assert seen.value("allot_pool_fair_share", **pool) > 0
    assert seen.value("allot_pool_guarantee", **pool) == 0
    assert seen.value("allot_pool_usage", **pool) == 0.5  # as the agent reported it

    for kind in ("decide", "commit", "publish"):
        assert seen.value("allot_decision_seconds_count", kind=kind) >= 1
    assert seen.value("allot_store_commit_seconds_count") >= 1
    assert seen.value("allot_store_commit_operations_sum") >= seen.value(
        "allot_store_commit_operations_count"
    )
    route = {"route": "/v1/namespaces/{namespace}/deployments", "method": "POST", "code": "201"}
    assert seen.value("allot_http_request_duration_seconds_count", **route) == 1


async def test_a_drain_shows_pending_stand_ins_and_a_scheduler_pass(
    coordinator: Coordinator,
) -> None:
    await running_web(coordinator)
    status, drained = await call(coordinator, "POST", "/v1/nodes/node-a/drain")
    assert status == 200, drained
    seen = await until(coordinator, lambda s: s.value("allot_scheduler_pass_seconds_count") >= 1)
    assert [_web(seen, s) for s in ("placed", "pending", "running", "failed")] == [0, 2, 0, 0]
    assert seen.value("allot_scheduler_pending_containers") == 2
    assert seen.value("allot_node_cordoned", node="node-a") == 1
    assert seen.with_name("allot_container_cpu_usage_cores") == {}  # nothing runs


async def test_usage_summed_per_deployment_when_set(per_deployment: Coordinator) -> None:
    await running_web(per_deployment)
    seen = await scrape(per_deployment.http, per_deployment.url)
    assert seen.with_name("allot_container_cpu_usage_cores") == {frozenset(WEB.items()): 0.5}
    assert seen.with_name("allot_container_memory_usage_bytes") == {
        frozenset(WEB.items()): 20_000_000
    }


async def test_lease_requests_are_counted_by_outcome_and_routes_by_template(
    coordinator: Coordinator,
) -> None:
    def ask(resource: str, wants: float) -> dict[str, Any]:
        return {"client_id": "c1", "resources": [{"resource_id": resource, "wants": wants}]}

    assert (await call(coordinator, "POST", "/v1/capacity", ask("fair", 1)))[0] == 200
    status, refused = await call(coordinator, "POST", "/v1/capacity", ask("no-such-thing", 1))
    assert status == 400, refused
    assert (await coordinator.get("/v1/nowhere/at/all")).status == 404
    seen = await scrape(coordinator.http, coordinator.url)
    assert seen.value("allot_lease_requests_total", resource="fair", outcome="granted") == 1
    code = refused["error"]["code"]
    assert seen.value("allot_lease_requests_total", resource="unknown", outcome=code) == 1
    assert seen.value("allot_lease_capacity", resource="fair") > 0
    assert seen.value("allot_lease_clients", resource="fair") == 1
    unmatched = {"route": "unmatched", "method": "GET", "code": "404"}
    assert seen.value("allot_http_request_duration_seconds_count", **unmatched) == 1
    capacity = {"route": "/v1/capacity", "method": "POST", "code": "400"}
    assert seen.value("allot_http_request_duration_seconds_count", **capacity) == 1


async def test_scrapes_at_once_with_writes_agree_with_the_store(
    coordinator: Coordinator,
) -> None:
    ws = await register(coordinator, "node-a")
    small = {"resources": {"cpu": "0.1", "memory": "8Mi"}, "cpu_bind": False, "count": 1}
    writes = [call(coordinator, "POST", DEPLOYMENTS, spec(f"app-{i}", **small)) for i in range(12)]
    scrapes = [scrape(coordinator.http, coordinator.url) for _ in range(12)]
    done = await asyncio.gather(*writes, *scrapes)
    assert all(status == 201 for status, _ in done[:12]), done[:12]
    for seen in done[12:]:  # each a whole exposition, whatever moment it was taken at
        assert isinstance(seen, Scraped)
        assert seen.value("allot_nodes", state="ready") == 1
    await assert_memory_is_the_store(coordinator)
    final = await scrape(coordinator.http, coordinator.url)
    stored = await coordinator.stored("/containers/")
    for i in range(12):
        labels = {"namespace": NAMESPACE, "deployment": f"app-{i}"}
        in_store = sum(1 for c in stored.values() if c["deployment"] == f"app-{i}")
        assert final.value("allot_deployment_containers", **labels, state="placed") == in_store
        assert final.value("allot_deployment_desired", **labels) == 1
    await ws.close()


def test_the_usage_setting_takes_container_or_deployment_and_refuses_else() -> None:
    environ = {
        "ALLOT_COORDINATOR_JOIN_TOKEN": JOIN_TOKEN,
        "ALLOT_COORDINATOR_API_TOKENS": API_TOKEN,
    }
    loaded = load(CoordinatorConfig, environ=environ, env_prefix="ALLOT_COORDINATOR_")
    assert loaded.metrics_container_series == "container"
    per = environ | {"ALLOT_COORDINATOR_METRICS_CONTAINER_SERIES": "deployment"}
    loaded = load(CoordinatorConfig, environ=per, env_prefix="ALLOT_COORDINATOR_")
    assert loaded.metrics_container_series == "deployment"
    wrong = environ | {"ALLOT_COORDINATOR_METRICS_CONTAINER_SERIES": "pod"}
    with pytest.raises(ConfigError, match="Invalid enum value 'pod'") as refused:
        load(CoordinatorConfig, environ=wrong, env_prefix="ALLOT_COORDINATOR_")
    assert "ALLOT_COORDINATOR_METRICS_CONTAINER_SERIES" in str(refused.value)
