"""Replacing a container on real processes and the real engine (placement spec 10): the
old one is stopped before the new one starts in the same allocation, and removed once the
new one has run for the settle time; a new one that does not keep running is removed and
the old one, the same Docker container, runs again with its allocation back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.docker.clusters import CONVERGE_SECONDS, deploy, running_cluster, wait_until_running
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import limits_in
from tests.e2e.processes import api

pytestmark = pytest.mark.docker


def docker_ids(client: docker.DockerClient, container_id: str) -> list[str]:
    found = client.api.containers(all=True, filters={"label": f"allot.id={container_id}"})
    return [c["Id"] for c in found]


def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + CONVERGE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_replacement_swaps_in_and_a_failing_one_gives_the_old_container_back(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    body = {
        "name": "web",
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "cpu_bind": True,
        "resources": {"cpu": "0.3", "memory": "16Mi"},
    }
    args = ("--replace-settle-seconds=1",)
    with running_cluster(tmp_path, docker_client, nodes=1, agent_args=args) as cluster:
        url = cluster.url
        (first,) = deploy(url, "team-a", body)
        wait_until_running(url, 1)
        (first_docker,) = docker_ids(docker_client, first["id"])
        held = limits_in(docker_client.api.inspect_container(first_docker))

        swap = {"image": IMAGE, "command": ["sleep", "3601"]}
        second = api(url, f"/v1/containers/{first['id']}/replace", swap)["record"]
        # The agent reports the swap done only once the old container is gone, and the
        # coordinator commits its end after that report: wait for the commit.
        until(
            lambda: api(url, f"/v1/containers/{second['id']}")["record"]["replaces"] == "",
            "the swap never ended",
        )
        assert not docker_ids(docker_client, first["id"])
        (view,) = wait_until_running(url, 1)
        assert view["record"]["id"] == second["id"]
        (second_docker,) = docker_ids(docker_client, second["id"])
        attrs = docker_client.api.inspect_container(second_docker)
        assert limits_in(attrs) == held  # the same allocation, the same limits
        assert attrs["Config"]["Cmd"] == ["sleep", "3601"]
        log = cluster.agents[0].text()
        stopped = log.index(f"container stopped id={first['id']}")
        assert stopped < log.index(f"container started id={second['id']}")

        broken = {"image": IMAGE, "command": ["sh", "-c", "exit 3"]}
        third = api(url, f"/v1/containers/{second['id']}/replace", broken)["record"]
        until(
            lambda: api(url, f"/v1/containers/{second['id']}")["record"]["replaced_by"] == "",
            "the failed swap never ended",
        )
        (view,) = wait_until_running(url, 1)
        assert view["record"]["id"] == second["id"]
        assert docker_ids(docker_client, second["id"]) == [second_docker]  # the same one
        assert not docker_ids(docker_client, third["id"])
        (refused,) = api(url, "/v1/events?kind=refused")["events"]
        assert refused["reason"].startswith(f"replace by {third['id']} failed")
        assert "replace failed" in cluster.agents[0].text()
