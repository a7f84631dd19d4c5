"""Issue 17 on the real engine: a drain with nowhere to go stops the containers and
leaves pending stand-ins (``allotctl drain`` exits 3); the drained ones are stopping until
the real agent reports them removed (issue 26); once the node is uncordoned the scheduler
places the stand-ins and Docker runs them, under their own ids."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from tests.docker.clusters import Cluster, running_cluster
from tests.docker.conftest import IMAGE
from tests.docker.test_ctl_deployments import CONVERGE_SECONDS, containers_json, ctl
from tests.e2e.processes import allotctl

pytestmark = pytest.mark.docker


@pytest.fixture
def cluster(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Cluster]:
    with running_cluster(tmp_path, docker_client, nodes=1) as running:
        yield running


def running_ids(client: docker.DockerClient) -> set[str]:
    found = client.api.containers(filters={"label": ["allot.id"], "status": "running"})
    return {c["Labels"]["allot.id"] for c in found}


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + CONVERGE_SECONDS
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_drained_to_pending_then_uncordoned_the_stand_ins_run(
    cluster: Cluster, docker_client: docker.DockerClient
) -> None:
    url, (node,) = cluster.url, cluster.nodes
    ctl(
        url, "deploy", "team-a", "--name", "web", "--image", IMAGE, "--cpu", "0.1",
        "--memory", "16Mi", "--count", "2", "--", "sleep", "3600",
    )  # fmt: skip
    placed = {view["record"]["id"] for view in containers_json(url)}
    eventually(lambda: placed <= running_ids(docker_client), f"{placed} never ran")

    drained = allotctl(url, "drain", node)
    head, *moves = drained.stdout.splitlines()
    assert (drained.returncode, head) == (3, f"{node} drained: moved 0, pending 2"), drained
    stand_ins = {move.split()[2] for move in moves}
    states = {view["record"]["id"]: view["state"] for view in containers_json(url)}
    assert states == dict.fromkeys(placed, "stopping") | dict.fromkeys(stand_ins, "pending")
    eventually(lambda: not placed & running_ids(docker_client), f"{placed} still run")
    # The real agent's report lets them go: their cores are free for the stand-ins.
    eventually(
        lambda: {view["record"]["id"] for view in containers_json(url)} == stand_ins,
        "the drained containers were never let go",
    )

    ctl(url, "uncordon", node)
    eventually(lambda: stand_ins <= running_ids(docker_client), f"{stand_ins} never ran")
    views = containers_json(url)
    assert {view["record"]["id"] for view in views} == stand_ins
    assert {(view["record"]["node"], view["state"]) for view in views} == {(node, "running")}
