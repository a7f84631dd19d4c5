"""Defence in depth: a node record an older version stored, which today's rules refuse,
is loaded as it is, but no request about the whole cluster fails because of it. Placement
leaves it out and says so (``skipped_nodes``), and the node's own endpoints answer 409
with the reason, until its agent says hello again with an inventory that passes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from coordinator.services.registry import NODE_PREFIX
from coordinator.store import Txn
from coordinator.store.sqlite import SqliteStore
from shared.codec import to_builtins
from tests.builders import make_inventory, old_node_record
from tests.coordinator.conftest import (
    NAMESPACE,
    Coordinator,
    config_for,
    hello,
    inventory,
    receive_frame,
    register,
    start,
)

DEPLOYMENTS = f"/v1/namespaces/{NAMESPACE}/deployments"
PLAN = {"request": {"cpu": "0.5", "memory": "64Mi"}, "count": 1}
NEGATIVE = "inventory.memory = -5: Expected `int` >= 1"
NO_NUMA_NODE = "inventory.cpus[1].numa = 7: names no NUMA node of numa_nodes (0) (and 1 more)"


def deployment(name: str, count: int = 1) -> dict[str, Any]:
    resources = {"cpu": "0.5", "memory": "64Mi"}
    return {"name": name, "image": "busybox", "count": count, "resources": resources}


@pytest.fixture
async def with_old_records(
    tmp_path: Path, allot_logs: pytest.LogCaptureFixture
) -> AsyncIterator[Coordinator]:
    """A coordinator started on a store holding two records today's rules refuse."""
    config = config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0)
    store = await SqliteStore.open(config.store_path)
    cpus = to_builtins(make_inventory().cpus)
    cpus[1]["numa"] = 7
    puts = {
        NODE_PREFIX + "old-negative": old_node_record("old-negative", memory=-5),
        NODE_PREFIX + "old-no-numa": old_node_record("old-no-numa", cpus=cpus),
    }
    await store.commit(Txn(puts=puts))
    await store.close()
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        yield Coordinator(url=url, app=runner.app, http=http)
    await runner.cleanup()


async def test_the_coordinator_starts_and_says_which_records_break_the_rules(
    with_old_records: Coordinator, allot_logs: pytest.LogCaptureFixture
) -> None:
    nodes = (await with_old_records.get_json("/v1/nodes"))["nodes"]
    assert [(n["name"], n["state"]) for n in nodes] == [
        ("old-negative", "ready"),
        ("old-no-numa", "ready"),
    ]
    warned = {
        r.__dict__["allot_fields"]["node"]: r.__dict__["allot_fields"]["reason"]
        for r in allot_logs.get_records("setup")
        if r.levelno == logging.WARNING and "today's rules" in r.message
    }
    assert warned == {"old-negative": NEGATIVE, "old-no-numa": NO_NUMA_NODE}
    await with_old_records.assert_nodes_match_store()


async def test_placement_skips_them_and_names_them_in_every_answer(
    with_old_records: Coordinator,
) -> None:
    cluster = with_old_records
    ws = await register(cluster, "node-a")
    skipped = {"old-negative": NEGATIVE, "old-no-numa": NO_NUMA_NODE}
    placed, planned, too_many, too_big = await asyncio.gather(
        cluster.call("POST", DEPLOYMENTS, deployment("web")),
        cluster.call("POST", "/v1/plans", PLAN),
        cluster.call("POST", DEPLOYMENTS, deployment("huge", count=40)),
        cluster.call("POST", "/v1/plans", PLAN | {"count": 40}),
    )
    assert placed[0] == 201, placed
    assert [view["record"]["node"] for view in placed[1]["containers"]] == ["node-a"]
    assert placed[1]["skipped_nodes"] == skipped
    assert planned[0] == 200, planned
    assert [node["name"] for node in planned[1]["nodes"]] == ["node-a"]
    assert planned[1]["skipped_nodes"] == skipped
    for status, body in (too_many, too_big):
        assert status == 409, body
        assert body["error"]["details"]["skipped_nodes"] == skipped
    status, scaled = await cluster.call("POST", f"{DEPLOYMENTS}/web/scale", {"count": 2})
    assert (status, scaled["skipped_nodes"]) == (200, skipped)
    quotas = await cluster.call("GET", "/v1/quotas")
    assert quotas[0] == 200, quotas
    assert quotas[1]["capacity"]["memory"] == make_inventory().memory  # node-a's alone
    await cluster.assert_nodes_match_store()
    await ws.close()


