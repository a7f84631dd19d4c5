"""An agent attached to coordinators on etcd while etcd loses and regains its quorum (real
etcd members stopped and started, real coordinator and agent processes): the agent is back
soon after a leader answers again, and its node is never marked lost."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.etcd_cluster import EtcdCluster
from tests.coordinator.store_engines import etcd_settings
from tests.e2e.coordinator_group import TTL_SECONDS, CoordinatorGroup, readiness
from tests.e2e.processes import Service, api, wait_for_node_state

pytestmark = pytest.mark.e2e
NODE = "reconnecting-node"
# The production defaults, so the node's grace is what operators get.
LEASE_FLAGS = ("--lease-seconds=15", "--heartbeat-seconds=5")
# Long enough for the leader to stand down (its TTL) and for a growing back-off to grow.
QUORUM_LOST_SECONDS = 5 * TTL_SECONDS
BACK_WITHIN_SECONDS = 2.0  # the bound, from the leader answering


def test_an_agent_is_back_soon_after_etcd_regains_quorum_and_its_node_is_never_lost(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    group = CoordinatorGroup.start(
        tmp_path, services, etcd_settings(etcd_cluster), count=2, args=[LEASE_FLAGS] * 2
    )
    leader = group.urls[group.wait_for_leader()]
    # The agent's reconnect delay may grow to 30 s as configured: what the coordinator
    # says (the node's lease) is what bounds it.
    slow_backoff = ("--backoff-initial-seconds=0.5", "--backoff-max-seconds=30")
    agent = Service.agent(tmp_path, group.servers, NODE, args=slow_backoff).start()
    services.append(agent)
    before = wait_for_node_state(leader, NODE, "ready")
    attached = agent.wait_for(r"INFO registered with coordinator ").end()

    stopped = [i for i in range(3) if i != etcd_cluster.leader()]
    for index in stopped:
        etcd_cluster.kill(index)
    try:
        agent.wait_for(r"WARNING disconnected from coordinator ", after=attached, timeout=30)
        time.sleep(QUORUM_LOST_SECONDS)
    finally:
        seen = len(agent.text())
        quorum_back = time.monotonic()
        with ThreadPoolExecutor(1) as pool:
            restarted = pool.submit(_restart_all, etcd_cluster, stopped)
            leading = group.wait_for_leader(timeout=30)
            leader_answers = time.monotonic()
            restarted.result()
    agent.wait_for(r"INFO registered with coordinator ", after=seen, timeout=60)
    agent_back = time.monotonic()
    print(
        f"\nleader answers {leader_answers - quorum_back:.2f}s after etcd members restart;"
        f" agent back {agent_back - leader_answers:.2f}s after the leader answers"
    )

    after = api(group.urls[leading], f"/v1/nodes/{NODE}")
    assert after["state"] == "ready", after
    # Never lost, not even for a moment: a lost node's record changes state, and since.
    assert after["state_since"] == before["state_since"], after
    assert agent_back - leader_answers < BACK_WITHIN_SECONDS
    events = api(group.urls[leading], f"/v1/events?node={NODE}&kind=lost")["events"]
    assert events == []
    assert readiness(group.urls[leading])[0] == 200


def _restart_all(cluster: EtcdCluster, members: list[int]) -> None:
    for index in members:
        cluster.restart(index)
