"""Drift end to end: a coordinator and one agent, real processes on the real Docker
engine. Each hand-made change the agent puts back is one ``drift`` event in the
coordinator's log, whether the same change comes again, needs the container made anew,
removes the container, or is made while the agent is down.

team-a has no configured pool, so its pool is created on demand and the container's CPU
weight is its pool's fair share, 0.2 core at 1024 per core: what the agent puts back."""

from __future__ import annotations

import time
from pathlib import Path

import docker
import pytest

from agent.runtime.plan import NO_IN_PLACE_REMOVAL, REMOVED_OUTSIDE
from tests.docker.clusters import (
    CONVERGE_SECONDS,
    deploy,
    running_cluster,
    wait_for_weight,
    wait_until_running,
)
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import MIB
from tests.e2e.processes import allotctl, api, wait_for_node_state

pytestmark = pytest.mark.docker
# A soft-memory container: a memory reservation and no memory limit.
CACHE = {
    "name": "cache",
    "image": IMAGE,
    "command": ["sleep", "3600"],
    "soft_memory": True,
    "resources": {"cpu": "0.2", "memory": "32Mi"},
}
POOL_WEIGHT = round(1024 * 0.2)  # its pool's fair share: what it asks for, 0.2 core
# Longer than the agent's restart on a loaded machine (CI: 1.5 s was not). A lost node
# offers the pools nothing, so its container's fair share would fall to the least weight,
# 2, the very value set by hand while the agent was down: the agent, back, would find the
# container as the coordinator now wants it, and no drift to report.
LEASE_SECONDS = 60.0


def test_each_correction_is_one_drift_event(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    with running_cluster(tmp_path, docker_client, nodes=1, lease_seconds=LEASE_SECONDS) as cluster:
        url, (node,), (agent,) = cluster.url, cluster.nodes, cluster.agents
        (record,) = deploy(url, "team-a", CACHE)
        wait_until_running(url, 1)
        reasons: list[str] = []
        wait_for_weight(url, record["id"], POOL_WEIGHT)
        fixed = f"cpu_shares 2 -> {POOL_WEIGHT}"

        def held() -> str:
            (found,) = docker_client.api.containers(filters={"label": [f"allot.id={record['id']}"]})
            docker_id: str = found["Id"]
            return docker_id

        def corrected(*notes: str) -> None:
            """Wait for the next drift event, which must be the one with these notes."""
            reasons.append("corrected: " + "; ".join(notes))
            deadline = time.monotonic() + CONVERGE_SECONDS
            while len(events := api(url, "/v1/events?kind=drift")["events"]) < len(reasons):
                assert time.monotonic() < deadline, f"no drift event {reasons[-1]!r}"
                time.sleep(0.1)
            assert [e["reason"] for e in events] == reasons
            assert {(e["node"], e["container"]) for e in events} == {(node, record["id"])}

        docker_client.api.update_container(held(), cpu_shares=2)
        corrected(fixed)
        docker_client.api.update_container(held(), cpu_shares=2)
        corrected(fixed)  # the same change again: another event
        docker_client.api.update_container(held(), mem_limit=64 * MIB, memswap_limit=64 * MIB)
        corrected(
            "mem_limit 64Mi -> 0", "memswap_limit 64Mi -> 0", f"recreated ({NO_IN_PLACE_REMOVAL})"
        )
        docker_client.api.remove_container(held(), force=True)
        corrected(f"recreated ({REMOVED_OUTSIDE})")
        agent.kill9()
        docker_client.api.update_container(held(), cpu_shares=2)
        agent.start()
        corrected(fixed)  # made while the agent was down
        wait_for_node_state(url, node, "ready")
        shown = allotctl(url, "events", "--kind", "drift")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.count("corrected: ") == len(reasons)
    assert len(reasons) == 5
