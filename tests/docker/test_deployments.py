"""Deployments end to end: one coordinator and two agents on this host, each agent
offering one of the host's CPUs under its own node name, all real processes on the real
Docker engine. What the API says was planned is what Docker holds and the kernel enforces."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from agent.runtime.labels import node_filter
from shared.cpuset import CpuSet
from shared.protocol import Limits
from tests.docker.cgroups import as_held, cgroup_settings
from tests.docker.clusters import (
    CONVERGE_SECONDS,
    Cluster,
    deploy,
    running_cluster,
    wait_for_weight,
    wait_until_running,
)
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import cpus, limits_in, this_host
from tests.e2e.processes import BIN, api, free_port, wait_for_node_state

pytestmark = pytest.mark.docker


@pytest.fixture
def cluster(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Cluster]:
    """A coordinator (on a fixed port, to be restarted under its agents) and two nodes,
    each offering one CPU of this host."""
    with running_cluster(tmp_path, docker_client, nodes=2, port=free_port()) as running:
        yield running


def test_bound_and_unbound_containers_hold_exactly_their_plan_on_the_host(
    cluster: Cluster, docker_client: docker.DockerClient
) -> None:
    """A bound container takes its node's one CPU whole from the shared pool (bound cores
    stay exclusive), so the unbound one goes to the other node. Their pool, team-a's, is
    created on demand with a fair share of what they ask for, 0.9 core: the bound one's
    0.7 counts first, so the unbound one's weight is 0.2 core's, 205."""
    url, nodes = cluster.url, cluster.nodes
    common = {"image": IMAGE, "command": ["sleep", "3600"]}
    deploy(
        url,
        "team-a",
        common
        | {
            "name": "bound",
            "count": 1,
            "cpu_bind": True,
            "resources": {"cpu": "0.7", "memory": "48Mi"},
        },
    )
    (batch,) = deploy(
        url,
        "team-a",
        common
        | {
            "name": "batch",
            "count": 1,
            "cpu_bind": False,
            "resources": {"cpu": "0.2", "memory": "32Mi"},
        },
    )
    wait_until_running(url, 2)
    wait_for_weight(url, batch["id"], 205)
    views = wait_until_running(url, 2)
    host = this_host()
    assert sorted(view["record"]["node"] for view in views) == sorted(nodes)
    for view in views:
        record = view["record"]
        (found,) = docker_client.api.containers(filters={"label": [f"allot.id={record['id']}"]})
        attrs = docker_client.api.inspect_container(found["Id"])
        offered = CpuSet.parse(str(cpus()[nodes.index(record["node"])]))
        planned = host.settings(Limits(**record["limits"]))
        held = host.settings(limits_in(attrs))
        assert held == planned, record["id"]
        assert cgroup_settings(attrs["State"]["Pid"]) == as_held(planned), record["id"]
        assert planned.cpuset_cpus == offered  # each node's containers stay on its CPU
        if record["deployment"] == "bound":
            assert (planned.cpu_shares, planned.cpu_quota) == (717, -1)
        else:
            assert (planned.cpu_shares, planned.cpu_quota) == (205, 20_000)
        reported = host.settings(Limits(**view["observed"]["limits"]))
        assert reported == planned, record["id"]


def test_a_realloc_changes_the_cgroups_live_without_a_restart(
    cluster: Cluster, docker_client: docker.DockerClient
) -> None:
    url = cluster.url
    body = {
        "name": "svc",
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "count": 1,
        "cpu_bind": True,
        "resources": {"cpu": "0.3", "memory": "32Mi"},
    }
    (record,) = deploy(url, "team-a", body)
    wait_until_running(url, 1)
    (found,) = docker_client.api.containers(filters={"label": [f"allot.id={record['id']}"]})
    before = docker_client.api.inspect_container(found["Id"])
    changed = api(
        url, f"/v1/containers/{record['id']}", {"cpu": "0.4", "memory": "16Mi"}, method="PATCH"
    )["record"]
    host = this_host()
    planned = host.settings(Limits(**changed["limits"]))
    assert (planned.cpu_shares, planned.mem_limit) == (717, 48 * 1024 * 1024)
    deadline = time.monotonic() + CONVERGE_SECONDS
    while cgroup_settings(before["State"]["Pid"]) != as_held(planned):
        assert time.monotonic() < deadline, cgroup_settings(before["State"]["Pid"])
        time.sleep(0.05)
    after = docker_client.api.inspect_container(found["Id"])
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    assert host.settings(limits_in(after)) == planned


# 0 s: killed before the commit; 0.01 s: just after it; 0.3 s: while agents create containers
@pytest.mark.parametrize("delay", [0.0, 0.01, 0.3])
def test_a_coordinator_killed_during_a_20_container_deployment_loses_and_doubles_nothing(
    cluster: Cluster, docker_client: docker.DockerClient, delay: float
) -> None:
    body = {
        "name": "fleet",
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "count": 20,
        "cpu_bind": False,
        "resources": {"cpu": "0.05", "memory": "8Mi"},
    }
    answer: list[object] = []
    request = threading.Thread(target=lambda: answer.append(_deploy_or_error(cluster.url, body)))
    request.start()
    time.sleep(delay)
    cluster.coordinator.kill9()
    request.join(timeout=30)
    cluster.coordinator.start()
    cluster.coordinator.wait_for(r"coordinator listening")
    for node in cluster.nodes:
        wait_for_node_state(cluster.url, node, "ready", timeout=30)
    views = api(cluster.url, "/v1/containers")["containers"]
    assert len(views) in (0, 20), len(views)  # all of the deployment or none of it
    if views:
        views = wait_until_running(cluster.url, 20)
    wanted = sorted(view["record"]["id"] for view in views)
    deadline = time.monotonic() + CONVERGE_SECONDS
    while _on_host(docker_client, cluster.nodes) != wanted:
        assert time.monotonic() < deadline, (_on_host(docker_client, cluster.nodes), wanted)
        time.sleep(0.2)
    nodes = api(cluster.url, "/v1/nodes")["nodes"]
    assert {node["name"] for node in nodes} >= set(cluster.nodes)


def _deploy_or_error(url: str, body: dict[str, Any]) -> object:
    try:
        return deploy(url, "team-a", body)
    except OSError as error:  # the coordinator died under the request
        return error


def _nodes_of(url: str) -> dict[str, str]:
    """Container id -> its node, as the coordinator has it."""
    views = api(url, "/v1/containers")["containers"]
    return {view["record"]["id"]: view["record"]["node"] for view in views}


def _on_host(client: docker.DockerClient, nodes: list[str]) -> list[str]:
    found = []
    for node in nodes:
        for container in client.api.containers(all=True, filters=node_filter(node)):
            found.append(container["Labels"]["allot.id"])
    return sorted(found)


def test_borrowing_shows_over_quota_and_a_claim_on_min_preempts_it_on_the_host(
    cluster: Cluster, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    url = cluster.url
    for team in ("team-a", "team-b"):
        quota = {"namespace": team, "min": {"cpu": "1"}, "max": {"cpu": "2"}}
        api(url, f"/v1/elasticquotas/{team}", quota, method="PUT")
    body = {
        "name": "borrow",
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "count": 4,
        "cpu_bind": True,
        "resources": {"cpu": "0.5", "memory": "16Mi"},
    }
    deploy(url, "team-a", body)
    views = wait_until_running(url, 4)
    over = sorted(v["record"]["id"] for v in views if v["record"]["capacity"] == "over-quota")
    assert len(over) == 2
    shown = {}
    for node in cluster.nodes:
        status = subprocess.run(
            [
                str(BIN / "allot-agent"),
                "status",
                "--json",
                f"--state-dir={tmp_path}",
                f"--node-name={node}",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        for container in json.loads(status.stdout)["containers"]:
            shown[container["id"]] = container["capacity"]
    assert sorted(cid for cid, label in shown.items() if label == "over-quota") == over
    claim = body | {"name": "claim", "count": 1}
    (claimed,) = deploy(url, "team-b", claim)
    (preempted,) = api(url, "/v1/events?kind=preempted")["events"]
    assert preempted["container"] in over
    views = wait_until_running(url, 4)
    assert claimed["id"] in {v["record"]["id"] for v in views}
    deadline = time.monotonic() + CONVERGE_SECONDS
    while preempted["container"] in _on_host(docker_client, cluster.nodes):
        assert time.monotonic() < deadline, "the preempted container is still on the host"
        time.sleep(0.2)
    assert _on_host(docker_client, cluster.nodes) == sorted(v["record"]["id"] for v in views)


def test_a_killed_agents_containers_are_released_after_the_grace_and_removed_on_return(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    grace = 2.0
    toml = f"lost_node_grace_seconds = {grace}\n"
    with running_cluster(tmp_path, docker_client, nodes=2, toml=toml) as cluster:
        body = {
            "name": "svc",
            "image": IMAGE,
            "command": ["sleep", "3600"],
            "count": 1,
            "strategy": "each",
            "cpu_bind": True,
            "resources": {"cpu": "0.5", "memory": "16Mi"},
            "restart_policy": "no",
        }
        deploy(cluster.url, "team-a", body)
        wait_until_running(cluster.url, 2)
        lost_node, kept_node = cluster.nodes
        lost_agent = cluster.agents[0]
        lost_agent.kill9()
        killed_at = time.monotonic()
        wait_for_node_state(cluster.url, lost_node, "lost")
        # still allocated during the grace period (the node may come back)
        before = api(cluster.url, "/v1/containers")["containers"]
        assert len(before) == 2
        (gone,) = [v["record"]["id"] for v in before if v["record"]["node"] == lost_node]
        deadline = time.monotonic() + CONVERGE_SECONDS
        while lost_node in (views := _nodes_of(cluster.url)).values():
            assert time.monotonic() < deadline, views
            time.sleep(0.1)
        assert time.monotonic() - killed_at >= grace
        # The count is kept, whatever the restart policy: a stand-in of the released
        # container, on the node left.
        assert gone not in views
        assert sorted(views.values()) == [kept_node, kept_node]
        (released,) = api(cluster.url, "/v1/events?kind=released")["events"]
        assert (released["node"], released["container"]) == (lost_node, gone)
        # the container still runs on the host until its agent returns and removes it
        assert any(c.startswith("team-a-svc") for c in _on_host(docker_client, [lost_node]))
        lost_agent.start()
        wait_for_node_state(cluster.url, lost_node, "ready")
        while _on_host(docker_client, [lost_node]):
            assert time.monotonic() < deadline, _on_host(docker_client, [lost_node])
            time.sleep(0.1)
        while sorted(_on_host(docker_client, [kept_node])) != sorted(views):
            assert time.monotonic() < deadline, _on_host(docker_client, [kept_node])
            time.sleep(0.1)
