"""A container that never starts holds back no other's release, on the real engine with a
real coordinator and agent: beside a container whose command is missing (its every start
fails, so the agent's passes never count as applied), a deleted container's cores are let
go once the agent's report shows it removed, and a deployment waiting for them is placed.
"""

from __future__ import annotations

import time
import urllib.error
from pathlib import Path
from typing import Any

import docker
import pytest

from agent.runtime.labels import DEPLOYMENT, node_filter
from agent.runtime.state_file import read_state
from tests.docker.clusters import running_cluster
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import cpus
from tests.e2e.processes import api

pytestmark = pytest.mark.docker

NAMESPACE = "stuck"
PATH = f"/v1/namespaces/{NAMESPACE}/deployments"
PLACED_WITHIN_SECONDS = 30.0  # generous: two shared cores; it takes a second or two


def bound(name: str, command: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "command": command,
        "count": 1,
        "cpu_bind": True,
        "resources": {"cpu": "1", "memory": "16Mi"},
        "stop_timeout_seconds": 1,
    }


def deploy_once_room(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """Deploy, again while the coordinator answers 409 (room still held)."""
    deadline = time.monotonic() + PLACED_WITHIN_SECONDS
    while True:
        try:
            placed: dict[str, Any] = api(url, PATH, body)
            return placed
        except urllib.error.HTTPError as error:
            if error.code != 409 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def test_a_deleted_container_is_let_go_beside_one_that_never_starts(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    if len(cpus()) < 2:
        pytest.fail("this test needs 2 CPUs: one per bound container", pytrace=False)
    with running_cluster(tmp_path, docker_client, nodes=1, cpus_each=2) as cluster:
        url, node = cluster.url, cluster.nodes[0]
        api(url, PATH, bound("broken", ["/no/such/binary"]))
        api(url, PATH, bound("leaving", ["sleep", "3600"]))
        state = tmp_path / f"agent-{node}.json"
        while not any(
            c["State"] == "running" and c["Labels"].get(DEPLOYMENT) == "leaving"
            for c in docker_client.api.containers(filters=node_filter(node))
        ):
            time.sleep(0.1)

        deleted = api(url, f"{PATH}/leaving", method="DELETE")
        assert deleted["hosts_acknowledged"] is True
        placed = deploy_once_room(url, bound("waiting", ["sleep", "3600"]))

        assert [view["record"]["node"] for view in placed["containers"]] == [node]
        agent = read_state(state)
        # The broken container keeps the node's passes from counting as applied.
        assert agent.desired_revision is not None
        assert agent.applied_revision < agent.desired_revision
        broken = [s for s in agent.containers if s.deployment == "broken"]
        assert [s.state for s in broken] in (["created"], ["failed"]), broken
        events = api(url, f"/v1/events?namespace={NAMESPACE}&kind=stopped")["events"]
        assert [event["deployment"] for event in events] == ["leaving"]