@pytest.mark.parametrize("node", ["old-negative", "old-no-numa"])
async def test_their_own_endpoints_answer_409_with_the_reason(
    with_old_records: Coordinator, node: str
) -> None:
    base = f"/v1/nodes/{node}"
    answers = await asyncio.gather(
        with_old_records.call("GET", f"{base}/allocation"),
        with_old_records.call("POST", f"{base}/cordon"),
        with_old_records.call("POST", f"{base}/uncordon"),
        with_old_records.call("POST", f"{base}/drain"),
        with_old_records.call("PATCH", f"{base}/capacity", {"mode": "delta", "memory": "1Gi"}),
    )
    for status, body in answers:
        assert status == 409, body
        assert body["error"]["code"] == "unusable_node"
        assert body["error"]["details"]["node"] == node
        assert body["error"]["details"]["reason"] in (NEGATIVE, NO_NUMA_NODE)
        assert body["error"]["message"].startswith(f"node {node} cannot be used")
    await with_old_records.assert_nodes_match_store()


async def test_a_good_hello_makes_the_node_usable_again(with_old_records: Coordinator) -> None:
    cluster = with_old_records
    ws = await cluster.connect()
    await ws.send_bytes(hello("old-negative", inventory=inventory()))
    assert (await receive_frame(ws))["type"] == "welcome"
    status, placed = await cluster.call("POST", DEPLOYMENTS, deployment("web"))
    assert status == 201, placed
    assert [view["record"]["node"] for view in placed["containers"]] == ["old-negative"]
    assert placed["skipped_nodes"] == {"old-no-numa": NO_NUMA_NODE}
    assert (await cluster.call("GET", "/v1/nodes/old-negative/allocation"))[0] == 200
    await cluster.assert_nodes_match_store()
    await ws.close()


async def test_a_node_holding_containers_keeps_them_and_takes_its_agent_back(
    tmp_path: Path,
) -> None:
    """The record went bad after containers were placed there: they stay, nothing more
    is placed there, its admin levers work on the stored allocation, and the agent's next
    hello is taken (the capacity kept, as the old inventory says nothing usable)."""
    config = config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0)
    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        first = Coordinator(url=url, app=runner.app, http=http)
        ws = await register(first, "old-negative")
        assert (await first.call("POST", DEPLOYMENTS, deployment("web")))[0] == 201
        await ws.close()
    await runner.cleanup()
    store = await SqliteStore.open(config.store_path)
    bad = old_node_record("old-negative", memory=-5)
    await store.commit(Txn(puts={NODE_PREFIX + "old-negative": bad}))
    await store.close()

    runner, url = await start(config)
    async with aiohttp.ClientSession() as http:
        cluster = Coordinator(url=url, app=runner.app, http=http)
        allocation, refused = await asyncio.gather(
            cluster.call("GET", "/v1/nodes/old-negative/allocation"),
            cluster.call("POST", DEPLOYMENTS, deployment("more")),
        )
        assert allocation[0] == 200, allocation
        assert len(allocation[1]["containers"]) == 1
        assert refused[0] == 409, refused
        assert refused[1]["error"]["details"]["skipped_nodes"] == {"old-negative": NEGATIVE}
        ws = await cluster.connect()
        await ws.send_bytes(hello("old-negative", inventory=inventory()))
        assert (await receive_frame(ws))["type"] == "welcome"
        kept = (await cluster.get_json("/v1/events?kind=node&node=old-negative"))["events"]
        assert [e["reason"] for e in kept][-1].startswith(
            "the hardware changed but the capacity was kept: node old-negative: memory = -5"
        )
        assert (await cluster.call("POST", DEPLOYMENTS, deployment("more")))[0] == 201
        await cluster.assert_nodes_match_store()
        await ws.close()
    await runner.cleanup()
