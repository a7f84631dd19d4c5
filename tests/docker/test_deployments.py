"""Deployments end to end: one coordinator and two agents on this host, each agent
offering one of the host's CPUs under its own node name, all real processes on the real
Docker engine. What the API says was planned is what Docker holds and the kernel enforces."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from agent.runtime.labels import node_filter
from shared.cpuset import CpuSet
from shared.protocol import Limits
from tests.docker.cgroups import cgroup_settings
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import cpus, limits_in, this_host
from tests.e2e.processes import Service, api, wait_for_node_state

pytestmark = pytest.mark.docker
CONVERGE_SECONDS = 45.0


@pytest.fixture
def cluster(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[tuple[str, list[str]]]:
    """The coordinator's URL and the two nodes, each offering one CPU of this host."""
    host_cpus = cpus()
    if len(host_cpus) < 2:
        pytest.fail("these tests need two CPUs (one per agent)", pytrace=False)
    suffix = uuid.uuid4().hex[:6]
    nodes = [f"e2e-{suffix}-a", f"e2e-{suffix}-b"]
    started: list[Service] = []
    coordinator = Service.coordinator(tmp_path).start()
    started.append(coordinator)
    try:
        url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
        for node, offered in zip(nodes, host_cpus[:2], strict=True):
            others = ",".join(str(cpu) for cpu in host_cpus if cpu != offered)
            agent = Service.agent(tmp_path, url, node, args=(f"--reserved-cpus={others}",))
            started.append(agent.start())
            wait_for_node_state(url, node, "ready")
        yield url, nodes
    finally:
        for service in reversed(started):
            if service.process is not None and service.process.poll() is None:
                service.process.kill()
                service.process.wait(timeout=10)
        for node in nodes:
            for found in docker_client.api.containers(all=True, filters=node_filter(node)):
                docker_client.api.remove_container(found["Id"], force=True)


def deploy(url: str, namespace: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    answer = api(url, f"/v1/namespaces/{namespace}/deployments", body)
    records: list[dict[str, Any]] = [view["record"] for view in answer["containers"]]
    return records


def wait_until_running(url: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + CONVERGE_SECONDS
    while True:
        views: list[dict[str, Any]] = api(url, "/v1/containers")["containers"]
        if len(views) == count and all(view["state"] == "running" for view in views):
            return views
        if time.monotonic() > deadline:
            raise AssertionError(f"not all {count} containers running: {views}")
        time.sleep(0.2)


def test_bound_and_unbound_containers_hold_exactly_their_plan_on_the_host(
    cluster: tuple[str, list[str]], docker_client: docker.DockerClient
) -> None:
    url, nodes = cluster
    common = {"image": IMAGE, "command": ["sleep", "3600"], "strategy": "each"}
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
    deploy(
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
    views = wait_until_running(url, 4)
    host = this_host()
    assert sorted(view["record"]["node"] for view in views) == sorted(nodes * 2)
    for view in views:
        record = view["record"]
        (found,) = docker_client.api.containers(filters={"label": [f"allot.id={record['id']}"]})
        attrs = docker_client.api.inspect_container(found["Id"])
        offered = CpuSet.parse(str(cpus()[nodes.index(record["node"])]))
        planned = host.settings(Limits(**record["limits"]))
        held = host.settings(limits_in(attrs))
        assert held == planned, record["id"]
        assert cgroup_settings(attrs["State"]["Pid"]) == planned, record["id"]
        assert planned.cpuset_cpus == offered  # each node's containers stay on its CPU
        if record["deployment"] == "bound":
            assert (planned.cpu_shares, planned.cpu_quota) == (717, -1)
        else:
            assert (planned.cpu_shares, planned.cpu_quota) == (1024, 20_000)
        reported = host.settings(Limits(**view["observed"]["limits"]))
        assert reported == planned, record["id"]


def test_a_realloc_changes_the_cgroups_live_without_a_restart(
    cluster: tuple[str, list[str]], docker_client: docker.DockerClient
) -> None:
    url, _ = cluster
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
    while cgroup_settings(before["State"]["Pid"]) != planned:
        assert time.monotonic() < deadline, cgroup_settings(before["State"]["Pid"])
        time.sleep(0.05)
    after = docker_client.api.inspect_container(found["Id"])
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    assert host.settings(limits_in(after)) == planned
