"""The churn case on real processes and the real engine: deployments of containers that
ignore SIGTERM, each deleted and replaced at once, round after round, against a real
coordinator and agent (one node offering every CPU of this host).

Each deploy is tried again while the coordinator refuses it for room that the deleted
containers still hold (their resources are kept until their agent reports them gone).
Docker's own event stream is the witness that no container of a deleted deployment is
created or started once its delete was answered: the coordinator answers only after the
node's agent acknowledged a desired state without those containers, which it does once no
create or start of theirs is under way (a start handed to the engine cannot be called
back) and none will begin. Both times are this host's clock, so the only slack is its
granularity (``CLOCK_SLACK_SECONDS``). A sampler reads the cpusets of the running containers
all along: no other container ever runs on a bound container's CPUs, though each new
bound container is given CPUs that a container just deleted still runs on. The node
catches up within a few stop timeouts.
"""

from __future__ import annotations

import threading
import time
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import pytest

from agent.runtime.labels import DEPLOYMENT, ID, node_filter
from shared.cpuset import CpuSet
from tests.docker.clusters import running_cluster
from tests.docker.conftest import IMAGE
from tests.docker.engine_events import engine_events
from tests.docker.runtimes import cpus
from tests.e2e.processes import api

pytestmark = pytest.mark.docker

DEAF_TO_SIGTERM = ["sh", "-c", 'trap "" TERM; sleep 3600']
STOP_TIMEOUT = 2  # the deployments' stop_timeout_seconds
ROUNDS = 4
ROUND_SECONDS = 1.0
SPREAD = 5  # containers of each round's unbound deployment
# Docker stamps its events in nanoseconds, the test reads time.time() once the answer is
# in: the same clock, so a millisecond covers any rounding between the two.
CLOCK_SLACK_SECONDS = 0.001
CATCH_UP_SECONDS = 6 * STOP_TIMEOUT  # a few stop timeouts, not minutes
# How long a delete's answer waits for the agent's acknowledgement (2 s by default). On a
# loaded machine the agent, busy creating the round's containers, once took longer; the
# coordinator then answers anyway (``hosts_acknowledged`` false) and promises nothing of
# later starts. Under the API client's 10 s timeout.
REMOVAL_ACK_SECONDS = 8
NAMESPACE = "churn"


@dataclass
class CoreSampler:
    """Samples, until stopped, the CPUs of ``node``'s running containers: those of a
    bound one must be its own."""

    node: str
    shared: list[str] = field(default_factory=list)  # each time two shared a CPU
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        client = docker.from_env(timeout=60)  # its own: the test's client is busy meanwhile
        try:
            while not self._stop.is_set():
                self._sample(client)
                self._stop.wait(0.1)
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()

    def _sample(self, client: docker.DockerClient) -> None:
        running: dict[str, CpuSet] = {}
        for found in client.api.containers(filters=node_filter(self.node)):
            try:
                attrs = client.api.inspect_container(found["Id"])
            except docker.errors.NotFound:
                continue
            if attrs["State"]["Running"]:
                running[found["Labels"][ID]] = CpuSet.parse(attrs["HostConfig"]["CpusetCpus"])
        for name, held in running.items():
            if "-bound" not in name:
                continue
            for other, theirs in running.items():
                if other != name and held & theirs:
                    self.shared.append(f"CPUs {held & theirs}: {name} and {other}")
        self.samples += 1


def deployment(name: str, *, count: int, bound: bool) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "command": DEAF_TO_SIGTERM,
        "count": count,
        "cpu_bind": bound,
        "resources": {"cpu": "1" if bound else "0.1", "memory": "16Mi"},
        "stop_timeout_seconds": STOP_TIMEOUT,
    }


def holds_only(client: docker.DockerClient, node: str, deployments: set[str]) -> bool:
    found = client.api.containers(all=True, filters=node_filter(node))
    return bool(found) and all(
        c["State"] == "running" and c["Labels"].get(DEPLOYMENT) in deployments for c in found
    )


def deploy_when_room(url: str, path: str, body: dict[str, Any]) -> None:
    """Deploy, again while the coordinator answers 409: the room may still be held by the
    containers just deleted, until their agent reports them gone."""
    deadline = time.monotonic() + CATCH_UP_SECONDS
    while True:
        try:
            api(url, path, body)
            return
        except urllib.error.HTTPError as error:
            if error.code != 409 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def churn(url: str, deleted: dict[str, float], client: docker.DockerClient, node: str) -> float:
    """The rounds, each deleting the last round's deployments and making new ones (their
    deletes' answer times go to ``deleted``); how long the node took to catch up after the
    last answer."""
    path = f"/v1/namespaces/{NAMESPACE}/deployments"
    for round_ in range(ROUNDS):
        if round_:
            for kind in ("bound", "spread"):
                name = f"{kind}{round_ - 1}"
                answer = api(url, f"{path}/{name}", method="DELETE")
                deleted[name] = time.time()
                assert answer["hosts_acknowledged"], answer
        deploy_when_room(url, path, deployment(f"bound{round_}", count=1, bound=True))
        deploy_when_room(url, path, deployment(f"spread{round_}", count=SPREAD, bound=False))
        answered = time.monotonic()
        time.sleep(ROUND_SECONDS)
    last = {f"bound{ROUNDS - 1}", f"spread{ROUNDS - 1}"}
    deadline = answered + CATCH_UP_SECONDS
    while not holds_only(client, node, last):
        assert time.monotonic() < deadline, "the node did not catch up in time"
        time.sleep(0.1)
    return time.monotonic() - answered


def test_deleted_deployments_never_start_late_and_bound_cores_are_never_shared(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    if len(cpus()) < 2:
        pytest.fail("this test needs 2 CPUs: one bound, one for the shared pool", pytrace=False)
    deleted: dict[str, float] = {}  # deployment -> when its delete was answered
    toml = f"removal_ack_seconds = {REMOVAL_ACK_SECONDS}\n"
    with running_cluster(
        tmp_path, docker_client, nodes=1, cpus_each=len(cpus()), toml=toml
    ) as cluster:
        url, node = cluster.url, cluster.nodes[0]
        sampler = CoreSampler(node)
        thread = threading.Thread(target=sampler.run, daemon=True)
        thread.start()
        try:
            with engine_events(node) as seen:
                caught_up = churn(url, deleted, docker_client, node)
        finally:
            sampler.stop()
            thread.join(timeout=10)

    assert sampler.samples > 10
    assert not sampler.shared, sampler.shared
    assert sum(event["Action"] == "start" for event in seen) >= 1 + SPREAD  # the last round
    late = [
        f"{event['Actor']['Attributes'][ID]}: {event['Action']}"
        f" {event['timeNano'] / 1e9 - answer:.3f}s after its delete was answered"
        for event in seen
        if (answer := deleted.get(event["Actor"]["Attributes"].get(DEPLOYMENT, ""))) is not None
        and event["timeNano"] / 1e9 > answer + CLOCK_SLACK_SECONDS
    ]
    assert not late, late
    assert caught_up < CATCH_UP_SECONDS
