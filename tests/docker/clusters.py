"""A coordinator and agents of this host, all real processes: each agent offers one of
the host's CPUs under a node name of its own, and whatever containers the agents made are
removed afterwards.

with running_cluster(tmp_path, docker_client, nodes=1) as cluster:
    allotctl(cluster.url, "deploy", ...)
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.docker.runtimes import cpus, remove_all, remove_empty_pool_cgroups
from tests.e2e.processes import LEASE_SECONDS, Service, api, wait_for_node_state


@dataclass
class Cluster:
    url: str
    nodes: list[str]
    coordinator: Service
    agents: list[Service]  # in the order of ``nodes``


@contextlib.contextmanager
def running_cluster(
    tmp_path: Path,
    client: docker.DockerClient,
    *,
    nodes: int,
    port: int = 0,
    toml: str = "",
    agent_args: tuple[str, ...] = (),
    cpus_each: int = 1,
    lease_seconds: float = LEASE_SECONDS,
) -> Iterator[Cluster]:
    """Every node ready, each offering ``cpus_each`` CPUs of this host of its own;
    ``port`` fixes the coordinator's (to restart it at the same URL), ``toml`` is the
    coordinator's config file, ``agent_args`` more flags of every agent, and a node is
    lost after ``lease_seconds`` without a heartbeat."""
    host_cpus = cpus()
    if len(host_cpus) < nodes * cpus_each:
        need = f"{nodes * cpus_each} CPUs ({cpus_each} per agent)"
        pytest.fail(f"these tests need {need}", pytrace=False)
    suffix = uuid.uuid4().hex[:6]
    names = [f"e2e-{suffix}-{chr(ord('a') + i)}" for i in range(nodes)]
    coordinator = Service.coordinator(
        tmp_path, port=port, toml=toml, lease_seconds=lease_seconds
    ).start()
    started = [coordinator]
    try:
        url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
        for index, node in enumerate(names):
            offered = host_cpus[index * cpus_each : (index + 1) * cpus_each]
            others = ",".join(str(cpu) for cpu in host_cpus if cpu not in offered)
            flags = (f"--reserved-cpus={others}", *agent_args)
            agent = Service.agent(tmp_path, url, node, args=flags)
            started.append(agent.start())
            wait_for_node_state(url, node, "ready")
        yield Cluster(url=url, nodes=names, coordinator=coordinator, agents=started[1:])
    finally:
        for service in reversed(started):
            if service.process is not None and service.process.poll() is None:
                service.process.kill()
                service.process.wait(timeout=10)
        for node in names:
            remove_all(client, node)
        remove_empty_pool_cgroups()


CONVERGE_SECONDS = 45.0


def deploy(url: str, namespace: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST the deployment; the records of the containers placed."""
    answer = api(url, f"/v1/namespaces/{namespace}/deployments", body)
    records: list[dict[str, Any]] = [view["record"] for view in answer["containers"]]
    return records


def wait_until_running(url: str, count: int) -> list[dict[str, Any]]:
    """The containers' views once there are ``count`` and their agents report them running."""
    deadline = time.monotonic() + CONVERGE_SECONDS
    while True:
        views: list[dict[str, Any]] = api(url, "/v1/containers")["containers"]
        if len(views) == count and all(view["state"] == "running" for view in views):
            return views
        if time.monotonic() > deadline:
            raise AssertionError(f"not all {count} containers running: {views}")
        time.sleep(0.2)


def wait_for_weight(url: str, container_id: str, shares: int) -> None:
    """Until the container's agent reports it holding CPU weight ``shares`` (its pool's
    fair share reaches it after the next pool update)."""
    deadline = time.monotonic() + CONVERGE_SECONDS
    while True:
        observed = api(url, f"/v1/containers/{container_id}").get("observed") or {}
        if (observed.get("limits") or {}).get("cpu_shares") == shares:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"container {container_id} never held weight {shares}")
        time.sleep(0.1)
