"""A standby on etcd answers /metrics itself (issue 27): allot_coordinator_leader 0 and
the nodes and deployments it follows from the store, the same figures as the leader's,
a drain's pending stand-ins included; the families only the leader has are absent."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from aiohttp import web

from bench.etcd_cluster import EtcdCluster
from coordinator.config import CoordinatorConfig
from coordinator.doors import open_doors
from coordinator.keys import DEPLOYMENTS
from coordinator.metrics_standby import standby_metrics
from coordinator.standby import make_standby_app
from coordinator.store.etcd import EtcdStore
from coordinator.store.replica import Replica
from coordinator.warm import Warm
from tests.coordinator.conftest import JOIN_TOKEN, Coordinator, config_for, frame, start
from tests.coordinator.metrics_text import Scraped, scrape
from tests.coordinator.test_deployment_api import call
from tests.coordinator.test_metrics import WEB, running_web, scraped_until, until

LEADER_ONLY = (
    "allot_quota_",
    "allot_pool_",
    "allot_lease_",
    "allot_container_",
    "allot_decision_seconds",
    "allot_http_request_duration_seconds",
    "allot_node_cpu_pressure",  # readings reach the leader only, and are never stored
)


async def test_a_standby_reports_what_it_follows_with_leader_0(
    etcd_cluster: EtcdCluster, tmp_path: Path
) -> None:
    config = config_for(
        tmp_path,
        store="etcd",
        etcd_endpoints=list(etcd_cluster.endpoints),
        etcd_prefix=f"/test-{uuid.uuid4().hex[:12]}",
        lease_seconds=60.0,
        heartbeat_seconds=20.0,
    )
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http, standing_by(config) as standby:
        leader = Coordinator(url=url, app=runner.app, http=http)
        ws, ids = await running_web(leader)
        revision, _ = leader.app[DEPLOYMENTS].desired("node-a")
        running = [{"id": cid, "state": "running"} for cid in ids]
        pressure = {"source": "psi", "avg10": 80.0, "avg60": 50.0}
        await ws.send_bytes(
            frame("status", applied_revision=revision, containers=running, pressure=pressure)
        )
        await until(leader, lambda s: s.value("allot_node_cpu_pressured", node="node-a") == 1)
        placed = await scraped_until(http, standby, lambda s: _web(s, "placed") == 2)
        assert placed.value("allot_coordinator_leader") == 0
        assert placed.value("allot_deployment_desired", **WEB) == 2
        shown = {name for name, _ in placed.samples}
        assert not {name for name in shown if name.startswith(LEADER_ONLY)}
        assert "process_cpu_seconds" in placed.families
        ours = await scrape(http, url)
        assert ours.value("allot_coordinator_leader") == 1
        for kind in ("offered", "bound", "shared_requested"):
            labels = {"node": "node-a", "kind": kind}
            assert placed.value("allot_node_cpu_cores", **labels) == ours.value(
                "allot_node_cpu_cores", **labels
            )

        assert (await call(leader, "POST", "/v1/nodes/node-a/drain"))[0] == 200
        drained = await scraped_until(http, standby, lambda s: _web(s, "pending") == 2)
        assert _web(drained, "placed") == 0
        assert drained.value("allot_scheduler_pending_containers") == 2
        assert drained.value("allot_node_cordoned", node="node-a") == 1
        await until(leader, lambda s: _web(s, "pending") == 2)  # the leader says the same
    await runner.cleanup()


def _web(seen: Scraped, state: str) -> float:
    return seen.value("allot_deployment_containers", **WEB, state=state)


@contextlib.asynccontextmanager
async def standing_by(config: CoordinatorConfig) -> AsyncIterator[str]:
    """A standby following the store ``config`` names, served on a port of its own;
    its URL."""
    store = await EtcdStore.open(config.etcd)
    replica = await Replica.follow(store)
    warm = await Warm.build(replica, share_base=config.share_base)

    async def no_leader() -> str:
        return ""

    metrics = standby_metrics(warm, open_doors(config))
    runner = web.AppRunner(make_standby_app(JOIN_TOKEN, no_leader, metrics=metrics))
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()
        await replica.close()
