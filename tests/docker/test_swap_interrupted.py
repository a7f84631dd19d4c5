"""A swap (``replace``) interrupted, on real processes and the real engine: the
coordinator killed (SIGKILL) or stopped (SIGTERM) while the agent swaps, then started
again; or the deployment deleted mid-swap. Afterwards the state is consistent: the old
container or the new one, never both allocated, no allocation left without its
container, and Docker holds what the coordinator says."""

from __future__ import annotations

import urllib.error
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.docker.clusters import Cluster, deploy, running_cluster, wait_until_running
from tests.docker.conftest import IMAGE
from tests.docker.test_replace import docker_ids, until
from tests.e2e.processes import api, free_port, wait_for_node_state

pytestmark = pytest.mark.docker
WEB = {
    "name": "web",
    "image": IMAGE,
    "command": ["sleep", "3600"],
    "cpu_bind": True,
    "resources": {"cpu": "0.3", "memory": "16Mi"},
}
# Long enough that the coordinator is stopped while the agent waits to remove the old one.
SETTLE = ("--replace-settle-seconds=3",)


def allocation(url: str, node: str) -> dict[str, Any]:
    """What the node's allocation holds: its containers, CPU pieces and memory."""
    found = api(url, f"/v1/nodes/{node}/allocation")
    return {
        "containers": found["containers"],
        "used": sum(found["used"].values()),
        "memory_used": found["memory_used"],
    }


def swap_under_way(
    cluster: Cluster, *, started: bool = True
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One container deployed and running, then replaced: the old record, the new one
    (once the agent has started it, when ``started``) and the node's allocation before
    the swap."""
    (old,) = deploy(cluster.url, "team-a", WEB)
    wait_until_running(cluster.url, 1)
    before = allocation(cluster.url, cluster.nodes[0])
    swap = {"image": IMAGE, "command": ["sleep", "3601"]}
    new = api(cluster.url, f"/v1/containers/{old['id']}/replace", swap)["record"]
    if started:
        cluster.agents[0].wait_for(f"container started id={new['id']}", timeout=45)
    return old, new, before


def missing(url: str, container_id: str) -> bool:
    try:
        api(url, f"/v1/containers/{container_id}")
    except urllib.error.HTTPError as error:
        return error.code == 404
    return False


@pytest.mark.parametrize(
    ("stop", "started"),
    [("SIGKILL", False), ("SIGKILL", True), ("SIGTERM", True)],
    ids=[
        "kill-as-the-swap-is-committed",
        "kill-while-the-agent-swaps",
        "term-while-the-agent-swaps",
    ],
)
def test_a_coordinator_restarted_mid_swap_ends_it_once(
    tmp_path: Path, docker_client: docker.DockerClient, stop: str, started: bool
) -> None:
    with running_cluster(
        tmp_path, docker_client, nodes=1, port=free_port(), agent_args=SETTLE
    ) as cluster:
        url, node = cluster.url, cluster.nodes[0]
        old, new, before = swap_under_way(cluster, started=started)
        if stop == "SIGKILL":
            cluster.coordinator.kill9()
        else:
            assert cluster.coordinator.stop() == 0
        cluster.coordinator.start()
        cluster.coordinator.wait_for(r"coordinator listening")
        wait_for_node_state(url, node, "ready")

        until(
            lambda: api(url, f"/v1/containers/{new['id']}")["record"]["replaces"] == "",
            "the swap never ended after the restart",
        )
        (view,) = wait_until_running(url, 1)
        assert view["record"]["id"] == new["id"]
        assert missing(url, old["id"])
        assert allocation(url, node) == before | {"containers": [new["id"]]}
        until(lambda: not docker_ids(docker_client, old["id"]), "the old container stayed")
        assert len(docker_ids(docker_client, new["id"])) == 1
        assert "swap not ended" not in cluster.coordinator.text()


def test_a_deployment_deleted_mid_swap_leaves_nothing(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    with running_cluster(tmp_path, docker_client, nodes=1, agent_args=SETTLE) as cluster:
        url, node = cluster.url, cluster.nodes[0]
        old, new, _ = swap_under_way(cluster)
        deleted = api(url, "/v1/namespaces/team-a/deployments/web", method="DELETE")
        assert deleted["containers"] == [new["id"]]  # the old one goes with it
        shown = api(url, "/v1/containers")["containers"]
        assert [(v["record"]["id"], v["state"]) for v in shown] == [(new["id"], "stopping")]
        assert missing(url, old["id"])
        assert allocation(url, node)["containers"] == [new["id"]]  # until the agent says gone
        until(
            lambda: (
                not docker_ids(docker_client, old["id"])
                and not docker_ids(docker_client, new["id"])
            ),
            "a container of the deleted deployment stayed",
        )
        until(lambda: missing(url, new["id"]), "the agent's report never let the new one go")
        assert allocation(url, node) == {"containers": [], "used": 0, "memory_used": 0}
        # The agent's reports of the swap it was making change nothing now.
        cluster.agents[0].wait_for(r"first reconcile done|container removed", timeout=10)
        assert api(url, "/v1/containers")["containers"] == []
        assert allocation(url, node) == {"containers": [], "used": 0, "memory_used": 0}
        assert "swap not ended" not in cluster.coordinator.text()
