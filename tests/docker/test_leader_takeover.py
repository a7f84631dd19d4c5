"""Three coordinators on a real etcd cluster, two real agents on the real Docker engine:
the leader is killed -9 in the middle of a 20-container deployment and of a lease load.
Afterwards every acknowledged write is there once, a new leader serves within the TTL
+ 2 s (on the deployments it kept as a standby), both agents are attached to it, and no
container was restarted."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import docker
import pytest

from agent.runtime.labels import node_filter
from bench.etcd_cluster import EtcdCluster
from client.api import ApiClient, ApiClientError
from tests.coordinator.store_engines import etcd_settings
from tests.docker.clusters import wait_until_running
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import cpus, managed, remove_all, started_at
from tests.e2e.conftest import services
from tests.e2e.coordinator_group import TTL_SECONDS, CoordinatorGroup
from tests.e2e.processes import API_TOKEN, Service, api, wait_for_node_state

pytestmark = pytest.mark.e2e
__all__ = ["services"]  # the fixture, used by name

DEPLOYMENTS = 20
TEMPLATES = """
[[resources]]
identifier_glob = "db.write"
capacity = 1000
safe_capacity = 0
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 300
refresh_interval = 10
"""


def deployment(index: int) -> dict[str, object]:
    return {
        "name": f"web-{index}",
        "count": 1,
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "cpu_bind": False,
        "resources": {"cpu": "0.05", "memory": "16Mi"},
    }


def running(client: docker.DockerClient, node: str) -> dict[str, tuple[str, str]]:
    """Each running container's Docker id and start time, by allot id. Taken while the
    agents work: a container that goes between the listing and the inspect is left out."""
    found = {}
    for listed in client.api.containers(filters=node_filter(node)):
        try:
            attrs = client.api.inspect_container(listed["Id"])
        except docker.errors.NotFound:
            continue
        if attrs["State"]["Running"]:
            found[attrs["Config"]["Labels"]["allot.id"]] = (
                attrs["Id"],
                attrs["State"]["StartedAt"],
            )
    return found


def lease_request(client_id: str) -> dict[str, object]:
    return {"client_id": client_id, "resources": [{"resource_id": "db.write", "wants": 1}]}


class Writer(threading.Thread):
    """Sends each write until it is answered (through whichever coordinator leads);
    ``acknowledged`` are those answered with success."""

    def __init__(self, servers: str, writes: list[tuple[str, dict[str, object]]]) -> None:
        super().__init__(daemon=True)
        self.client = ApiClient(servers, API_TOKEN)
        self.writes = writes
        self.acknowledged: list[str] = []
        self.failures: list[str] = []

    def run(self) -> None:
        for path, body in self.writes:
            deadline = time.monotonic() + 30
            while True:
                try:
                    self.client.post(path, body)
                    self.acknowledged.append(str(body.get("name") or body.get("client_id")))
                    break
                except ApiClientError as error:
                    if "deployment_exists" in str(error):
                        break  # an attempt whose answer was lost did commit: not twice
                    self.failures.append(str(error))
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.1)


def test_the_leader_killed_mid_deployment_and_lease_load_costs_seconds_and_no_container(
    tmp_path: Path,
    services: list[Service],
    etcd_cluster: EtcdCluster,
    docker_client: docker.DockerClient,
) -> None:
    host_cpus = cpus()
    group = CoordinatorGroup.start(
        tmp_path, services, etcd_settings(etcd_cluster), count=3, toml=TEMPLATES
    )
    old = group.wait_for_leader()
    group.wait_until_known(old)
    suffix = uuid.uuid4().hex[:6]
    nodes = [f"takeover-{suffix}-{i}" for i in range(2)]
    agents = []
    try:
        for node, offered in zip(nodes, host_cpus, strict=False):
            others = ",".join(str(cpu) for cpu in host_cpus if cpu != offered)
            agent = Service.agent(
                tmp_path, group.servers, node, args=(f"--reserved-cpus={others}",)
            )
            services.append(agent.start())
            agents.append(agent)
            wait_for_node_state(group.urls[old], node, "ready")
        deploys = Writer(
            group.servers,
            [("/v1/namespaces/team-a/deployments", deployment(i)) for i in range(DEPLOYMENTS)],
        )
        leases = Writer(
            group.servers,
            [
                (
                    "/v1/capacity",
                    {"client_id": f"c{i}", "resources": [{"resource_id": "db.write", "wants": 1}]},
                )
                for i in range(200)
            ],
        )
        deploys.start()
        leases.start()
        while len(deploys.acknowledged) < DEPLOYMENTS // 2:
            assert deploys.is_alive(), deploys.failures
            time.sleep(0.02)
        running_before = {n: running(docker_client, n) for n in nodes}
        offsets = [len(agent.text()) for agent in agents]
        group.coordinators[old].kill9()
        killed_at = time.monotonic()
        new = group.wait_for_leader([i for i in range(3) if i != old], timeout=TTL_SECONDS + 5)
        took = time.monotonic() - killed_at
        new_url = group.urls[new]
        deploys.join(60)
        leases.join(60)

        # Every acknowledged write is there, and none twice.
        names = [
            d["deployment"]["spec"]["name"]
            for d in api(new_url, "/v1/namespaces/team-a/deployments")["deployments"]
        ]
        assert sorted(names) == sorted(f"web-{i}" for i in range(DEPLOYMENTS))
        assert set(deploys.acknowledged) <= set(names)
        views = wait_until_running(new_url, DEPLOYMENTS)
        held = api(new_url, "/v1/resources/db.write/leases")["leases"]
        holders = [lease["client_id"] for lease in held]
        assert len(holders) == len(set(holders))
        assert set(leases.acknowledged) <= set(holders)
        # A new leader within TTL + 2 s, on the deployments it kept current as a standby
        # (no reading of the store), and both agents attached to it.
        assert took <= TTL_SECONDS + 2, f"a new leader served {took:.1f}s after the kill"
        group.coordinators[new].wait_for(r'WARNING leading .*state="kept by this standby"')
        for node, agent, offset in zip(nodes, agents, offsets, strict=True):
            agent.wait_for(rf"registered with coordinator node={node} url={new_url}", after=offset)
            assert wait_for_node_state(new_url, node, "ready")["state"] == "ready"
        # No container restarted: those running before the kill run on in the same
        # Docker containers, and each allot container is one Docker container.
        after = {n: started_at(docker_client, n) for n in nodes}
        for node in nodes:
            for container, before in running_before[node].items():
                assert after[node].get(container) == before, container
            for attrs in managed(docker_client, node).values():
                assert attrs["RestartCount"] == 0
        assert sorted(c for n in nodes for c in after[n]) == sorted(
            v["record"]["id"] for v in views
        )
        print(f"takeover: a new leader served {took:.2f}s after kill -9 (TTL {TTL_SECONDS}s)")
    finally:
        for agent in agents:  # first, so that none makes a container again
            agent.stop()
        for node in nodes:
            remove_all(docker_client, node)
