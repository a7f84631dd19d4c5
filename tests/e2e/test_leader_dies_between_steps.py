"""A leader that dies between the steps of a drain too large for one etcd transaction:
a real coordinator process, elected next, finishes the drain before it serves."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.etcd_cluster import EtcdCluster, free_ports
from coordinator.store.etcd import EtcdStore
from coordinator.store.steps import JOURNALS
from tests.conftest import SMALL_TXN_OPS
from tests.coordinator.store_engines import etcd_settings
from tests.coordinator.test_big_decisions import CONTAINERS, filled_node_a, serving_on
from tests.coordinator.test_commit_steps import Held, elected
from tests.coordinator.test_deployment_api import call
from tests.e2e.conftest import etcd_flags
from tests.e2e.processes import Service, api

pytestmark = pytest.mark.e2e


async def test_the_next_leader_process_finishes_a_drain_its_predecessor_left_half_made(
    tmp_path: Path, services: list[Service], small_txn_etcd_cluster: EtcdCluster
) -> None:
    settings = etcd_settings(small_txn_etcd_cluster)
    store = await EtcdStore.open(settings)
    held = Held(store)
    old = await elected(store, held)
    try:
        async with serving_on(tmp_path / "old", old.fenced) as first, held:
            agents = await filled_node_a(first)
            held.allowed = 2  # the journal and the first page, then it stops
            draining = asyncio.create_task(call(first, "POST", "/v1/nodes/node-a/drain"))
            await held.holding.wait()
            assert len(await store.range(JOURNALS)) == 1
            await store.revoke_lease(old.lease)  # it died

            (port,) = free_ports(1)
            flags = (*etcd_flags(settings), f"--etcd-max-txn-ops={SMALL_TXN_OPS}")
            directory = tmp_path / "next"
            directory.mkdir()
            services.append(Service.coordinator(directory, port=port, args=flags).start())
            finished = r"WARNING finished a commit an earlier leader left between steps"
            await asyncio.to_thread(services[-1].wait_for, finished)
            await asyncio.to_thread(services[-1].wait_for, r"WARNING leading ")

            url = f"http://127.0.0.1:{port}"
            listed = (await asyncio.to_thread(api, url, "/v1/containers"))["containers"]
            where = sorted((view["state"] == "stopping", view["record"]["node"]) for view in listed)
            assert where == [(False, "node-b")] * CONTAINERS + [(True, "node-a")] * CONTAINERS
            assert await store.range(JOURNALS) == []

            held.go.set()  # the old leader wakes: the fence refuses its next step
            status, answer = await draining
            assert status >= 500, answer
            assert old.deposed
            for ws in agents:
                await ws.close()
    finally:
        await store.close()
